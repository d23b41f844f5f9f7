package boltdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/storage"
)

// TestQuotaBoundsDataButNotRenewals fills a small quota with large values
// (they stop at a quarter of it), then with small ones (they stop at the
// quota), and checks that a full store still takes same-size updates,
// smaller values and deletes, that refused writes leave no trace, and
// that the count survives a reopen.
func TestQuotaBoundsDataButNotRenewals(t *testing.T) {
	ctx := context.Background()
	const quota = 4 << 20
	s, path := openTemp(t, Options{QuotaBytes: quota})
	big := make([]byte, LargeValueBytes+1)
	var bigKeys int
	for ; ; bigKeys++ {
		_, err := s.Create(ctx, fmt.Sprintf("/big/%03d", bigKeys), big)
		if errors.Is(err, storage.ErrQuotaExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("create large value %d: %v", bigKeys, err)
		}
	}
	if want := quota / 4 / (LargeValueBytes + 9); bigKeys != want {
		t.Fatalf("%d large values of %d bytes were accepted; want %d (a quarter of a %d-byte quota)", bigKeys, len(big), want, quota)
	}
	rev, _ := s.CurrentRevision(ctx)

	// Small values still fit, up to the whole quota.
	small := make([]byte, 30000) // under LargeValueBytes
	var kvs []storage.KeyValue
	for i := 0; ; i++ {
		kv, err := s.Create(ctx, fmt.Sprintf("/small/%05d", i), small)
		if errors.Is(err, storage.ErrQuotaExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("create small value %d: %v", i, err)
		}
		kvs = append(kvs, kv)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DataBytes > quota || st.DataBytes < quota-30100 || st.QuotaBytes != quota {
		t.Fatalf("full store holds %d bytes of quota %d (stats quota %d); want just under the quota", st.DataBytes, quota, st.QuotaBytes)
	}
	if len(kvs) < 3*quota/4/30100 {
		t.Fatalf("only %d small values fit beside the large ones", len(kvs))
	}

	// A full store: a growing update is refused and leaves the key as it
	// was; a same-size update (a renewal) and a smaller one pass.
	kv := kvs[0]
	if _, err := s.Update(ctx, kv.Key, make([]byte, 2*len(small)), kv.ModRevision); !errors.Is(err, storage.ErrQuotaExceeded) {
		t.Fatalf("growing update in a full store: %v; want ErrQuotaExceeded", err)
	}
	if got, _ := s.Get(ctx, kv.Key); got.ModRevision != kv.ModRevision || len(got.Value) != len(small) {
		t.Fatalf("a refused update changed the key: %+v", got)
	}
	renewed := make([]byte, len(small))
	renewed[0] = 1
	if kv, err = s.Update(ctx, kv.Key, renewed, kv.ModRevision); err != nil {
		t.Fatalf("same-size update (a renewal) in a full store: %v", err)
	}
	if kv, err = s.Update(ctx, kv.Key, small[:10], kv.ModRevision); err != nil {
		t.Fatalf("shrinking update in a full store: %v", err)
	}
	if _, _, err := s.Delete(ctx, "/big/000", 0); err != nil {
		t.Fatalf("delete in a full store: %v", err)
	}
	// The delete freed a large value's room for another.
	if _, err := s.Create(ctx, "/big/again", big); err != nil {
		t.Fatalf("large value after a delete made room: %v", err)
	}
	before, _ := s.Stats(ctx)
	if before.Revision <= rev {
		t.Fatalf("revision %d did not move past %d", before.Revision, rev)
	}

	// The count is rebuilt from the file on open.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path, Options{QuotaBytes: quota, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after, _ := s2.Stats(ctx)
	if after.DataBytes != before.DataBytes {
		t.Fatalf("reopened store counts %d bytes; it counted %d before closing", after.DataBytes, before.DataBytes)
	}
	if _, err := s2.Create(ctx, "/big/more", big); !errors.Is(err, storage.ErrQuotaExceeded) {
		t.Fatalf("large value past a quarter of the quota after reopening: %v", err)
	}
}

// TestQuotaWithinOneRound: writes committed in one round are counted one
// after another, so a batch cannot pass the quota together.
func TestQuotaWithinOneRound(t *testing.T) {
	ctx := context.Background()
	const quota = 1 << 20
	s, _ := openTemp(t, Options{QuotaBytes: quota})
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			_, err := s.Create(ctx, fmt.Sprintf("/k/%02d", i), make([]byte, 50<<10))
			errs <- err
		}()
	}
	ok := 0
	for range 40 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case !errors.Is(err, storage.ErrQuotaExceeded):
			t.Fatal(err)
		}
	}
	st, _ := s.Stats(ctx)
	if want := quota / (50<<10 + 5); ok != want || st.DataBytes > quota {
		t.Fatalf("%d concurrent 50 KiB creates accepted, %d bytes held; want %d within %d", ok, st.DataBytes, want, quota)
	}
}

// TestQuotaLoweredBelowData: a store reopened with a quota below its data
// opens, warns once, refuses growth and still takes same-size updates.
func TestQuotaLoweredBelowData(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	kv, err := s.Create(ctx, "/k", make([]byte, 4000))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	s2, err := Open(ctx, path, Options{QuotaBytes: 1000, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("open with a quota below the data: %v", err)
	}
	defer s2.Close()
	if !strings.Contains(logged.String(), "exceed the storage quota") || !strings.Contains(logged.String(), "quotaBytes=1000") {
		t.Errorf("no warning of the data over the quota in the log:\n%s", logged.String())
	}
	if _, err := s2.Create(ctx, "/k2", []byte("x")); !errors.Is(err, storage.ErrQuotaExceeded) {
		t.Fatalf("create over the quota: %v; want ErrQuotaExceeded", err)
	}
	if _, err := s2.Update(ctx, "/k", make([]byte, 4000), kv.ModRevision); err != nil {
		t.Fatalf("same-size update over the quota: %v", err)
	}
}
