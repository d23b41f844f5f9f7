package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestE2ERestart restarts the server on the same data directory: leases,
// uids and resourceVersions survive, new writes continue the RV sequence,
// and (the watch history being in memory) a watch from a pre-restart RV
// gets the 410 Expired ERROR event client-go relists on.
func TestE2ERestart(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ctx := context.Background()
	leases := clientset(t, restConfig(t, ts, wireProtobuf)).CoordinationV1().Leases("default")
	p, err := leases.Create(ctx, newLease("p", nil, "h1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create p: %v", err)
	}
	p.Spec.HolderIdentity = new("h2")
	p, err = leases.Update(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update p: %v", err)
	}
	q, err := leases.Create(ctx, newLease("q", nil, "hq"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create q: %v", err)
	}
	ts.Stop(t)

	ts2 := startServerIn(t, ts.DataDir)
	if ts2.URL == ts.URL {
		t.Logf("restarted on the same port %s", ts.URL)
	}
	// restConfig also checks the kubeconfig was rewritten for the new port.
	leases = clientset(t, restConfig(t, ts2, wireProtobuf)).CoordinationV1().Leases("default")
	got, err := leases.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get p after restart: %v", err)
	}
	if got.UID != p.UID || got.ResourceVersion != p.ResourceVersion || *got.Spec.HolderIdentity != "h2" {
		t.Errorf("p after restart: uid %s rv %s holder %s, want %s %s h2", got.UID, got.ResourceVersion, *got.Spec.HolderIdentity, p.UID, p.ResourceVersion)
	}
	wantSpec(t, "p after restart", p.Spec, got.Spec)
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	wantNames(t, "list after restart", list, "p", "q")
	if rvLess(t, list.ResourceVersion, q.ResourceVersion) {
		t.Errorf("list RV %s after restart is older than the last write %s", list.ResourceVersion, q.ResourceVersion)
	}

	// A watch from before the restart: the stream opens, then one ERROR
	// event carrying 410 Expired, then it ends.
	w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from pre-restart RV %s: %v (want the stream to open and send a 410 ERROR event)", p.ResourceVersion, err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch from %s closed without an event", p.ResourceVersion)
		}
		st, isStatus := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !isStatus {
			t.Fatalf("first event from %s = %s %T, want ERROR with a Status", p.ResourceVersion, ev.Type, ev.Object)
		}
		err := apierrors.FromObject(st)
		msg := regexp.MustCompile(`^too old resource version: ` + p.ResourceVersion + ` \(\d+\)$`)
		if !apierrors.IsResourceExpired(err) || st.Code != 410 || !msg.MatchString(st.Message) {
			t.Errorf("ERROR event status = %d %s %q, want 410 Expired %q", st.Code, st.Reason, st.Message, msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event on a watch from pre-restart RV %s", p.ResourceVersion)
	}

	// A watch from the current RV works, and writes continue the sequence.
	w2, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from %s: %v", list.ResourceVersion, err)
	}
	defer w2.Stop()
	got.Spec.HolderIdentity = new("h3")
	updated, err := leases.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update after restart: %v", err)
	}
	if !rvLess(t, q.ResourceVersion, updated.ResourceVersion) {
		t.Errorf("RV after restart %s is not newer than %s from before", updated.ResourceVersion, q.ResourceVersion)
	}
	wantWatch(t, w2, watch.Modified, "p", "h3", updated.ResourceVersion)
}

// TestE2EInformerAcrossRestart restarts the server on the same address under
// a running informer: the reflector's rewatch from its last RV gets 410
// Expired (history is in memory), it relists through WatchList, and then
// delivers changes made after the restart.
func TestE2EInformerAcrossRestart(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	cfg := restConfig(t, ts, wireProtobuf)
	var reqs requestLog
	reqs.wrap(cfg)
	cs := clientset(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	leases := cs.CoordinationV1().Leases("default")
	if _, err := leases.Create(ctx, newLease("before", nil, "h0"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Coordination().V1().Leases().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	watchLists := len(reqs.matching("sendInitialEvents=true"))

	ts.Stop(t)
	ts2 := startServerIn(t, ts.DataDir, "--listen", strings.TrimPrefix(ts.URL, "http://"))
	if ts2.URL != ts.URL {
		t.Fatalf("restarted on %s, want %s", ts2.URL, ts.URL)
	}
	if _, err := leases.Create(ctx, newLease("after", nil, "h1"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	lister := factory.Coordination().V1().Leases().Lister().Leases("default")
	eventually(t, 15*time.Second, "informer sees the lease created after the restart", func() (bool, string) {
		l, err := lister.Get("after")
		if err != nil {
			return false, err.Error()
		}
		return *l.Spec.HolderIdentity == "h1", "holder " + *l.Spec.HolderIdentity
	})
	if _, err := lister.Get("before"); err != nil {
		t.Errorf("informer lost the pre-restart lease: %v", err)
	}
	if n := len(reqs.matching("sendInitialEvents=true")); n <= watchLists {
		t.Errorf("no new WatchList request after the restart (%d before, %d after); requests: %q", watchLists, n, reqs.all())
	}
}
