package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkInProcessRenewal is the store's side of a renewal on a member
// (a linearizable Get, a stale Get and a compare-and-swap Update through
// the in-process client) over 1,000 keys from parallel renewers: the
// allocations per renewal show what every read copies of etcd's
// uncommitted writes (memberBackendBatchLimit).
func BenchmarkInProcessRenewal(b *testing.B) {
	m, _ := startMember(b, b.TempDir())
	s := openInProcess(b, m, "/bench")
	ctx := context.Background()
	const keys = 1000
	value := make([]byte, 400)
	for i := range keys {
		if _, err := s.Create(ctx, fmt.Sprintf("/k%d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("/k%d", next.Add(1)%keys)
			if _, err := s.Get(ctx, key); err != nil {
				b.Error(err)
				return
			}
			kv, err := s.GetStale(ctx, key)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := s.Update(ctx, key, value, kv.ModRevision); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
