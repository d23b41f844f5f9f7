package listwatch

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// holders is a cache of lease holders by name, kept by Run.
type holders struct {
	mu       sync.Mutex
	byName   map[string]string
	replaces int
	// gate, when set, holds up the next event until it is closed.
	gate chan struct{}
}

func (h *holders) replace(l *coordinationv1.LeaseList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.replaces++
	h.byName = map[string]string{}
	for i := range l.Items {
		h.byName[l.Items[i].Name] = holderOf(&l.Items[i])
	}
}

func (h *holders) apply(typ watch.EventType, l *coordinationv1.Lease) {
	h.mu.Lock()
	gate := h.gate
	h.gate = nil
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if typ == watch.Deleted {
		delete(h.byName, l.Name)
		return
	}
	h.byName[l.Name] = holderOf(l)
}

func (h *holders) snapshot() (map[string]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]string, len(h.byName))
	for k, v := range h.byName {
		out[k] = v
	}
	return out, h.replaces
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

type leases struct {
	t     *testing.T
	eng   *engine.Engine
	scope engine.Scope
}

func (ls leases) put(name, holder string) { ls.putPadded(name, holder, 0) }

// putPadded creates or updates a lease with an annotation of pad bytes.
func (ls leases) putPadded(name, holder string, pad int) {
	ls.t.Helper()
	ctx := context.Background()
	var annotations map[string]string
	if pad > 0 {
		annotations = map[string]string{"pad": strings.Repeat("x", pad)}
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	o, err := ls.eng.Get(ctx, ls.scope, name, &metav1.GetOptions{})
	if err != nil {
		if _, err := ls.eng.Create(ctx, ls.scope, l, &metav1.CreateOptions{}); err != nil {
			ls.t.Fatalf("create %s: %v", name, err)
		}
		return
	}
	cur := o.(*coordinationv1.Lease)
	cur.Spec.HolderIdentity = &holder
	cur.Annotations = annotations
	if _, _, err := ls.eng.Update(ctx, ls.scope, name, cur, &metav1.UpdateOptions{}); err != nil {
		ls.t.Fatalf("update %s: %v", name, err)
	}
}

func (ls leases) remove(name string) {
	ls.t.Helper()
	if _, _, err := ls.eng.Delete(context.Background(), ls.scope, name, &metav1.DeleteOptions{}); err != nil {
		ls.t.Fatalf("delete %s: %v", name, err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRunFollowsAndRelists runs a cache over a real engine and bbolt
// store with a short watch history: it starts from a list, follows
// creations, updates and deletions, and when it falls so far behind that
// the engine closes its watch and the history to resume from is gone, it
// lists again and ends up holding exactly what the engine holds,
// deletions made meanwhile included.
func TestRunFollowsAndRelists(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "db"), boltdb.Options{HistoryMaxEvents: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Store: st, WatchQueueBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := eng.ResourceFor(engine.GroupName, "v1", "leases")
	if !ok {
		t.Fatal("no leases v1")
	}
	ls := leases{t: t, eng: eng, scope: engine.Scope{Resource: res, Version: "v1", Namespace: "default", UserAgent: "listwatch-test"}}
	ls.put("a", "one")

	h := &holders{}
	var errs []error
	var errMu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options[*coordinationv1.LeaseList, *coordinationv1.Lease]{
			Engine: eng, Scope: engine.Scope{Resource: res, Version: "v1", UserAgent: "listwatch-test"}, SharedObjects: true,
			Replace: h.replace, Apply: h.apply,
			OnError: func(err error) { errMu.Lock(); errs = append(errs, err); errMu.Unlock() },
		})
	}()
	want := map[string]string{"a": "one"}
	eventually(t, "the first list", func() bool { m, _ := h.snapshot(); return equal(m, want) })

	ls.put("b", "two")
	ls.put("a", "three")
	ls.remove("a")
	want = map[string]string{"b": "two"}
	eventually(t, "the watched changes", func() bool { m, _ := h.snapshot(); return equal(m, want) })
	if _, n := h.snapshot(); n != 1 {
		t.Fatalf("%d lists while the watch kept up, want 1", n)
	}

	// Hold the cache up on the next event while far more changes than
	// the watch's buffers and queue, the engine's ring of recent events
	// (8 MiB) and the store's history (8 events) hold are made.
	gate := make(chan struct{})
	h.mu.Lock()
	h.gate = gate
	h.mu.Unlock()
	ls.put("c", "four")
	ls.remove("b")
	for i := range 100 {
		ls.putPadded("d", string(rune('a'+i%26)), 60<<10)
	}
	close(gate)
	want = map[string]string{"c": "four", "d": string(rune('a' + 99%26))}
	eventually(t, "the relist", func() bool { m, n := h.snapshot(); return n >= 2 && equal(m, want) })

	cancel()
	<-done
	errMu.Lock()
	defer errMu.Unlock()
	if len(errs) != 0 {
		t.Errorf("an expired watch is no failure, got %v", errs)
	}
}
