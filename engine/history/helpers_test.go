package history

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// testStore is a Store over a real bbolt file, with the store itself at
// hand to look at the stored bytes.
type testStore struct {
	*Store
	kv storage.Interface
}

func newTestStore(t *testing.T) testStore {
	t.Helper()
	kv, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return testStore{Store: New(kv, nil), kv: kv}
}
