package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd/etcdtest"
)

// TestSettleUnknownOutcomes: a write whose answer was lost is settled by
// what became of its key, on a real etcd: applied (the answer was lost
// after the commit) is a success with the write's revisions; not applied
// (lost before) is sent again and succeeds once; another writer first is
// a conflict (or, for a create, an existing key); a history compacted
// past the write leaves the outcome unknown. Each case makes the real
// state of its row, then asks settleCAS as Update and Create would after
// an unknown outcome.
func TestSettleUnknownOutcomes(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := open(t, c.Endpoints(), Options{Prefix: "/settle"})
	ctx := context.Background()
	cause := fmt.Errorf("etcd: the leader changed: %w", errOutcomeUnknown)
	put := func(key, value string) *clientv3.PutResponse {
		t.Helper()
		r, err := s.client.Put(ctx, s.key(key), value)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// sender is Update's (or Create's) send, counting its calls.
	sender := func(key, value string, expected int64, sends *int) func(context.Context) (*clientv3.TxnResponse, error) {
		k := s.key(key)
		cmp := clientv3.Compare(clientv3.ModRevision(k), "=", expected)
		if expected == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		}
		return func(ctx context.Context) (*clientv3.TxnResponse, error) {
			*sends++
			return s.txn(ctx, []clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpPut(k, value)}, nil)
		}
	}

	t.Run("update applied", func(t *testing.T) {
		before := put("a", "v1").Header.Revision
		applied := put("a", "v2").Header.Revision // the write, its answer lost
		put("a", "v3")                            // a later writer on top
		sends := 0
		mod, created, err := s.settleCAS(ctx, time.Now(), s.key("a"), []byte("v2"), before, false, sender("a", "v2", before, &sends), cause)
		if err != nil || mod != applied || created != before || sends != 0 {
			t.Errorf("settled (%d, %d, %v) after %d sends, want (%d, %d, nil) and none", mod, created, err, sends, applied, before)
		}
	})
	t.Run("update not applied", func(t *testing.T) {
		before := put("b", "v1").Header.Revision
		sends := 0
		mod, _, err := s.settleCAS(ctx, time.Now(), s.key("b"), []byte("v2"), before, false, sender("b", "v2", before, &sends), cause)
		got, gerr := s.Get(ctx, "b")
		if err != nil || sends != 1 || gerr != nil || string(got.Value) != "v2" || got.ModRevision != mod {
			t.Errorf("settled (%d, %v) after %d sends, key %q at %d (%v); want the write sent once more and applied", mod, err, sends, got.Value, got.ModRevision, gerr)
		}
	})
	t.Run("update lost to another writer", func(t *testing.T) {
		before := put("c", "v1").Header.Revision
		put("c", "theirs")
		sends := 0
		_, _, err := s.settleCAS(ctx, time.Now(), s.key("c"), []byte("mine"), before, false, sender("c", "mine", before, &sends), cause)
		if !errors.Is(err, storage.ErrConflict) || sends != 0 {
			t.Errorf("settled %v after %d sends, want a conflict and none", err, sends)
		}
	})
	t.Run("create applied", func(t *testing.T) {
		applied := put("d", "mine").Header.Revision
		sends := 0
		mod, created, err := s.settleCAS(ctx, time.Now(), s.key("d"), []byte("mine"), 0, true, sender("d", "mine", 0, &sends), cause)
		if err != nil || mod != applied || created != applied || sends != 0 {
			t.Errorf("settled (%d, %d, %v) after %d sends, want (%d, %d, nil) and none", mod, created, err, sends, applied, applied)
		}
	})
	t.Run("create not applied", func(t *testing.T) {
		sends := 0
		_, _, err := s.settleCAS(ctx, time.Now(), s.key("e"), []byte("mine"), 0, true, sender("e", "mine", 0, &sends), cause)
		got, gerr := s.Get(ctx, "e")
		if err != nil || sends != 1 || gerr != nil || string(got.Value) != "mine" {
			t.Errorf("settled %v after %d sends, key %q (%v); want the create sent once more and applied", err, sends, got.Value, gerr)
		}
	})
	t.Run("create lost to another writer", func(t *testing.T) {
		put("f", "theirs")
		sends := 0
		_, _, err := s.settleCAS(ctx, time.Now(), s.key("f"), []byte("mine"), 0, true, sender("f", "mine", 0, &sends), cause)
		if !errors.Is(err, storage.ErrKeyExists) || sends != 0 {
			t.Errorf("settled %v after %d sends, want the key existing and none", err, sends)
		}
	})
	t.Run("history compacted", func(t *testing.T) {
		before := put("g", "v1").Header.Revision
		put("g", "v2")
		last := put("g", "v3").Header.Revision
		if _, err := s.client.Compact(ctx, last); err != nil {
			t.Fatal(err)
		}
		sends := 0
		_, _, err := s.settleCAS(ctx, time.Now(), s.key("g"), []byte("v2"), before, false, sender("g", "v2", before, &sends), cause)
		if err != cause || sends != 0 {
			t.Errorf("settled %v after %d sends, want the outcome left unknown (%v)", err, sends, cause)
		}
	})
}
