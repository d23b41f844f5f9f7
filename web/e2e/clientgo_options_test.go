package e2e

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// TestE2EClientGoOptions covers request options real clients send: dryRun,
// generateName, fieldValidation (Warn by default, Strict), delete
// propagation through the terminating state, and watch timeouts.
func TestE2EClientGoOptions(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ctx := context.Background()
	cfg := restConfig(t, ts, wireProtobuf)
	warnings := &warningLog{}
	cfg.WarningHandler = warnings
	leases := clientset(t, cfg).CoordinationV1().Leases("default")

	// dryRun=All: a 201 with uid and creationTimestamp but no RV; nothing stored.
	dry, err := leases.Create(ctx, newLease("dry", nil, "h"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if dry.UID == "" || dry.CreationTimestamp.IsZero() || dry.ResourceVersion != "" {
		t.Errorf("dry-run create returned uid %q creationTimestamp %v rv %q, want a uid, a timestamp and no RV", dry.UID, dry.CreationTimestamp, dry.ResourceVersion)
	}
	_, err = leases.Get(ctx, "dry", metav1.GetOptions{})
	wantStatus(t, "get after dry-run create", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "dry" not found`)

	// generateName: the prefix plus five characters of upstream's alphabet.
	gen := newLease("", nil, "h")
	gen.GenerateName = "gen-"
	g, err := leases.Create(ctx, gen, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("generateName create: %v", err)
	}
	if !regexp.MustCompile(`^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$`).MatchString(g.Name) || g.GenerateName != "gen-" {
		t.Errorf("generated name %q (generateName %q), want gen- plus 5 chars", g.Name, g.GenerateName)
	}

	// Orphan propagation: the lease passes through the terminating state
	// (MODIFIED with deletionTimestamp and the orphan finalizer), then goes.
	w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: g.ResourceVersion, FieldSelector: "metadata.name=" + g.Name})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if err := leases.Delete(ctx, g.Name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatalf("orphan delete: %v", err)
	}
	ev := nextEvent(t, w)
	if l := ev.Object.(metav1.Object); ev.Type != watch.Modified || l.GetDeletionTimestamp() == nil || !slices.Contains(l.GetFinalizers(), metav1.FinalizerOrphanDependents) {
		t.Errorf("first event after orphan delete = %s deletionTimestamp=%v finalizers=%v, want MODIFIED with both set",
			ev.Type, l.GetDeletionTimestamp(), l.GetFinalizers())
	}
	if ev = nextEvent(t, w); ev.Type != watch.Deleted {
		t.Errorf("second event after orphan delete = %s, want DELETED", ev.Type)
	}
	_, err = leases.Get(ctx, g.Name, metav1.GetOptions{})
	wantStatus(t, "get after orphan delete", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "`+g.Name+`" not found`)

	// timeoutSeconds ends a watch cleanly: the channel closes, no ERROR.
	start := time.Now()
	w2, err := leases.Watch(ctx, metav1.ListOptions{TimeoutSeconds: new(int64(1))})
	if err != nil {
		t.Fatalf("watch with timeout: %v", err)
	}
	for ev := range w2.ResultChan() {
		if ev.Type == watch.Error {
			t.Errorf("watch with timeoutSeconds=1 sent an ERROR event: %+v", ev.Object)
		}
	}
	// Not before the timeout; how long after depends on the machine's load.
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("watch with timeoutSeconds=1 ended after %v", d)
	}
	if got := warnings.take(); len(got) != 0 {
		t.Errorf("unexpected warnings %q", got)
	}

	// Unknown JSON fields: a Warning by default, 400 with Strict.
	dcfg := restConfig(t, ts, wireJSON)
	dcfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "unknown"},
		"spec":     map[string]any{"holderIdentity": "h", "foo": "bar"},
	}}
	dl := dyn.Resource(leasesGVR).Namespace("default")
	_, err = dl.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	wantStatus(t, "strict create with unknown field", err, 400, metav1.StatusReasonBadRequest,
		`Lease in version "v1" cannot be handled as a Lease: strict decoding error: unknown field "spec.foo"`)
	if got, err := dl.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Errorf("create with unknown field (Warn): %v", err)
	} else if _, has, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "foo"); has {
		t.Errorf("unknown field spec.foo was stored")
	}
	if got := warnings.take(); !slices.Equal(got, []string{`299|-|unknown field "spec.foo"`}) {
		t.Errorf("warnings = %q, want [299|-|unknown field \"spec.foo\"]", got)
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed early")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5s")
	}
	return watch.Event{}
}
