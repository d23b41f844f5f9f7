package boltdb

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/storage"
)

// leaseValue is about the size of a stored Lease.
var leaseValue = bytes.Repeat([]byte("x"), 600)

// fill creates n keys from many goroutines (so creation is group-committed).
func fill(b *testing.B, s *Store, prefix string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := s.Create(context.Background(), fmt.Sprintf("%s%06d", prefix, i), leaseValue); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkUpdate measures a lease-renewal-like CAS (Get, then Update with
// the seen revision) with fsync on; each goroutine renews its own key.
func BenchmarkUpdate(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("p%d", par), func(b *testing.B) {
			s, _ := openTemp(b, Options{})
			fill(b, s, "/lease/", 1000)
			var id atomic.Int64
			c0 := s.commits.Load()
			b.ReportAllocs()
			b.ResetTimer()
			run := func(pb interface{ Next() bool }) {
				key := fmt.Sprintf("/lease/%06d", id.Add(1)-1)
				ctx := context.Background()
				for pb.Next() {
					kv, err := s.Get(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Update(ctx, key, leaseValue, kv.ModRevision); err != nil {
						b.Error(err)
						return
					}
				}
			}
			if par == 1 {
				run(&serial{n: b.N})
			} else {
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) { run(pb) })
			}
			b.StopTimer()
			if commits := s.commits.Load() - c0; commits > 0 {
				b.ReportMetric(float64(b.N)/float64(commits), "ops/commit")
			}
		})
	}
}

// serial adapts a plain loop to the pb.Next shape.
type serial struct{ i, n int }

func (s *serial) Next() bool { s.i++; return s.i <= s.n }

func BenchmarkGet(b *testing.B) {
	s, _ := openTemp(b, Options{})
	fill(b, s, "/lease/", 1000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			if _, err := s.Get(ctx, fmt.Sprintf("/lease/%06d", i%1000)); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkList10k(b *testing.B) {
	s, _ := openTemp(b, Options{})
	fill(b, s, "/lease/", 10000)
	fill(b, s, "/other/", 1000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := s.List(ctx, "/lease/", storage.ListOptions{})
		if err != nil || len(res.KVs) != 10000 {
			b.Fatalf("List: %d keys, %v", len(res.KVs), err)
		}
	}
}
