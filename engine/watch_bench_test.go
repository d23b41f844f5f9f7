package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/storage"
)

// BenchmarkWatchFanout is the dispatcher's work for one renewal seen by
// 100 watchers of a namespace, each drained as the HTTP stream drains it:
// queueing (with its byte accounting) and taking the events.
func BenchmarkWatchFanout(b *testing.B) {
	env := newTestEnv(b)
	ctx := WithSharedWatchObjects(context.Background())
	sc := env.leases("default")
	created := env.mustCreate(b, "default", newLease("fan"))
	cur, _ := env.store.CurrentRevision(ctx)
	var watchers []BatchWatcher
	for range 100 {
		w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: fmt.Sprint(cur)})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		watchers = append(watchers, w.(BatchWatcher))
	}
	k := env.e.kinds[kindKey(GroupName, "leases")]
	res, err := env.store.List(ctx, k.listPrefix("default"), storage.ListOptions{})
	if err != nil || len(res.KVs) != 1 {
		b.Fatalf("list: %v %d", err, len(res.KVs))
	}
	kv := res.KVs[0]
	h := watchers[0].(*hubWatcher).hub
	var buf []watch.Event
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		kv.ModRevision = cur + 1 + int64(i)
		obj, err := env.e.decoded.get(k, kv.Key, kv.ModRevision, kv.Value)
		if err != nil {
			b.Fatal(err)
		}
		prev := kv
		he := &hubEvent{ev: storage.Event{Type: storage.EventPut, KV: kv, PrevKV: &prev}, cur: obj}
		h.dispatch([]*hubEvent{he}, kv.ModRevision)
		for _, w := range watchers {
			buf, _, _ = w.TakeEvents(buf[:0], 1<<30)
			if len(buf) != 1 {
				b.Fatalf("took %d events", len(buf))
			}
		}
	}
	_ = created
}
