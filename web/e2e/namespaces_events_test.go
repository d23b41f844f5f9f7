package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clientrecord "k8s.io/client-go/tools/record"
)

// TestE2ENamespacesKubectl runs a cluster script's namespace steps with
// kubectl: the default namespaces, create, implicit creation by a lease,
// api-resources and explain, then delete with the namespace Terminating
// while a lease's own finalizer holds it, creates refused meanwhile, and
// everything gone once the finalizer is removed.
func TestE2ENamespacesKubectl(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	k := newKubectl(t, ts)
	dir := t.TempDir()

	out := k.ok("get", "namespaces")
	for _, want := range []string{"NAME ", "STATUS", "AGE", "default ", "kube-system ", "kube-public ", "kube-node-lease "} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get namespaces lacks %q:\n%s", want, out)
		}
	}
	k.wantOutput("namespace/team-a created\n", "create", "namespace", "team-a")
	// Every way of changing a namespace kubectl has.
	nsFile := writeFile(t, dir, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-c\n  labels:\n    team: c\n")
	k.wantOutput("namespace/team-c serverside-applied\n", "apply", "--server-side", "-f", nsFile)
	k.wantOutput("namespace/team-c labeled\n", "label", "ns", "team-c", "tier=1")
	k.wantOutput("namespace/team-c annotated\n", "annotate", "ns", "team-c", "note=x")
	k.wantOutput("namespace/team-c patched\n", "patch", "ns", "team-c", "--type=json", "-p", `[{"op":"add","path":"/metadata/labels/json","value":"1"}]`)
	k.wantOutput("namespace/team-c patched\n", "patch", "ns", "team-c", "--type=merge", "-p", `{"metadata":{"labels":{"merge":"1"}}}`)
	k.wantOutput("namespace/team-c patched\n", "patch", "ns", "team-c", "-p", `{"metadata":{"labels":{"strategic":"1"}}}`)
	k.wantOutput("c 1 1 1 1 team-c x", "get", "ns", "team-c", "-o",
		"jsonpath={.metadata.labels.team} {.metadata.labels.tier} {.metadata.labels.json} {.metadata.labels.merge} {.metadata.labels.strategic} {.metadata.labels.kubernetes\\.io/metadata\\.name} {.metadata.annotations.note}")
	lines, stopWatch := k.streamLines("get", "ns", "team-c", "--watch", "--output-watch-events", "--no-headers")
	var seen []string
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("kubectl get ns --watch ended at once: %s", stopWatch())
		}
		seen = append(seen, strings.Join(strings.Fields(line)[:3], " "))
	case <-time.After(20 * time.Second):
		t.Fatalf("kubectl get ns --watch printed nothing in 20s: %s", stopWatch())
	}
	k.wantOutput("namespace \"team-c\" deleted\n", "delete", "ns", "team-c", "--wait=false")
	// An empty namespace may be gone before kubectl wait looks: it then
	// prints nothing.
	k.ok("wait", "--for=delete", "namespace/team-c", "--timeout=20s")
	deadline := time.After(20 * time.Second)
watching:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break watching
			}
			seen = append(seen, strings.Join(strings.Fields(line)[:3], " "))
			if strings.HasPrefix(line, "DELETED") {
				break watching
			}
		case <-deadline:
			break watching
		}
	}
	stopWatch()
	if got := strings.Join(seen, ", "); !strings.HasPrefix(got, "ADDED team-c Active") || !strings.Contains(got, "MODIFIED team-c Terminating") || !strings.HasSuffix(got, "DELETED team-c Terminating") {
		t.Errorf("kubectl get ns --watch: %s", got)
	}
	k.wantOutput("Active kubernetes team-a", "get", "ns", "team-a", "-o", "jsonpath={.status.phase} {.spec.finalizers[0]} {.metadata.labels.kubernetes\\.io/metadata\\.name}")

	lease := func(name, extra string) string {
		return writeFile(t, dir, name+".yaml", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: "+name+"\n"+extra+
			"spec:\n  holderIdentity: a\n  leaseDurationSeconds: 15\n")
	}
	k.wantOutput("lease.coordination.k8s.io/free created\n", "apply", "-n", "team-a", "-f", lease("free", ""))
	k.wantOutput("lease.coordination.k8s.io/held created\n", "apply", "-n", "team-a", "-f", lease("held", "  finalizers: [example.com/hold]\n"))
	// A lease written into a namespace nobody created creates it.
	k.wantOutput("lease.coordination.k8s.io/other created\n", "apply", "-n", "team-b", "-f", lease("other", ""))
	k.wantOutput("namespace/team-b\n", "get", "ns", "team-b", "-o", "name")
	k.wantOutput("namespace/team-b\n", "get", "ns", "--field-selector", "metadata.name=team-b", "-o", "name")

	resources := k.ok("api-resources", "--api-group=")
	for _, want := range []string{"namespaces", "ns ", "Namespace", "events", "ev ", "Event"} {
		if !strings.Contains(resources, want) {
			t.Errorf("kubectl api-resources --api-group= lacks %q:\n%s", want, resources)
		}
	}
	if out := k.ok("explain", "namespace.status.phase"); !strings.Contains(out, "phase") || !strings.Contains(out, "KIND:       Namespace") {
		t.Errorf("kubectl explain namespace.status.phase:\n%s", out)
	}
	if out := k.ok("explain", "events.regarding", "--api-version=events.k8s.io/v1"); !strings.Contains(out, "ObjectReference") {
		t.Errorf("kubectl explain events.regarding:\n%s", out)
	}

	k.wantOutput("namespace \"team-a\" deleted\n", "delete", "namespace", "team-a", "--wait=false")
	k.wantOutput("Terminating", "get", "ns", "team-a", "-o", "jsonpath={.status.phase}")
	code, _, errOut := k.run("apply", "-n", "team-a", "-f", lease("late", ""))
	if code == 0 || !strings.Contains(errOut, `leases.coordination.k8s.io "late" is forbidden: unable to create new content in namespace team-a because it is being terminated`) {
		t.Errorf("create into a terminating namespace: exit %d, stderr %s", code, errOut)
	}
	eventually(t, 20*time.Second, "lease team-a/free deleted by the namespace's finalization", func() (bool, string) {
		out := k.ok("get", "lease", "-n", "team-a", "-o", "name")
		return out == "lease.coordination.k8s.io/held\n", out
	})
	out = k.ok("describe", "namespace", "team-a")
	for _, want := range []string{"Status:       Terminating", "NamespaceFinalizersRemaining", "example.com/hold in 1 resource instances"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe of the terminating namespace lacks %q:\n%s", want, out)
		}
	}
	k.ok("patch", "lease", "held", "-n", "team-a", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	// kubectl wait prints nothing when the namespace is gone before it
	// looks, which the finalization may well manage.
	if out := k.ok("wait", "--for=delete", "namespace/team-a", "--timeout=20s"); out != "" && out != "namespace/team-a condition met\n" {
		t.Errorf("kubectl wait --for=delete namespace/team-a printed %q", out)
	}
	code, _, errOut = k.run("get", "ns", "team-a")
	if code == 0 || !strings.Contains(errOut, `namespaces "team-a" not found`) {
		t.Errorf("get of the deleted namespace: %d %s", code, errOut)
	}
	_, out, errOut = k.run("get", "lease", "-n", "team-a")
	if strings.TrimSpace(out) != "" || !strings.Contains(errOut, "No resources found in team-a namespace.") {
		t.Errorf("leases of the deleted namespace: %q %q", out, errOut)
	}
	k.wantOutput("lease.coordination.k8s.io/other\n", "get", "lease", "-n", "team-b", "-o", "name")

	code, _, errOut = k.run("delete", "namespace", "default")
	if code == 0 || !strings.Contains(errOut, `namespaces "default" is forbidden: this namespace may not be deleted`) {
		t.Errorf("delete default: exit %d, stderr %s", code, errOut)
	}

	// client-go discovery sees the core group and events.k8s.io.
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig(t, ts, wireJSON))
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	var served []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			served = append(served, l.GroupVersion+"/"+r.Name)
		}
	}
	for _, want := range []string{"v1/namespaces", "v1/events", "events.k8s.io/v1/events"} {
		if !slices.Contains(served, want) {
			t.Errorf("discovery lacks %s: %v", want, served)
		}
	}
}

// TestE2ENamespaceLifecycleStrict: kube-apiserver's behaviour, a create
// into a missing namespace is a 404.
func TestE2ENamespaceLifecycleStrict(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "--namespace-lifecycle", "strict")
	k := newKubectl(t, ts)
	code, _, errOut := k.run("create", "-n", "nowhere", "-f", writeFile(t, t.TempDir(), "l.yaml",
		"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l\n"))
	if code == 0 || !strings.Contains(errOut, `Error from server (NotFound): error when creating`) || !strings.Contains(errOut, `namespaces "nowhere" not found`) {
		t.Errorf("strict create: exit %d, stderr %s", code, errOut)
	}
	k.ok("create", "namespace", "nowhere")
	k.wantOutput("lease.coordination.k8s.io/l created\n", "create", "-n", "nowhere", "-f", writeFile(t, t.TempDir(), "l.yaml",
		"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l\n"))
}

// TestE2ELeaderElectorRecordsEvents is the script for a real
// cluster, run unchanged: create a namespace, run client-go's
// LeaderElector with an EventRecorder (the legacy core/v1 broadcaster, as
// controller-manager and most operators wire it) and an events.k8s.io/v1
// recorder, inspect with kubectl get events, describe lease and auth
// can-i, then delete the namespace, which takes the lease and events.
func TestE2ELeaderElectorRecordsEvents(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	k := newKubectl(t, ts)
	cs := clientset(t, restConfig(t, ts, wireProtobuf))
	k.wantOutput("namespace/demo created\n", "create", "namespace", "demo")
	k.wantOutput("yes\n", "auth", "can-i", "create", "events", "-n", "demo")
	k.wantOutput("yes\n", "auth", "can-i", "update", "leases.coordination.k8s.io", "-n", "demo")

	broadcaster := clientrecord.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "e2e-operator"})

	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "demo", "operator-lock", cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "operator-0", EventRecorder: recorder})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: "operator-lock",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("operator-0 did not become leader within 30s")
	}

	// The newer API: an events.k8s.io/v1 recorder on the same lease.
	eb := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	eb.StartRecordingToSink(ctx.Done())
	defer eb.Shutdown()
	l, err := cs.CoordinationV1().Leases("demo").Get(ctx, "operator-lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	eb.NewRecorder(scheme.Scheme, "e2e-operator").Eventf(l, nil, corev1.EventTypeNormal, "Reconciled", "Reconcile", "reconciled %d objects", 3)

	eventually(t, 20*time.Second, "both events recorded", func() (bool, string) {
		out := k.ok("get", "events", "-n", "demo", "--field-selector", "involvedObject.name=operator-lock", "-o", "custom-columns=REASON:.reason,MSG:.message", "--no-headers")
		return strings.Contains(out, "operator-0 became leader") && strings.Contains(out, "reconciled 3 objects"), out
	})
	out := k.ok("describe", "lease", "operator-lock", "-n", "demo")
	for _, want := range []string{"Events:", "LeaderElection", "operator-0 became leader", "Reconciled", "reconciled 3 objects"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe lease lacks %q:\n%s", want, out)
		}
	}
	out = k.ok("get", "events.v1.events.k8s.io", "-n", "demo", "--field-selector", "regarding.name=operator-lock,reason=Reconciled", "-o", "jsonpath={.items[*].note}")
	if out != "reconciled 3 objects" {
		t.Errorf("events.k8s.io/v1 view: %q", out)
	}
	out = k.ok("get", "events", "-A")
	for _, want := range []string{"NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "lease/operator-lock", "LeaderElection"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get events -A lacks %q:\n%s", want, out)
		}
	}
	cancel()
	<-done
	// kubectl delete waits for the namespace to go, with its content.
	k.wantOutput("namespace \"demo\" deleted\n", "delete", "namespace", "demo", "--timeout=30s")
	for _, what := range []string{"leases", "events"} {
		code, out, errOut := k.run("get", what, "-n", "demo")
		if code != 0 || out != "" || !strings.Contains(errOut, "No resources found in demo namespace.") {
			t.Errorf("%s of the deleted namespace: %d %q %q", what, code, out, errOut)
		}
	}
}

// TestE2EServerEventsTellTheElection: the election controller records its
// own events on a coordinated lease (elected, then expired and
// re-granted), which kubectl describe lease shows.
func TestE2EServerEventsTellTheElection(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	k := newKubectl(t, ts)
	lt := &leaderTracker{leading: map[string]bool{}}
	first := startCLEMember(t, ts, lt, "kcm-130", "1.31.0", "1.30.0")
	startCLEMember(t, ts, lt, "kcm-131", "1.31.0", "1.31.0")
	if who := waitLeader(t, lt, 1, 30*time.Second); who != "kcm-130" {
		t.Fatalf("first leader %s", who)
	}
	first.kill()
	if who := waitLeader(t, lt, 2, 30*time.Second); who != "kcm-131" {
		t.Fatalf("second leader %s", who)
	}
	var out string
	eventually(t, 20*time.Second, "the server's election events", func() (bool, string) {
		out = k.ok("describe", "lease", cleLease, "-n", "kube-system")
		return strings.Contains(out, "Elected") && strings.Contains(out, "Granted to kcm-130") &&
			strings.Contains(out, "ExpiredRegranted") && strings.Contains(out, "granted to kcm-131"), out
	})
	if !strings.Contains(out, "leasehold") {
		t.Errorf("the events' source is not leasehold:\n%s", out)
	}
	cs := clientset(t, restConfig(t, ts, wireJSON))
	evs, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{FieldSelector: "source=leasehold,reason=Elected"})
	if err != nil || len(evs.Items) == 0 || evs.Items[0].InvolvedObject.UID == "" || evs.Items[0].Type != corev1.EventTypeNormal {
		t.Fatalf("server events: %v %+v", err, evs)
	}
	// Deleting the lease's namespace is not allowed for kube-system; a
	// direct delete of one event works as on a cluster.
	if err := cs.CoreV1().Events("kube-system").Delete(context.Background(), evs.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Events("kube-system").Get(context.Background(), evs.Items[0].Name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("deleted event: %v", err)
	}
	t.Logf("%d Elected events", len(evs.Items))
}

// TestE2ENamespacesEventsABAC: ABAC policies name the new resources
// (resource "namespaces", "events"), and namespace deletion is
// authorized like any delete.
func TestE2ENamespacesEventsABAC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens.csv", "tok-recorder,recorder,u1\ntok-nsadmin,nsadmin,u2\n")
	policy := writeFile(t, dir, "policy.jsonl",
		`{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"recorder","namespace":"*","resource":"events","apiGroup":"*"}}`+"\n"+
			`{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"nsadmin","namespace":"*","resource":"namespaces","apiGroup":"*"}}`+"\n"+
			`{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"*","nonResourcePath":"*","readonly":true}}`+"\n")
	ts := startServer(t, "--tls-auto", "--token-auth-file", tokens, "--authorization-policy-file", policy)
	k := newKubectl(t, ts)
	as := func(token string, args ...string) (int, string, string) {
		return k.run(append([]string{"--token", token}, args...)...)
	}

	if code, out, errOut := as("tok-nsadmin", "create", "namespace", "team-a"); code != 0 || out != "namespace/team-a created\n" {
		t.Fatalf("nsadmin create namespace: %d %q %s", code, out, errOut)
	}
	if code, out, _ := as("tok-nsadmin", "auth", "can-i", "delete", "namespaces"); code != 0 || out != "yes\n" {
		t.Errorf("nsadmin can-i delete namespaces: %d %q", code, out)
	}
	if code, out, _ := as("tok-recorder", "auth", "can-i", "delete", "namespaces"); code != 1 || !strings.HasPrefix(out, "no") {
		t.Errorf("recorder can-i delete namespaces: %d %q", code, out)
	}
	if code, out, _ := as("tok-recorder", "auth", "can-i", "create", "events", "-n", "team-a"); code != 0 || out != "yes\n" {
		t.Errorf("recorder can-i create events: %d %q", code, out)
	}
	code, _, errOut := as("tok-recorder", "delete", "namespace", "team-a")
	if code == 0 || !strings.Contains(errOut, `namespaces "team-a" is forbidden: User "recorder" cannot delete resource "namespaces" in API group ""`) {
		t.Errorf("recorder delete namespace: %d %s", code, errOut)
	}
	code, _, errOut = as("tok-recorder", "get", "namespaces")
	if code == 0 || !strings.Contains(errOut, `User "recorder" cannot list resource "namespaces"`) {
		t.Errorf("recorder list namespaces: %d %s", code, errOut)
	}
	event := writeFile(t, dir, "event.yaml", "apiVersion: v1\nkind: Event\nmetadata:\n  name: e1\n"+
		"involvedObject:\n  kind: Lease\n  name: l\n  namespace: team-a\nreason: Testing\nmessage: hello\ntype: Normal\n")
	if code, out, errOut := as("tok-recorder", "create", "-n", "team-a", "-f", event); code != 0 || out != "event/e1 created\n" {
		t.Fatalf("recorder create event: %d %q %s", code, out, errOut)
	}
	code, _, errOut = as("tok-nsadmin", "get", "events", "-n", "team-a")
	if code == 0 || !strings.Contains(errOut, `User "nsadmin" cannot list resource "events"`) {
		t.Errorf("nsadmin list events: %d %s", code, errOut)
	}
	if code, out, errOut := as("tok-nsadmin", "delete", "namespace", "team-a"); code != 0 || out != "namespace \"team-a\" deleted\n" {
		t.Fatalf("nsadmin delete namespace: %d %q %s", code, out, errOut)
	}
	// The namespace's finalization deletes the event the nsadmin could
	// not: the server's own work, as kube-controller-manager's.
	eventually(t, 20*time.Second, "the event deleted with its namespace", func() (bool, string) {
		code, out, errOut := as("tok-recorder", "get", "events", "-n", "team-a", "-o", "name")
		return code == 0 && out == "", out + errOut
	})
}
