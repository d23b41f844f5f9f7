package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/storage"
)

// A stored value that does not decode (a damaged record, a bug in an
// older version) must not take its neighbours down with it: lists and
// watches skip it, reads and writes of it answer kube-apiserver's corrupt
// object error, and a delete with ignoreStoreReadErrorWithClusterBreakingPotential
// removes it. undecodableRecords remembers such values, so that each is
// logged once and counted (UndecodableRecords, for /metrics and /readyz).

// maxRememberedUndecodable bounds the keys remembered; past it records are
// still counted and skipped, only no longer named.
const maxRememberedUndecodable = 1024

// UndecodableStats describes the stored values the engine found it could
// not decode since it started.
type UndecodableStats struct {
	// Records is how many distinct records are known to be undecodable
	// now (a record deleted through the API is forgotten).
	Records int
	// Skipped counts the times a list, watch or read met one.
	Skipped uint64
	// Keys names up to maxRememberedUndecodable of them, sorted.
	Keys []string
}

type undecodableRecords struct {
	skipped atomic.Uint64
	known   atomic.Int64 // len(revs), read without the lock
	mu      sync.Mutex
	revs    map[string]int64 // storage key: the revision found undecodable
	// deleted are the revisions deleted through the API: watches still
	// meet them, as the previous value of the deletion, and must not
	// bring them back.
	deleted map[string]int64
}

// UndecodableRecords reports the undecodable stored values met so far.
func (e *Engine) UndecodableRecords() UndecodableStats {
	u := &e.undecodable
	st := UndecodableStats{Skipped: u.skipped.Load()}
	u.mu.Lock()
	defer u.mu.Unlock()
	st.Records = len(u.revs)
	for k := range u.revs {
		st.Keys = append(st.Keys, k)
	}
	slices.Sort(st.Keys)
	return st
}

// noteUndecodable counts one meeting with an undecodable value, and logs
// it the first time this revision of the key is met.
func (e *Engine) noteUndecodable(ctx context.Context, kv storage.KeyValue, err error) {
	u := &e.undecodable
	u.skipped.Add(1)
	u.mu.Lock()
	if u.revs == nil {
		u.revs = map[string]int64{}
	}
	rev, seen := u.revs[kv.Key]
	first := !seen || rev != kv.ModRevision
	if gone, ok := u.deleted[kv.Key]; ok && gone == kv.ModRevision {
		first = false
	}
	if first && (seen || len(u.revs) < maxRememberedUndecodable) {
		delete(u.deleted, kv.Key)
		u.revs[kv.Key] = kv.ModRevision
		u.known.Store(int64(len(u.revs)))
	}
	u.mu.Unlock()
	if first {
		e.log.ErrorContext(ctx, "Stored object cannot be decoded: lists and watches skip it; delete it with the DeleteOption ignoreStoreReadErrorWithClusterBreakingPotential=true",
			"key", kv.Key, "revision", kv.ModRevision, "error", err.Error())
	}
}

// forgetUndecodable drops a deleted key.
func (e *Engine) forgetUndecodable(key string) {
	u := &e.undecodable
	if u.known.Load() == 0 {
		return
	}
	u.mu.Lock()
	if rev, ok := u.revs[key]; ok {
		if u.deleted == nil {
			u.deleted = map[string]int64{}
		}
		if len(u.deleted) < maxRememberedUndecodable {
			u.deleted[key] = rev
		}
	}
	delete(u.revs, key)
	u.known.Store(int64(len(u.revs)))
	u.mu.Unlock()
}

// corruptObject is the error kube-apiserver answers for a stored object
// it cannot decode: its storage layer's corrupt object error, which
// reaches the client as a 500 without a reason. The key is named as
// upstream's etcd key.
func (k *kind) corruptObject(namespace, name string, err error) error {
	return unknownError(fmt.Sprintf("StorageError: corrupt object, Code: 6, Key: %s%s/%s, ResourceVersion: 0, AdditionalErrorMsg: %v",
		k.upstreamKeyPrefix, namespace, name, err))
}

// skippedWarning is the Warning a list answers with for each undecodable
// object it leaves out.
func (k *kind) skippedWarning(key string) string {
	return fmt.Sprintf("%s %s was left out: its stored value cannot be decoded; delete it with ignoreStoreReadErrorWithClusterBreakingPotential=true",
		k.res.Singular, key[len(k.keyPrefix):])
}

// storedKinds are the kinds CheckStoredValue knows, built on first use.
var storedKinds = sync.OnceValue(allKinds)

// CheckStoredValue reports whether the value stored under key decodes as
// the object its key prefix names; keys of no served resource are not
// the engine's and pass. leasehold backup checks every record with it.
func CheckStoredValue(key string, value []byte) error {
	for _, k := range storedKinds() {
		if strings.HasPrefix(key, k.keyPrefix) {
			_, err := k.decode(value, 1)
			return err
		}
	}
	return nil
}
