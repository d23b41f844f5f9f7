package boltdb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// damageRegion is where damageFile writes its bytes.
type damageRegion uint8

const (
	damageMeta     damageRegion = iota // a meta page's fields, checksum fixed or not
	damageData                         // a page of the tree
	damageFreelist                     // the synced freelist page
	damageRegions
)

// damageSeeds builds two healthy files: a store with a tree several levels
// deep, as leasehold writes it (no synced freelist), and the same with a
// synced, non-empty freelist, as another bbolt program may leave it.
func damageSeeds(t testing.TB) (plain, withFreelist []byte) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seed.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	val := []byte(strings.Repeat("v", 300))
	for i := range 400 {
		if _, err := s.Create(ctx, fmt.Sprintf("/registry/leases/ns%d/lease-%05d", i%7, i), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if plain, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	plain = trimToInUse(t, plain)
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: false})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		c := b.Cursor()
		i := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if i++; i%3 == 0 {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if withFreelist, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return plain, trimToInUse(t, withFreelist)
}

// trimToInUse cuts a file after the pages its meta pages say are in use:
// the rest is bbolt's preallocation, which only makes every case slower.
func trimToInUse(t testing.TB, data []byte) []byte {
	m0, err := parseBoltMeta(data)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := parseBoltMeta(data[m0.pageSize:])
	if err != nil {
		t.Fatal(err)
	}
	return data[:max(m0.pgid, m1.pgid)*uint64(m0.pageSize)]
}

// damageFile returns a copy of data with junk written into region: at
// offset off of the page'th page of the region (meta: 0 or 1; data: of the
// pages in use; freelist: its page), the meta checksum fixed after if fix.
func damageFile(data []byte, region damageRegion, page, off uint32, junk []byte, fix bool) []byte {
	out := append([]byte(nil), data...)
	m0, err := parseBoltMeta(out)
	if err != nil || len(junk) == 0 {
		return out
	}
	ps := int(m0.pageSize)
	var at int
	switch region % damageRegions {
	case damageMeta:
		at = int(page%2)*ps + boltPageHeaderSize + int(off%boltMetaChecksumAt)
	case damageData:
		if m0.pgid <= 2 {
			return out
		}
		at = int(2+uint64(page)%(m0.pgid-2))*ps + int(off)%ps
	case damageFreelist:
		if m0.freelist == boltNoFreelist || int(m0.freelist)*ps >= len(out) {
			return out
		}
		at = int(m0.freelist)*ps + int(off)%ps
	}
	if at >= len(out) {
		return out
	}
	copy(out[at:], junk)
	if fix && region%damageRegions == damageMeta {
		meta := out[int(page%2)*ps+boltPageHeaderSize:]
		h := fnv.New64a()
		h.Write(meta[:boltMetaChecksumAt])
		binary.LittleEndian.PutUint64(meta[boltMetaChecksumAt:], h.Sum64())
	}
	return out
}

// openDamaged writes content to a fresh file and opens it as the server
// and the offline commands would: a store or a refusal, never a panic (a
// panic in bbolt's own goroutines would end this test binary).
func openDamaged(t testing.TB, content []byte) error {
	path := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path, Options{Logger: quietLogger, OpenTimeout: 1})
	if err == nil {
		_ = s.Close()
	} else if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrFormat) {
		t.Fatalf("open: %v, want ErrDamaged or ErrFormat", err)
	}
	if cerr := CheckFile(context.Background(), path); cerr != nil && !errors.Is(cerr, ErrFormat) {
		t.Fatalf("check: %v, want ErrFormat", cerr)
	}
	return err
}

// TestOpenDamagedPages: random bytes written into data pages, meta pages
// (with the checksum fixed, so that bbolt trusts the fields) and the
// freelist end in a clean refusal or a clean open. In the hostile review
// random bytes in data pages made bbolt.Open panic in its freelist
// rebuild (recursivelyCheckPageKeyOrderInternal), outside any recover.
func TestOpenDamagedPages(t *testing.T) {
	plain, withFreelist := damageSeeds(t)
	rng := rand.New(rand.NewPCG(28, 7))
	refused := map[damageRegion]int{}
	const perRegion = 60
	for region := range damageRegions {
		for i := range perRegion {
			seed := plain
			if region == damageFreelist || i%2 == 1 {
				seed = withFreelist
			}
			junk := make([]byte, 1+rng.IntN(48))
			for j := range junk {
				junk[j] = byte(rng.Uint32())
			}
			content := damageFile(seed, region, rng.Uint32(), rng.Uint32(), junk, i%3 != 0)
			if err := openDamaged(t, content); err != nil {
				refused[region]++
			}
		}
	}
	t.Logf("refused of %d per region: meta %d, data %d, freelist %d", perRegion,
		refused[damageMeta], refused[damageData], refused[damageFreelist])
	if refused[damageData] == 0 || refused[damageMeta] == 0 || refused[damageFreelist] == 0 {
		t.Fatalf("no damage refused in some region: %v", refused)
	}
}

// FuzzOpenDamage: junk written into a region of a healthy file, as
// TestOpenDamagedPages does at random: never a panic, a fault or a hang.
func FuzzOpenDamage(f *testing.F) {
	plain, withFreelist := damageSeeds(f)
	f.Add(uint8(damageData), uint32(5), uint32(100), []byte("\xff\xff\xff\xff"), true, false)
	f.Add(uint8(damageMeta), uint32(0), uint32(0), []byte("\x03\x00\x00\x00\x00\x00\x00\x00"), true, true)
	f.Add(uint8(damageFreelist), uint32(0), uint32(10), []byte("\xff\xff"), false, true)
	f.Fuzz(func(t *testing.T, region uint8, page, off uint32, junk []byte, fix, freelist bool) {
		seed := plain
		if freelist {
			seed = withFreelist
		}
		if len(junk) > 4096 {
			junk = junk[:4096]
		}
		_ = openDamaged(t, damageFile(seed, damageRegion(region), page, off, junk, fix))
	})
}
