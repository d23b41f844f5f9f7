package storagetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// testConcurrentCAS hammers one counter with Get+Update retry loops: the
// final value must be the number of increments, every successful update
// must have its own revision, and a watcher must see 1..N in order.
func testConcurrentCAS(t *testing.T, s storage.Interface) {
	const workers, perWorker = 8, 25
	p := prefixFor(t)
	key := p + "counter"
	ctx := ctxFor(t)
	mustCreate(t, s, key, "0")
	w := mustWatch(t, s, p, 0)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		revs = make(map[int64]bool)
		errc = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				for {
					kv, err := s.Get(ctx, key)
					if err != nil {
						errc <- err
						return
					}
					n, _ := strconv.Atoi(string(kv.Value))
					upd, err := s.Update(ctx, key, []byte(strconv.Itoa(n+1)), kv.ModRevision)
					if errors.Is(err, storage.ErrConflict) {
						continue
					}
					if err != nil {
						errc <- err
						return
					}
					mu.Lock()
					dup := revs[upd.ModRevision]
					revs[upd.ModRevision] = true
					mu.Unlock()
					if dup {
						errc <- errors.New("two updates got revision " + strconv.FormatInt(upd.ModRevision, 10))
						return
					}
					break
				}
			}
		}()
	}
	// Drain the watch while writing so it cannot fall behind.
	var evs []storage.Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.After(timeout)
		for len(evs) < workers*perWorker {
			select {
			case resp, ok := <-w.ResultChan():
				if !ok || resp.Err != nil {
					return
				}
				evs = append(evs, resp.Events...)
			case <-deadline:
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("worker: %v", err)
	}
	kv, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * perWorker); string(kv.Value) != want {
		t.Fatalf("counter = %s, want %s", kv.Value, want)
	}
	<-done
	if len(evs) != workers*perWorker {
		t.Fatalf("watch saw %d events, want %d", len(evs), workers*perWorker)
	}
	for i, e := range evs {
		if string(e.KV.Value) != strconv.Itoa(i+1) || !revs[e.Revision()] {
			t.Fatalf("event %d: value %q revision %d", i, e.KV.Value, e.Revision())
		}
		if e.PrevKV == nil || string(e.PrevKV.Value) != strconv.Itoa(i) {
			t.Fatalf("event %d: PrevKV %+v", i, e.PrevKV)
		}
	}
}

// testSlowWatcher: a watcher that reads nothing must not hold writers back;
// it is ended with ErrCompacted instead.
func testSlowWatcher(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	w := mustWatch(t, s, p, 0)
	kv := mustCreate(t, s, p+"k", "0")
	for i := range SlowWatcherWrites {
		var err error
		kv, err = s.Update(ctx, p+"k", []byte(strconv.Itoa(i)), kv.ModRevision)
		if err != nil {
			t.Fatalf("write %d blocked or failed: %v", i, err)
		}
	}
	var last storage.WatchResponse
	n := 0
	deadline := time.After(timeout)
	for {
		select {
		case resp, ok := <-w.ResultChan():
			if !ok {
				if !errors.Is(last.Err, storage.ErrCompacted) {
					t.Fatalf("slow watcher closed after %d responses with final error %v, want ErrCompacted", n, last.Err)
				}
				return
			}
			n++
			if last.Err != nil {
				t.Fatalf("response after the terminal error: %+v", resp)
			}
			last = resp
		case <-deadline:
			t.Fatalf("slow watcher not ended after %d responses (last err %v)", n, last.Err)
		}
	}
}

// testClose: Close ends watches with ErrClosed and later calls fail.
func testClose(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	kv := mustCreate(t, s, p+"k", "x")
	w := mustWatch(t, s, p, 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var last storage.WatchResponse
	deadline := time.After(timeout)
wait:
	for {
		select {
		case resp, ok := <-w.ResultChan():
			if !ok {
				break wait
			}
			last = resp
		case <-deadline:
			t.Fatal("watch not ended by Close")
		}
	}
	if !errors.Is(last.Err, storage.ErrClosed) {
		t.Fatalf("watch ended with %v, want ErrClosed", last.Err)
	}
	_, err := s.Get(ctx, p+"k")
	wantErr(t, "Get after Close", err, storage.ErrClosed)
	_, err = s.Update(ctx, p+"k", []byte("y"), kv.ModRevision)
	wantErr(t, "Update after Close", err, storage.ErrClosed)
	_, err = s.List(ctx, p, storage.ListOptions{})
	wantErr(t, "List after Close", err, storage.ErrClosed)
	_, err = s.Watch(ctx, p, 0)
	wantErr(t, "Watch after Close", err, storage.ErrClosed)
}
