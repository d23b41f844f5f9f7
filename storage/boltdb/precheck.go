package boltdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// ErrDamaged reports a database file that bbolt could open only by
// silently losing data (an empty file would be re-initialised, a damaged
// meta page replaced by the older one) or not at all without crashing the
// process (a truncated file is mapped past its end, which faults).
var ErrDamaged = errors.New("boltdb: damaged database file")

// ErrInUse reports a database file that another process holds open.
var ErrInUse = errors.New("boltdb: database file in use")

// bbolt's on-disk meta page (go.etcd.io/bbolt's internal/common Meta), the
// facts this check relies on: two meta pages at page 0 and page 1, each a
// 16-byte page header followed by magic, version, page size, flags, the
// root bucket (root page id, sequence), the freelist page id, the high
// water mark (pgid: pages in use), the transaction id and an FNV-64a
// checksum of the meta fields before it. bbolt writes them in the host's
// byte order; every platform leasehold ships for is little-endian.
const (
	boltPageHeaderSize = 16
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltMetaChecksumAt = 56 // offset of the checksum within the meta
	boltMetaSize       = 64
)

// boltMeta is what checkFile reads of one meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's root page
	freelist uint64 // boltNoFreelist when the freelist is not synced
	pgid     uint64
	txid     uint64
}

// parseBoltMeta decodes and verifies one meta page's fields.
func parseBoltMeta(page []byte) (boltMeta, error) {
	if len(page) < boltPageHeaderSize+boltMetaSize {
		return boltMeta{}, errors.New("shorter than a meta page")
	}
	m := page[boltPageHeaderSize : boltPageHeaderSize+boltMetaSize]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, errNoMagic
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaChecksumAt])
	if h.Sum64() != le.Uint64(m[boltMetaChecksumAt:]) {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkFile inspects an existing database file before bbolt maps it, and
// refuses what bbolt would either silently accept with data lost or crash
// on. A missing file is fine (a new store). acceptMetaFallback lets a file
// whose newer meta page is damaged open on the older one, which may lose
// the last committed transaction; it is logged by the caller. clean is
// the marker of the file's last clean close ("" for none): when the file
// still matches it, the page walk is skipped (walked false; see
// cleanclose.go).
func checkFile(path string, acceptMetaFallback bool, clean string) (fallback string, walked bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	size := st.Size()
	remedy := "restore a backup with `leasehold restore`, or move the file away to start an empty store"
	if size == 0 {
		return "", false, fmt.Errorf("%w: %s is empty (0 bytes), so bbolt would start an empty store in its place; "+
			"it was truncated or never written: %s", ErrDamaged, path, remedy)
	}
	// The first meta page tells the page size; if it is damaged, try the
	// host's page size for the second.
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", false, fmt.Errorf("boltdb: read %s: %w", path, err)
	}
	head = head[:n]
	m0, err0 := parseBoltMeta(head)
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	if pageSize < 512 || pageSize > 64<<10 {
		return "", false, fmt.Errorf("%w: %s: implausible page size %d: %s", ErrDamaged, path, pageSize, remedy)
	}
	var m1 boltMeta
	err1 := errors.New("the file ends before it")
	if size >= 2*pageSize && int64(len(head)) >= 2*pageSize {
		m1, err1 = parseBoltMeta(head[pageSize:])
	}
	var use boltMeta
	switch {
	case err0 != nil && err1 != nil:
		if errors.Is(err0, errNoMagic) && size < 2*pageSize {
			return "", false, fmt.Errorf("%w: %s is %d bytes and not a bbolt file: %s", ErrDamaged, path, size, remedy)
		}
		return "", false, fmt.Errorf("%w: %s: both meta pages are unreadable (first: %v; second: %v): %s",
			ErrDamaged, path, err0, err1, remedy)
	case err0 != nil || err1 != nil:
		bad, good, goodMeta, why := 0, 1, m1, err0
		if err1 != nil {
			bad, good, goodMeta, why = 1, 0, m0, err1
		}
		msg := fmt.Sprintf("meta page %d of %s is damaged (%v); bbolt would open the file on meta page %d (transaction %d), "+
			"which loses the last committed write if the damaged page was the newer one", bad, path, why, good, goodMeta.txid)
		if !acceptMetaFallback {
			return "", false, fmt.Errorf("%w: %s: %s, or accept that loss with --accept-meta-fallback", ErrDamaged, msg, remedy)
		}
		fallback, use = msg, goodMeta
	default:
		use = m0
		if m1.txid > m0.txid {
			use = m1
		}
	}
	if use.pgid > uint64(size/pageSize) {
		return "", false, fmt.Errorf("%w: %s is %d bytes but its meta page says %d pages of %d bytes are in use: "+
			"the file was truncated or the meta page is damaged: %s", ErrDamaged, path, size, use.pgid, pageSize, remedy)
	}
	if need := int64(use.pgid) * pageSize; size < need {
		return "", false, fmt.Errorf("%w: %s is %d bytes but its meta page says %d pages of %d bytes (%d bytes) are in use: "+
			"the file was truncated: %s", ErrDamaged, path, size, use.pgid, pageSize, need, remedy)
	}
	// bbolt walks every page of the tree as it opens (to rebuild the
	// freelist we never sync), and a damaged page makes it panic in its
	// own goroutine, which no recover reaches: walk the tree first, with
	// every bound checked.
	if clean != "" && fallback == "" {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", false, fmt.Errorf("boltdb: read %s: %w", path, err)
		}
		if stamp, err := fileStamp(f); err == nil && stamp == clean {
			return "", false, nil
		}
	}
	if err := checkTree(f, size, pageSize, use); err != nil {
		return "", false, fmt.Errorf("%w: %s: %v: %s", ErrDamaged, path, err, remedy)
	}
	return fallback, true, nil
}

// openBolt is bolt.Open with a panic or a memory fault in it (on damage
// checkFile did not see) reported as ErrDamaged instead of crashing: the
// refusal with exit 1 either way. What bbolt leaves open after such a
// panic is not closed; the caller exits.
func openBolt(path string, mode os.FileMode, o *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("%w: %s: bbolt panicked opening it: %v: "+
				"restore a backup with `leasehold restore`, or move the file away to start an empty store", ErrDamaged, path, p)
		}
	}()
	return bolt.Open(path, mode, o)
}

// errNoMagic is parseBoltMeta's error for a page without bbolt's magic.
var errNoMagic = errors.New("no bbolt magic number")

// bbolt's page layout (go.etcd.io/bbolt's internal/common Page): a 16-byte
// header (id, flags, count, overflow) then count 16-byte elements. A
// branch element is (pos, ksize uint32, child pgid uint64), a leaf element
// (flags, pos, ksize, vsize uint32); pos counts from the element itself,
// and a leaf's value follows its key. A bucket's value in its parent's leaf
// is its root page id and sequence, then, for an inline bucket (root 0),
// its page. A freelist page lists page ids (count 0xFFFF: the first id is
// the real count).
const (
	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltFreelistPage = 0x10
	boltBucketLeaf   = 0x01
	boltElementSize  = 16
	boltBucketHeader = 16
	boltNoFreelist   = ^uint64(0)
	boltMaxDepth     = 64 // far over any real tree: bounds the recursion
)

// treeChecker walks a bbolt file's pages from the meta page in use,
// refusing what bbolt's open-time walk would panic or report on: a page
// out of the file or over the high water mark, a page reached twice (a
// cycle included), a page of the wrong type, an element or key outside
// its page, keys out of order, a freelist that lists a page in use.
type treeChecker struct {
	f        io.ReaderAt
	size     int64
	pageSize int64
	hwm      uint64
	seen     map[uint64]bool
	freed    map[uint64]bool
}

func checkTree(f io.ReaderAt, size, pageSize int64, m boltMeta) error {
	c := &treeChecker{f: f, size: size, pageSize: pageSize, hwm: m.pgid, seen: map[uint64]bool{}, freed: map[uint64]bool{}}
	if m.freelist != boltNoFreelist {
		if err := c.freelist(m.freelist); err != nil {
			return err
		}
	}
	if m.root < 2 {
		return fmt.Errorf("the root bucket's page is %d", m.root)
	}
	_, err := c.node(m.root, nil, nil, 0)
	return err
}

// page reads page id and its overflow pages, marking them reached.
func (c *treeChecker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, fmt.Errorf("page %d is outside [2, %d), the pages in use", id, c.hwm)
	}
	off := int64(id) * c.pageSize
	if off/c.pageSize != int64(id) || off+boltPageHeaderSize > c.size {
		return nil, fmt.Errorf("page %d is past the end of the file", id)
	}
	var hdr [boltPageHeaderSize]byte
	if _, err := c.f.ReadAt(hdr[:], off); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(hdr[0:]); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if id+overflow >= c.hwm {
		return nil, fmt.Errorf("page %d and its %d overflow pages run past the %d pages in use", id, overflow, c.hwm)
	}
	n := int64(overflow+1) * c.pageSize
	if off+n > c.size {
		return nil, fmt.Errorf("page %d and its %d overflow pages run past the end of the file", id, overflow)
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen[i] {
			return nil, fmt.Errorf("page %d is reached twice", i)
		}
		if c.freed[i] {
			return nil, fmt.Errorf("page %d is in use and on the freelist", i)
		}
		c.seen[i] = true
	}
	buf := make([]byte, n)
	if _, err := c.f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

func (c *treeChecker) freelist(id uint64) error {
	p, err := c.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	le := binary.LittleEndian
	if flags := le.Uint16(p[8:]); flags != boltFreelistPage {
		return fmt.Errorf("freelist page %d has type %#x", id, flags)
	}
	count, at := uint64(le.Uint16(p[10:])), uint64(boltPageHeaderSize)
	if count == 0xFFFF {
		if len(p) < boltPageHeaderSize+8 {
			return fmt.Errorf("freelist page %d is too short for its count", id)
		}
		count, at = le.Uint64(p[boltPageHeaderSize:]), at+8
	}
	if count > uint64(len(p)) || at+8*count > uint64(len(p)) {
		return fmt.Errorf("freelist page %d lists %d pages, more than it holds", id, count)
	}
	for i := range count {
		free := le.Uint64(p[at+8*i:])
		if free < 2 || free >= c.hwm {
			return fmt.Errorf("freelist page %d lists page %d, outside [2, %d)", id, free, c.hwm)
		}
		if c.freed[free] || c.seen[free] {
			return fmt.Errorf("freelist page %d lists page %d twice, or its own", id, free)
		}
		c.freed[free] = true
	}
	return nil
}

// node checks the subtree at page id, whose keys must be >= min and < max
// (nil: unbounded), and returns its largest key.
func (c *treeChecker) node(id uint64, min, max []byte, depth int) ([]byte, error) {
	if depth > boltMaxDepth {
		return nil, fmt.Errorf("page %d is deeper than %d levels", id, boltMaxDepth)
	}
	p, err := c.page(id)
	if err != nil {
		return nil, err
	}
	return c.elements(p, id, min, max, depth, false)
}

// elements checks the elements of page p (a real page, or an inline
// bucket's), recursing into children and buckets.
func (c *treeChecker) elements(p []byte, id uint64, min, max []byte, depth int, inline bool) ([]byte, error) {
	le := binary.LittleEndian
	if len(p) < boltPageHeaderSize {
		return nil, fmt.Errorf("page %d is shorter than its header", id)
	}
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != boltBranchPage && flags != boltLeafPage || inline && flags != boltLeafPage {
		return nil, fmt.Errorf("page %d has type %#x where a tree page belongs", id, flags)
	}
	if boltPageHeaderSize+count*boltElementSize > len(p) {
		return nil, fmt.Errorf("page %d has %d elements, more than it holds", id, count)
	}
	// slice returns p[at+pos : at+pos+n], or false when outside p.
	slice := func(at int, pos, n uint32) ([]byte, bool) {
		start := uint64(at) + uint64(pos)
		end := start + uint64(n)
		if end > uint64(len(p)) {
			return nil, false
		}
		return p[start:end], true
	}
	running := min
	var last []byte
	for i := range count {
		at := boltPageHeaderSize + i*boltElementSize
		e := p[at : at+boltElementSize]
		var key, val []byte
		var child uint64
		ok := false
		if flags == boltBranchPage {
			key, ok = slice(at, le.Uint32(e[0:]), le.Uint32(e[4:]))
			child = le.Uint64(e[8:])
		} else {
			key, ok = slice(at, le.Uint32(e[4:]), le.Uint32(e[8:])+le.Uint32(e[12:]))
			if ok && uint64(le.Uint32(e[8:]))+uint64(le.Uint32(e[12:])) <= uint64(len(key)) {
				key, val = key[:le.Uint32(e[8:])], key[le.Uint32(e[8:]):]
			} else {
				ok = false
			}
		}
		if !ok {
			return nil, fmt.Errorf("page %d: element %d lies outside the page", id, i)
		}
		if i == 0 && running != nil && bytes.Compare(running, key) > 0 ||
			i > 0 && bytes.Compare(running, key) >= 0 {
			return nil, fmt.Errorf("page %d: key %d is out of order", id, i)
		}
		if max != nil && bytes.Compare(key, max) >= 0 {
			return nil, fmt.Errorf("page %d: key %d is past its parent's next key", id, i)
		}
		if flags == boltBranchPage {
			next := max
			if i+1 < count {
				n := p[at+boltElementSize : at+2*boltElementSize]
				if k, ok := slice(at+boltElementSize, le.Uint32(n[0:]), le.Uint32(n[4:])); ok {
					next = k
				}
			}
			sub, err := c.node(child, key, next, depth+1)
			if err != nil {
				return nil, err
			}
			running, last = key, key
			if sub != nil {
				running, last = sub, sub
			}
			continue
		}
		running, last = key, key
		if le.Uint32(e[0:])&boltBucketLeaf == 0 {
			continue
		}
		if len(val) < boltBucketHeader {
			return nil, fmt.Errorf("page %d: bucket %d's header is cut short", id, i)
		}
		if root := le.Uint64(val); root != 0 {
			if _, err := c.node(root, nil, nil, depth+1); err != nil {
				return nil, err
			}
		} else if _, err := c.elements(val[boltBucketHeader:], id, nil, nil, depth+1, true); err != nil {
			return nil, fmt.Errorf("inline bucket: %w", err)
		}
	}
	return last, nil
}
