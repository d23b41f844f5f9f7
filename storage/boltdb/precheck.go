package boltdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// ErrDamaged reports a database file that bbolt could open only by
// silently losing data (an empty file would be re-initialised, a damaged
// meta page replaced by the older one) or not at all without crashing the
// process (a truncated file is mapped past its end, which faults).
var ErrDamaged = errors.New("boltdb: damaged database file")

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
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkFile inspects an existing database file before bbolt maps it, and
// refuses what bbolt would either silently accept with data lost or crash
// on. A missing file is fine (a new store). acceptMetaFallback lets a file
// whose newer meta page is damaged open on the older one, which may lose
// the last committed transaction; it is logged by the caller.
func checkFile(path string, acceptMetaFallback bool) (fallback string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	size := st.Size()
	remedy := "restore a backup with `leasehold restore`, or move the file away to start an empty store"
	if size == 0 {
		return "", fmt.Errorf("%w: %s is empty (0 bytes), so bbolt would start an empty store in its place; "+
			"it was truncated or never written: %s", ErrDamaged, path, remedy)
	}
	// The first meta page tells the page size; if it is damaged, try the
	// host's page size for the second.
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("boltdb: read %s: %w", path, err)
	}
	head = head[:n]
	m0, err0 := parseBoltMeta(head)
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	if pageSize < 512 || pageSize > 64<<10 {
		return "", fmt.Errorf("%w: %s: implausible page size %d: %s", ErrDamaged, path, pageSize, remedy)
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
			return "", fmt.Errorf("%w: %s is %d bytes and not a bbolt file: %s", ErrDamaged, path, size, remedy)
		}
		return "", fmt.Errorf("%w: %s: both meta pages are unreadable (first: %v; second: %v): %s",
			ErrDamaged, path, err0, err1, remedy)
	case err0 != nil || err1 != nil:
		bad, good, goodMeta, why := 0, 1, m1, err0
		if err1 != nil {
			bad, good, goodMeta, why = 1, 0, m0, err1
		}
		msg := fmt.Sprintf("meta page %d of %s is damaged (%v); bbolt would open the file on meta page %d (transaction %d), "+
			"which loses the last committed write if the damaged page was the newer one", bad, path, why, good, goodMeta.txid)
		if !acceptMetaFallback {
			return "", fmt.Errorf("%w: %s: %s, or accept that loss with --accept-meta-fallback", ErrDamaged, msg, remedy)
		}
		fallback, use = msg, goodMeta
	default:
		use = m0
		if m1.txid > m0.txid {
			use = m1
		}
	}
	if need := int64(use.pgid) * pageSize; size < need {
		return "", fmt.Errorf("%w: %s is %d bytes but its meta page says %d pages of %d bytes (%d bytes) are in use: "+
			"the file was truncated: %s", ErrDamaged, path, size, use.pgid, pageSize, need, remedy)
	}
	return fallback, nil
}

// errNoMagic is parseBoltMeta's error for a page without bbolt's magic.
var errNoMagic = errors.New("no bbolt magic number")
