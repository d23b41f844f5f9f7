package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage/etcd/etcdtest"
)

// TestElectorFailover: one replica leads at a time; a replica that stops
// hands over at once, one that crashes (its client gone without
// resigning) hands over when its lease expires, about one TTL later.
func TestElectorFailover(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const ttl = 3 * time.Second // the default
	opts := Options{ElectionTTL: ttl}
	a, b, d := open(t, c.Endpoints(), opts), open(t, c.Endpoints(), opts), open(t, c.Endpoints(), opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	actx, resignA := context.WithCancel(ctx)
	lostA, err := a.Campaign(actx, "ctrl")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lost <-chan struct{}
		err  error
		at   time.Time
	}
	campaign := func(s *Store) chan result {
		ch := make(chan result, 1)
		go func() {
			lost, err := s.Campaign(ctx, "ctrl")
			ch <- result{lost, err, time.Now()}
		}()
		return ch
	}
	bWins := campaign(b)
	select {
	case r := <-bWins:
		t.Fatalf("b leads while a does: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}

	// a stops: it resigns and b leads at once.
	resigned := time.Now()
	resignA()
	<-lostA
	var rb result
	select {
	case rb = <-bWins:
	case <-time.After(ttl):
		t.Fatal("b did not take over within one TTL after a resigned")
	}
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	t.Logf("hand-over after resign: %v", rb.at.Sub(resigned).Round(time.Millisecond))

	// b crashes: its connection goes away without a resignation.
	dWins := campaign(d)
	select {
	case r := <-dWins:
		t.Fatalf("d leads while b does: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	crashed := time.Now()
	_ = b.client.Close()
	var rd result
	select {
	case rd = <-dWins:
	case <-time.After(3 * ttl):
		t.Fatal("d did not take over within 3 TTLs after b crashed")
	}
	if rd.err != nil {
		t.Fatal(rd.err)
	}
	took := rd.at.Sub(crashed)
	t.Logf("take-over after a crash with a %v TTL: %v", ttl, took.Round(time.Millisecond))
	if took < ttl/2 {
		t.Errorf("d took over %v after the crash, before b's lease could expire", took)
	}
	select {
	case <-rb.lost:
	case <-time.After(2 * ttl):
		t.Error("b's lost channel did not close after its session ended")
	}
	// Exactly one key leads: d's.
	resp, err := d.client.Get(ctx, ElectionPrefix(d.prefix, "ctrl"), clientv3.WithPrefix())
	if err != nil || resp.Count != 1 {
		t.Fatalf("election keys: %v, %v", resp, err)
	}
}
