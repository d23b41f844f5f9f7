package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (env *testEnv) namespaces() Scope {
	r, _ := env.e.ResourceFor("", "v1", "namespaces")
	return Scope{Resource: r, Version: "v1", UserAgent: "leasehold-test/v0.0.0"}
}

func (env *testEnv) getNamespace(t testing.TB, name string) (*corev1.Namespace, error) {
	t.Helper()
	out, err := env.e.Get(context.Background(), env.namespaces(), name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return out.(*corev1.Namespace), nil
}

// waitGone polls until get reports NotFound: namespace finalization runs
// in the background.
func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := get()
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after 20s (last error %v)", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNamespaceDefaultsAndImplicitCreation(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesImplicit})
	ctx := context.Background()
	list, err := env.e.List(ctx, env.namespaces(), &metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.(*corev1.NamespaceList).Items {
		names = append(names, n.Name)
		if n.Status.Phase != corev1.NamespaceActive || !slices.Equal(n.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) ||
			n.Labels[corev1.LabelMetadataName] != n.Name {
			t.Errorf("namespace %s: %+v", n.Name, n)
		}
	}
	if want := []string{"default", "kube-node-lease", "kube-public", "kube-system"}; !slices.Equal(names, want) {
		t.Errorf("namespaces %q, want %q", names, want)
	}
	// A dry-run create does not create the namespace; a real one does.
	if _, err := env.e.Create(ctx, env.leases("team-a"), newLease("l"), &metav1.CreateOptions{DryRun: []string{"All"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.getNamespace(t, "team-a"); !apierrors.IsNotFound(err) {
		t.Fatalf("after dry run: %v", err)
	}
	env.mustCreate(t, "team-a", newLease("l"))
	if ns, err := env.getNamespace(t, "team-a"); err != nil || ns.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("implicit namespace: %v %+v", err, ns)
	}
	// An event does not create its namespace.
	_, err = env.e.Create(ctx, env.coreEvents("gone"), coreEvent("e", "gone"), nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `namespaces "gone" not found`)
	// The namespace's own fields are not the client's to write.
	ns, _ := env.getNamespace(t, "team-a")
	ns.Spec.Finalizers = nil
	ns.Status.Phase = corev1.NamespaceTerminating
	out, _, err := env.e.Update(ctx, env.namespaces(), "team-a", ns, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.(*corev1.Namespace); len(n.Spec.Finalizers) != 1 || n.Status.Phase != corev1.NamespaceActive {
		t.Errorf("update changed finalizers or status: %+v", n)
	}
}

func TestNamespaceStrictLifecycle(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesStrict})
	_, err := env.e.Create(context.Background(), env.leases("missing"), newLease("l"), &metav1.CreateOptions{})
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `namespaces "missing" not found`)
	env.mustCreate(t, "default", newLease("l"))
}

func TestNamespaceValidation(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	_, err := env.e.Create(ctx, env.namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Namespace "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`)
	_, err = env.e.Create(ctx, env.namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ok"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"custom"}}}, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Namespace "ok" is invalid: spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified`)
	// A namespace named in the body is dropped: namespaces have none.
	out, err := env.e.Create(ctx, env.namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "x"}}, nil)
	if err != nil || out.(*corev1.Namespace).Namespace != "" {
		t.Fatalf("create: %v %+v", err, out)
	}
	tbl, err := env.e.ConvertToTable(ctx, env.namespaces(), out, nil)
	if err != nil || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "ok" || tbl.Rows[0].Cells[1] != "Active" || tbl.Rows[0].Cells[2] != "0s" {
		t.Fatalf("table: %v %+v", err, tbl)
	}
}

func TestNamespaceDeletionRemovesContent(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesImplicit})
	ctx := context.Background()
	env.mustCreate(t, "team-a", newLease("free"))
	// A finalizer of its own keeps this lease, and so the namespace
	// Terminating, until it is removed.
	env.mustCreate(t, "team-a", newLease("held", func(l *coordinationv1.Lease) { l.Finalizers = []string{"example.com/hold"} }))
	env.mustCreate(t, "team-b", newLease("other"))
	if err := env.e.RecordEvent(ctx, corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: "team-a", Name: "free"},
		corev1.EventTypeNormal, "Testing", "an event"); err != nil {
		t.Fatal(err)
	}

	out, _, err := env.e.Delete(ctx, env.namespaces(), "team-a", &metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns := out.(*corev1.Namespace); ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("delete answered %+v", ns)
	}
	_, err = env.e.Create(ctx, env.leases("team-a"), newLease("new"), &metav1.CreateOptions{})
	st := wantStatus(t, err, 403, metav1.StatusReasonForbidden, `leases.coordination.k8s.io "new" is forbidden: unable to create new content in namespace team-a because it is being terminated`)
	if c := st.Details.Causes; len(c) != 1 || c[0].Type != corev1.NamespaceTerminatingCause || c[0].Field != "metadata.namespace" {
		t.Errorf("causes %+v", c)
	}
	waitGone(t, "lease team-a/free", func() error { _, err := env.e.Get(ctx, env.leases("team-a"), "free", nil); return err })
	waitGone(t, "the events of team-a", func() error {
		events, err := env.e.List(ctx, env.coreEvents("team-a"), nil)
		if err != nil || len(events.(*corev1.EventList).Items) != 0 {
			return err
		}
		return apierrors.NewNotFound(corev1.Resource("events"), "")
	})
	if ns, err := env.getNamespace(t, "team-a"); err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace while a lease holds it: %v %+v", err, ns)
	}
	// The conditions say what it waits for, as the namespace controller's.
	var conds []corev1.NamespaceCondition
	waitGone(t, "conditions naming the held lease", func() error {
		ns, err := env.getNamespace(t, "team-a")
		if err != nil {
			return err
		}
		conds = ns.Status.Conditions
		for _, c := range conds {
			if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
				return apierrors.NewNotFound(corev1.Resource("namespaces"), "")
			}
		}
		return nil
	})
	var msgs []string
	for _, c := range conds {
		msgs = append(msgs, string(c.Type)+"="+string(c.Status)+": "+c.Message)
	}
	if got := strings.Join(msgs, "\n"); !strings.Contains(got, "NamespaceContentRemaining=True: Some resources are remaining: leases.coordination.k8s.io has 1 resource instances") ||
		!strings.Contains(got, "NamespaceFinalizersRemaining=True: Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances") {
		t.Errorf("conditions:\n%s", got)
	}
	held := env.mustGet(t, "team-a", "held")
	held.Finalizers = nil
	if _, _, err := env.e.Update(ctx, env.leases("team-a"), "held", held, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "namespace team-a", func() error { _, err := env.getNamespace(t, "team-a"); return err })
	env.mustGet(t, "team-b", "other")

	_, _, err = env.e.Delete(ctx, env.namespaces(), "kube-system", nil)
	wantStatus(t, err, 403, metav1.StatusReasonForbidden, `namespaces "kube-system" is forbidden: this namespace may not be deleted`)
	if _, err := env.getNamespace(t, "kube-system"); err != nil {
		t.Fatal(err)
	}
}

func TestNamespaceFieldSelector(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesImplicit})
	ctx := context.Background()
	out, err := env.e.List(ctx, env.namespaces(), &metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name=default"})
	if err != nil || len(out.(*corev1.NamespaceList).Items) != 1 {
		t.Fatalf("list: %v %+v", err, out)
	}
	_, err = env.e.List(ctx, env.namespaces(), &metav1.ListOptions{FieldSelector: "spec.x=y"})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.x")
}

// uidOf names the uid of a lease in an event, so that kubectl describe
// (which searches by uid) finds it.
func TestRecordEventFillsUIDAndAggregates(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	ref := corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: "default", Name: "l"}
	if err := env.e.RecordEvent(ctx, ref, corev1.EventTypeNormal, "Elected", "granted to a"); !errors.Is(err, ErrNoSuchObject) {
		t.Fatalf("event on a missing lease: %v", err)
	}
	l := env.mustCreate(t, "default", newLease("l"))
	for range 3 {
		if err := env.e.RecordEvent(ctx, ref, corev1.EventTypeNormal, "Elected", "granted to a"); err != nil {
			t.Fatal(err)
		}
		env.clock.Add(time.Second)
	}
	out, err := env.e.List(ctx, env.coreEvents("default"), &metav1.ListOptions{
		FieldSelector: "involvedObject.name=l,involvedObject.namespace=default,involvedObject.kind=Lease,involvedObject.uid=" + string(l.UID)})
	if err != nil {
		t.Fatal(err)
	}
	items := out.(*corev1.EventList).Items
	if len(items) != 1 || items[0].Count != 3 || items[0].InvolvedObject.UID != types.UID(l.UID) || items[0].Source.Component != "leasehold" ||
		!items[0].LastTimestamp.Time.Equal(items[0].FirstTimestamp.Add(2*time.Second)) {
		t.Fatalf("events %+v", items)
	}
}

// TestNamespacesOfExistingContent: objects stored in namespaces without a
// Namespace get one when the engine starts managing namespaces.
func TestNamespacesOfExistingContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	ctx := context.Background()
	st, err := boltdb.Open(ctx, path, boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	unmanaged, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{e: unmanaged}
	for _, ns := range []string{"a", "b", "b0", "c"} {
		env.mustCreate(t, ns, newLease("l1"))
		env.mustCreate(t, ns, newLease("l2"))
	}
	managed, err := New(Options{Store: st, NamespaceLifecycle: NamespacesStrict})
	if err != nil {
		t.Fatal(err)
	}
	env = &testEnv{e: managed}
	out, err := managed.List(ctx, env.namespaces(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range out.(*corev1.NamespaceList).Items {
		names = append(names, n.Name)
	}
	if want := []string{"a", "b", "b0", "c", "default", "kube-node-lease", "kube-public", "kube-system"}; !slices.Equal(names, want) {
		t.Errorf("namespaces %q, want %q", names, want)
	}
	_ = st.Close()
}

// TestNamespaceDeleteRacingCreates: creates racing a namespace's deletion
// (strict lifecycle) either fail (403 terminating, 404 gone) or are
// deleted with it: once the namespace answers 404, no lease is left in it.
// In the hostile review 1-3 leases of 40,000 racing creates survived.
func TestNamespaceDeleteRacingCreates(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesStrict})
	ctx := context.Background()
	const rounds, writers = 8, 8
	for round := range rounds {
		ns := "race-" + strconv.Itoa(round)
		if _, err := env.e.Create(ctx, env.namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var created atomic.Int64
		start := make(chan struct{})
		for w := range writers {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					_, err := env.e.Create(ctx, env.leases(ns), newLease(fmt.Sprintf("w%d-%d", w, i)), &metav1.CreateOptions{})
					switch {
					case err == nil:
						created.Add(1)
					case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
						return // terminating, or gone
					default:
						t.Errorf("create: %v", err)
						return
					}
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%4) * time.Millisecond) // vary the race
		if _, _, err := env.e.Delete(ctx, env.namespaces(), ns, &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		waitGone(t, "namespace "+ns, func() error { _, err := env.getNamespace(t, ns); return err })
		list, err := env.e.List(ctx, env.leases(ns), &metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if items := list.(*coordinationv1.LeaseList).Items; len(items) != 0 {
			t.Fatalf("round %d: %d leases left in deleted namespace %s (%d created)", round, len(items), ns, created.Load())
		}
		all, err := env.e.List(ctx, env.leases(""), &metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range all.(*coordinationv1.LeaseList).Items {
			if l.Namespace == ns {
				t.Fatalf("round %d: cluster-wide list shows %s/%s", round, ns, l.Name)
			}
		}
	}
}

// TestNamespaceFinalizeSubresource: spec.finalizers change through
// namespaces/finalize only (a plain update keeps them, a status update
// keeps spec), the writes are recorded for their subresource, and a
// terminating namespace whose last finalizer a client removes there goes,
// as the namespace controller deletes it once none are left.
func TestNamespaceFinalizeSubresource(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{NamespaceLifecycle: NamespacesStrict})
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stuck"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/hold"}}}
	if _, err := env.e.Create(ctx, env.namespaces(), ns, nil); err != nil {
		t.Fatal(err)
	}
	finalize, status := env.namespaces(), env.namespaces()
	finalize.Subresource, status.Subresource = "finalize", "status"

	// A status update (no resourceVersion: namespaces take unconditional
	// updates) cannot touch spec.
	cur, _ := env.getNamespace(t, "stuck")
	upd := cur.DeepCopy()
	upd.ResourceVersion, upd.Spec.Finalizers = "", nil
	out, _, err := env.e.Update(ctx, status, "stuck", upd, &metav1.UpdateOptions{FieldManager: "st"})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*corev1.Namespace).Spec.Finalizers; !slices.Equal(got, []corev1.FinalizerName{"example.com/hold", "kubernetes"}) {
		t.Fatalf("status update changed spec.finalizers to %v", got)
	}
	if _, _, err := env.e.Delete(ctx, env.namespaces(), "stuck", nil); err != nil {
		t.Fatal(err)
	}
	// The controller removes its own finalizer; example.com/hold stays.
	waitGone(t, "the kubernetes finalizer", func() error {
		ns, err := env.getNamespace(t, "stuck")
		if err != nil || slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			return err
		}
		return apierrors.NewNotFound(corev1.Resource("namespaces"), "")
	})
	_, _, err = env.e.Update(ctx, status, "stuck", upd, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, "Namespace \"stuck\" is invalid: status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty")

	cur, _ = env.getNamespace(t, "stuck")
	fin := cur.DeepCopy()
	fin.Spec.Finalizers = []corev1.FinalizerName{"example.com/other"}
	out, _, err = env.e.Update(ctx, finalize, "stuck", fin, &metav1.UpdateOptions{FieldManager: "fin"})
	if err != nil {
		t.Fatal(err)
	}
	var subresources []string
	for _, m := range out.(*corev1.Namespace).ManagedFields {
		subresources = append(subresources, m.Manager+"/"+m.Subresource)
	}
	if !slices.Contains(subresources, "fin/finalize") {
		t.Errorf("managedFields managers %v, want fin/finalize among them", subresources)
	}
	fin.Spec.Finalizers = nil
	fin.ResourceVersion = ""
	if _, _, err = env.e.Update(ctx, finalize, "stuck", fin, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "namespace stuck", func() error { _, err := env.getNamespace(t, "stuck"); return err })
}
