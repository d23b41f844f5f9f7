package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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

// TestCampaignConfirmsLeadership: a campaigner whose lease ends while it
// waits behind an older key does not lead when that key goes; the newer
// campaigner does, and the first one leads only after it, on a new key.
// (etcd's Campaign waits for the older keys to go and returns without
// checking that its own key is still there.)
func TestCampaignConfirmsLeadership(t *testing.T) {
	c := etcdtest.Start(t, 1)
	newStore := func(id string) *Store {
		return open(t, c.Endpoints(), Options{ElectionTTL: 3 * time.Second, Identity: id})
	}
	a, b, d := newStore("a"), newStore("b"), newStore("d")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := ElectionPrefix(a.prefix, "ctrl")
	// keyOf is the election key (sorted by create revision) whose value
	// names id, or nil.
	keyOf := func(id string) *mvccpb.KeyValue {
		resp, err := a.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if strings.HasPrefix(string(kv.Value), id+"/") {
				return kv
			}
		}
		return nil
	}
	waitKey := func(id string) *mvccpb.KeyValue {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if kv := keyOf(id); kv != nil {
				return kv
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's election key did not appear", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	type result struct {
		lost <-chan struct{}
		err  error
		at   time.Time
	}
	campaign := func(s *Store, ctx context.Context) chan result {
		ch := make(chan result, 1)
		go func() {
			lost, err := s.Campaign(ctx, "ctrl")
			ch <- result{lost, err, time.Now()}
		}()
		return ch
	}

	actx, resignA := context.WithCancel(ctx)
	lostA, err := a.Campaign(actx, "ctrl")
	if err != nil {
		t.Fatal(err)
	}
	bWins := campaign(b, ctx)
	// b's lease ends while b waits behind a (as when its member was cut
	// off from the leader for longer than the TTL): its key goes with it.
	bKey := waitKey("b")
	if _, err := a.client.Revoke(ctx, clientv3.LeaseID(bKey.Lease)); err != nil {
		t.Fatal(err)
	}
	if keyOf("b") != nil {
		t.Fatal("b's key outlived its revoked lease")
	}
	dctx, resignD := context.WithCancel(ctx)
	dWins := campaign(d, dctx)
	waitKey("d")

	// a resigns: d's key is the oldest now, and d alone leads.
	resignA()
	<-lostA
	var rd result
	select {
	case rd = <-dWins:
	case <-time.After(20 * time.Second):
		t.Fatal("d did not lead after a resigned")
	}
	if rd.err != nil {
		t.Fatal(rd.err)
	}
	select {
	case rb := <-bWins:
		t.Fatalf("b reported leadership (err %v) while d led; election keys: b %v, d %v", rb.err, keyOf("b"), keyOf("d"))
	default:
	}

	// d resigns: b, campaigning again on a new lease, leads now. The
	// time is taken before the resignation: b may see d's key go and
	// report before this goroutine runs again after <-rd.lost.
	resigned := time.Now()
	resignD()
	<-rd.lost
	var rb result
	select {
	case rb = <-bWins:
	case <-time.After(20 * time.Second):
		t.Fatal("b did not lead after d resigned")
	}
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if rb.at.Before(resigned) {
		t.Errorf("b reported leadership %v before d resigned", resigned.Sub(rb.at))
	}
	leader, err := b.ElectionLeader(ctx, "ctrl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(leader, "b/") {
		t.Fatalf("b reported leadership, but the leading key is %q", leader)
	}
	kv := keyOf("b")
	if kv == nil || clientv3.LeaseID(kv.Lease) == clientv3.LeaseID(bKey.Lease) {
		t.Fatalf("b leads on %v, want a key on a new lease (the revoked one was %x)", kv, bKey.Lease)
	}
	select {
	case <-rb.lost:
		t.Fatal("b's leadership was lost as soon as it was reported")
	default:
	}
}

// TestCampaignEndsWithItsContextWithoutAQuorum: a campaign waiting behind
// a leader returns as soon as its context ends, though no member answers
// (etcd's own Campaign would wait to resign until one did: a replica's
// shutdown hung behind it while its members were down).
func TestCampaignEndsWithItsContextWithoutAQuorum(t *testing.T) {
	c := etcdtest.Start(t, 1)
	opts := Options{ElectionTTL: 3 * time.Second}
	a, b := open(t, c.Endpoints(), opts), open(t, c.Endpoints(), opts)
	if _, err := a.Campaign(context.Background(), "ctrl"); err != nil {
		t.Fatal(err)
	}
	bctx, stopB := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Campaign(bctx, "ctrl")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("b's campaign returned while a leads: %v", err)
	case <-time.After(500 * time.Millisecond): // b waits behind a
	}
	m := c.Leader(t)
	m.Freeze(t)
	defer m.Thaw(t)
	stopB()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("b's campaign ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's campaign did not return within 10 s of its context's end while no member answered")
	}
}
