package e2e

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// leaseWideColumns are the priority-1 Table columns leasehold adds to the
// upstream NAME/HOLDER/AGE for "kubectl get leases -o wide"
// (kubectl#1669: when was it renewed, when does it expire).
var leaseWideColumns = []string{"RENEWED", "EXPIRES", "TRANSITIONS", "STRATEGY"}

// TestE2EKubectl drives the installed kubectl through the commands users
// run against leases, checking exact output and the resulting objects.
func TestE2EKubectl(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	k := newKubectl(t, ts)
	cs := clientset(t, restConfig(t, ts, wireJSON))
	dir := t.TempDir()

	t.Run("version", func(t *testing.T) { kubectlVersion(t, k) })
	t.Run("api-resources", func(t *testing.T) { kubectlAPIResources(t, k) })
	t.Run("apply", func(t *testing.T) { kubectlApply(t, k, cs, dir) })
	t.Run("get", func(t *testing.T) { kubectlGet(t, k, cs) })
	t.Run("server-side-apply", func(t *testing.T) { kubectlServerSideApply(t, k, cs, dir) })
	t.Run("patch", func(t *testing.T) { kubectlPatch(t, k, cs) })
	t.Run("edit", func(t *testing.T) { kubectlEdit(t, k, cs, dir) })
	t.Run("watch", func(t *testing.T) { kubectlWatch(t, k, cs) })
	t.Run("explain", func(t *testing.T) { kubectlExplain(t, k) })
	t.Run("imperative", func(t *testing.T) { kubectlImperative(t, k, cs, dir) })
	t.Run("delete", func(t *testing.T) { kubectlDelete(t, k, cs) })
}

func getLease(t *testing.T, cs kubernetes.Interface, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s/%s: %v", ns, name, err)
	}
	return l
}

func kubectlVersion(t *testing.T, k *kubectlEnv) {
	var v struct {
		ServerVersion struct {
			Major, Minor, GitVersion string
		} `json:"serverVersion"`
	}
	out := k.ok("version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	sv := v.ServerVersion
	if sv.Major != "1" || sv.Minor != "37" || !strings.HasPrefix(sv.GitVersion, "v1.37.0+leasehold-") {
		t.Errorf("server version = %+v, want 1.37 v1.37.0+leasehold-…", sv)
	}
	if out := k.ok("version"); !strings.Contains(out, "Server Version: v1.37.0+leasehold-") {
		t.Errorf("kubectl version printed %q", out)
	}
}

func kubectlAPIResources(t *testing.T, k *kubectlEnv) {
	out := k.ok("api-resources", "--api-group=coordination.k8s.io", "--no-headers")
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		rows[f[0]] = f
	}
	// No SHORTNAMES upstream, so the row has four fields.
	if got := rows["leases"]; !slices.Equal(got, []string{"leases", "coordination.k8s.io/v1", "true", "Lease"}) {
		t.Errorf("api-resources leases row = %q; output:\n%s", got, out)
	}
	// kube-apiserver serves LeaseCandidates only with v1beta1 enabled by
	// --runtime-config; leasehold serves them by default (README).
	if got := rows["leasecandidates"]; !slices.Equal(got, []string{"leasecandidates", "coordination.k8s.io/v1beta1", "true", "LeaseCandidate"}) {
		t.Errorf("api-resources leasecandidates row = %q; output:\n%s", got, out)
	}
	wide := k.ok("api-resources", "--api-group=coordination.k8s.io", "-o", "wide")
	if !regexp.MustCompile(`(?m)^leases\s+coordination\.k8s\.io/v1\s+true\s+Lease\s+create,delete,deletecollection,get,list,patch,update,watch\s*$`).MatchString(wide) {
		t.Errorf("api-resources -o wide lacks the lease verbs:\n%s", wide)
	}
}

const leaseManifest = `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: ka
  labels:
    app: demo
spec:
  holderIdentity: holder-a
  leaseDurationSeconds: %d
  acquireTime: "2026-01-01T00:00:00.000000Z"
  renewTime: "2026-01-01T00:00:00.000000Z"
  leaseTransitions: 0
`

func kubectlApply(t *testing.T, k *kubectlEnv, cs kubernetes.Interface, dir string) {
	f := writeFile(t, dir, "lease.yaml", strings.Replace(leaseManifest, "%d", "15", 1))
	k.wantOutput("lease.coordination.k8s.io/ka created\n", "apply", "-f", f)
	l := getLease(t, cs, "default", "ka")
	if *l.Spec.LeaseDurationSeconds != 15 || l.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
		t.Errorf("after apply: duration %d annotations %v", *l.Spec.LeaseDurationSeconds, l.Annotations)
	}
	if ms := managerNames(l); !slices.Equal(ms, []string{"kubectl-client-side-apply/Update"}) {
		t.Errorf("managedFields after apply = %v, want [kubectl-client-side-apply/Update]", ms)
	}

	writeFile(t, dir, "lease.yaml", strings.Replace(leaseManifest, "%d", "25", 1))
	k.wantOutput("lease.coordination.k8s.io/ka configured\n", "apply", "-f", f)
	if l := getLease(t, cs, "default", "ka"); *l.Spec.LeaseDurationSeconds != 25 {
		t.Errorf("after configure: duration %d, want 25", *l.Spec.LeaseDurationSeconds)
	}
	k.wantOutput("lease.coordination.k8s.io/ka unchanged\n", "apply", "-f", f)

	// A second lease in another namespace for the -A listing.
	other := strings.NewReplacer("name: ka", "name: kb\n  namespace: kube-system", "holder-a", "holder-b", "%d", "40").Replace(leaseManifest)
	k.wantOutput("lease.coordination.k8s.io/kb created\n", "apply", "-f", writeFile(t, dir, "other.yaml", other))
}

func managerNames(l *coordinationv1.Lease) []string {
	var out []string
	for _, m := range l.ManagedFields {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return out
}

// tableRows splits kubectl table output into whitespace-separated fields.
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

var ageRE = regexp.MustCompile(`^\d+s$`)

func kubectlGet(t *testing.T, k *kubectlEnv, cs kubernetes.Interface) {
	rows := tableRows(k.ok("get", "leases", "-A"))
	if len(rows) != 3 || !slices.Equal(rows[0], []string{"NAMESPACE", "NAME", "HOLDER", "AGE"}) {
		t.Fatalf("get leases -A rows = %q", rows)
	}
	// Key order: default/ka before kube-system/kb.
	if !slices.Equal(rows[1][:3], []string{"default", "ka", "holder-a"}) || !ageRE.MatchString(rows[1][3]) ||
		!slices.Equal(rows[2][:3], []string{"kube-system", "kb", "holder-b"}) {
		t.Errorf("get leases -A rows = %q", rows)
	}

	rows = tableRows(k.ok("get", "leases"))
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"NAME", "HOLDER", "AGE"}) || !slices.Equal(rows[1][:2], []string{"ka", "holder-a"}) {
		t.Errorf("get leases rows = %q", rows)
	}
	if code, out, errOut := k.run("get", "leases", "-n", "kube-public"); code != 0 || out != "" || strings.TrimSpace(errOut) != "No resources found in kube-public namespace." {
		t.Errorf("empty namespace: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut := k.run("get", "lease", "nope")
	if code != 1 || strings.TrimSpace(errOut) != `Error from server (NotFound): leases.coordination.k8s.io "nope" not found` {
		t.Errorf("get missing lease: exit %d stderr %q", code, errOut)
	}

	// -o wide: the upstream columns then leasehold's priority-1 columns.
	// ka was renewed long ago ("expired"); its strategy cell is empty.
	rows = tableRows(k.ok("get", "leases", "-o", "wide"))
	wantHeader := append([]string{"NAME", "HOLDER", "AGE"}, leaseWideColumns...)
	if len(rows) != 2 || !slices.Equal(rows[0], wantHeader) {
		t.Errorf("get leases -o wide = %q, want header %q", rows, wantHeader)
	} else if r := rows[1]; len(r) != 6 || r[0] != "ka" || !regexp.MustCompile(`^\d+[dy]`).MatchString(r[3]) || r[4] != "expired" || r[5] != "0" {
		t.Errorf("get leases -o wide row = %q, want ka holder-a <age> <days> expired 0", r)
	}
	fresh := newLease("wide", nil, "w-holder")
	fresh.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-3 * time.Second)}
	fresh.Spec.LeaseDurationSeconds = new(int32(600))
	fresh.Spec.LeaseTransitions = new(int32(4))
	fresh.Spec.Strategy = new(coordinationv1.OldestEmulationVersion)
	if _, err := cs.CoordinationV1().Leases("wide-ns").Create(context.Background(), fresh, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create wide-ns/wide: %v", err)
	}
	rows = tableRows(k.ok("get", "leases", "-o", "wide", "-n", "wide-ns"))
	if len(rows) != 2 || len(rows[1]) != 7 || rows[1][1] != "w-holder" || !regexp.MustCompile(`^[3-9]s$`).MatchString(rows[1][3]) ||
		!regexp.MustCompile(`^9m5\ds$`).MatchString(rows[1][4]) || rows[1][5] != "4" || rows[1][6] != "OldestEmulationVersion" {
		t.Errorf("get leases -o wide -n wide-ns = %q, want wide w-holder <age> 3s 9m5Xs 4 OldestEmulationVersion", rows)
	}

	// -o yaml and -o json: the object as stored, managedFields stripped.
	var fromYAML, fromJSON coordinationv1.Lease
	y := k.ok("get", "lease", "ka", "-o", "yaml")
	if err := yaml.UnmarshalStrict([]byte(y), &fromYAML); err != nil {
		t.Fatalf("-o yaml: %v\n%s", err, y)
	}
	j := k.ok("get", "lease", "ka", "-o", "json")
	if err := json.Unmarshal([]byte(j), &fromJSON); err != nil {
		t.Fatalf("-o json: %v\n%s", err, j)
	}
	live := getLease(t, cs, "default", "ka")
	for name, got := range map[string]*coordinationv1.Lease{"yaml": &fromYAML, "json": &fromJSON} {
		if got.Kind != "Lease" || got.APIVersion != "coordination.k8s.io/v1" || got.UID != live.UID ||
			got.ResourceVersion != live.ResourceVersion || len(got.ManagedFields) != 0 || got.Labels["app"] != "demo" {
			t.Errorf("-o %s: %+v", name, got)
		}
		wantSpec(t, "-o "+name, live.Spec, got.Spec)
	}
	if !strings.Contains(y, "  renewTime: \"2026-01-01T00:00:00.000000Z\"\n") {
		t.Errorf("-o yaml renewTime is not the MicroTime string:\n%s", y)
	}

	var list struct {
		Kind  string                 `json:"kind"`
		Items []coordinationv1.Lease `json:"items"`
	}
	j = k.ok("get", "leases", "-A", "-o", "json")
	if err := json.Unmarshal([]byte(j), &list); err != nil || list.Kind != "List" || len(list.Items) != 3 ||
		list.Items[0].Kind != "Lease" || list.Items[1].Namespace != "kube-system" || list.Items[2].Namespace != "wide-ns" {
		t.Errorf("get leases -A -o json: %v %+v", err, list)
	}
}

func kubectlServerSideApply(t *testing.T, k *kubectlEnv, cs kubernetes.Interface, dir string) {
	manifest := func(holder string) string {
		return writeFile(t, dir, "ssa-"+holder+".yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: ks
spec:
  holderIdentity: `+holder+`
  leaseDurationSeconds: 10
`)
	}
	k.wantOutput("lease.coordination.k8s.io/ks serverside-applied\n", "apply", "--server-side", "-f", manifest("ssa-a"))
	if ms := managerNames(getLease(t, cs, "default", "ks")); !slices.Equal(ms, []string{"kubectl/Apply"}) {
		t.Errorf("managedFields after server-side apply = %v, want [kubectl/Apply]", ms)
	}

	code, out, errOut := k.run("apply", "--server-side", "--field-manager=other", "-f", manifest("ssa-b"))
	if code != 1 || out != "" ||
		!strings.Contains(errOut, `Apply failed with 1 conflict: conflict with "kubectl": .spec.holderIdentity`) ||
		!strings.Contains(errOut, "--force-conflicts") {
		t.Errorf("conflicting server-side apply: exit %d stdout %q stderr:\n%s", code, out, errOut)
	}
	if h := *getLease(t, cs, "default", "ks").Spec.HolderIdentity; h != "ssa-a" {
		t.Errorf("holder after rejected apply = %q, want ssa-a", h)
	}

	k.wantOutput("lease.coordination.k8s.io/ks serverside-applied\n", "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", manifest("ssa-b"))
	l := getLease(t, cs, "default", "ks")
	if *l.Spec.HolderIdentity != "ssa-b" {
		t.Errorf("holder after forced apply = %q, want ssa-b", *l.Spec.HolderIdentity)
	}
	// "other" took holderIdentity; "kubectl" keeps leaseDurationSeconds,
	// which both applied with the same value (shared ownership).
	if ms := managerNames(l); !slices.Equal(ms, []string{"kubectl/Apply", "other/Apply"}) {
		t.Errorf("managedFields after forced apply = %v, want [kubectl/Apply other/Apply]", ms)
	}

	// Server-side apply over a client-side-applied lease migrates it: the
	// client-side manager's fields move to "kubectl".
	k.wantOutput("lease.coordination.k8s.io/ka serverside-applied\n", "apply", "--server-side", "-f", dir+"/lease.yaml")
	if ms := managerNames(getLease(t, cs, "default", "ka")); !slices.Contains(ms, "kubectl/Apply") || slices.Contains(ms, "kubectl-client-side-apply/Update") {
		t.Errorf("managedFields after migration = %v, want kubectl/Apply and no kubectl-client-side-apply", ms)
	}
}

func kubectlPatch(t *testing.T, k *kubectlEnv, cs kubernetes.Interface) {
	k.wantOutput("lease.coordination.k8s.io/ka patched\n", "patch", "lease", "ka", "--type", "merge", "-p", `{"spec":{"holderIdentity":"merged"}}`)
	k.wantOutput("lease.coordination.k8s.io/ka patched\n", "patch", "lease", "ka", "--type", "json", "-p", `[{"op":"replace","path":"/spec/leaseTransitions","value":3}]`)
	k.wantOutput("lease.coordination.k8s.io/ka patched\n", "patch", "lease", "ka", "--type", "strategic", "-p", `{"metadata":{"labels":{"patched":"yes"}}}`)
	l := getLease(t, cs, "default", "ka")
	if *l.Spec.HolderIdentity != "merged" || *l.Spec.LeaseTransitions != 3 || l.Labels["patched"] != "yes" || l.Labels["app"] != "demo" {
		t.Errorf("after patches: holder %q transitions %d labels %v", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions, l.Labels)
	}
	// The same patch again changes nothing: kubectl notices the unchanged RV.
	k.wantOutput("lease.coordination.k8s.io/ka patched (no change)\n", "patch", "lease", "ka", "--type", "merge", "-p", `{"spec":{"holderIdentity":"merged"}}`)
	if l2 := getLease(t, cs, "default", "ka"); l2.ResourceVersion != l.ResourceVersion {
		t.Errorf("no-op patch moved RV %s -> %s", l.ResourceVersion, l2.ResourceVersion)
	}

	code, _, errOut := k.run("patch", "lease", "ka", "--type", "merge", "-p", `{"spec":{"leaseDurationSeconds":0}}`)
	if code != 1 || !strings.Contains(errOut, `The Lease "ka" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`) {
		t.Errorf("invalid patch: exit %d stderr %q", code, errOut)
	}
}

func kubectlEdit(t *testing.T, k *kubectlEnv, cs kubernetes.Interface, dir string) {
	// kubectl runs $KUBE_EDITOR with the temp file as its last argument.
	editor := writeFile(t, dir, "editor.sh", "#!/bin/sh\nsed -i 's/holderIdentity: merged/holderIdentity: edited/' \"$1\"\n")
	if err := os.Chmod(editor, 0o700); err != nil {
		t.Fatal(err)
	}
	k.extraEnv = []string{"KUBE_EDITOR=" + editor}
	defer func() { k.extraEnv = nil }()
	k.wantOutput("lease.coordination.k8s.io/ka edited\n", "edit", "lease", "ka")
	l := getLease(t, cs, "default", "ka")
	if *l.Spec.HolderIdentity != "edited" {
		t.Errorf("holder after edit = %q, want edited", *l.Spec.HolderIdentity)
	}
	if ms := managerNames(l); !slices.Contains(ms, "kubectl-edit/Update") {
		t.Errorf("managedFields after edit = %v, want a kubectl-edit/Update entry", ms)
	}
	// An edit that changes nothing is reported as such.
	if code, out, errOut := k.run("edit", "lease", "ka"); code != 0 || strings.TrimSpace(out+errOut) != "Edit cancelled, no changes made." {
		t.Errorf("no-change edit: exit %d stdout %q stderr %q", code, out, errOut)
	}
}

func kubectlWatch(t *testing.T, k *kubectlEnv, cs kubernetes.Interface) {
	lines, stop := k.streamLines("get", "leases", "-w")
	defer stop()
	next := func(what string) []string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w exited before %s; stderr: %s", what, stop())
			}
			return strings.Fields(line)
		case <-time.After(10 * time.Second):
			t.Fatalf("kubectl get -w printed no %s within 10s", what)
		}
		return nil
	}
	if h := next("header"); !slices.Equal(h, []string{"NAME", "HOLDER", "AGE"}) {
		t.Errorf("watch header = %q", h)
	}
	// Initial rows in key order: ka (edited), then ks from the apply tests.
	if r := next("initial row ka"); len(r) != 3 || r[0] != "ka" || r[1] != "edited" {
		t.Errorf("watch initial row = %q, want ka edited <age>", r)
	}
	if r := next("initial row ks"); len(r) != 3 || r[0] != "ks" || r[1] != "ssa-b" {
		t.Errorf("watch initial row = %q, want ks ssa-b <age>", r)
	}
	// kubectl watches from its list's RV, so the change shows even if it
	// lands before the watch request does.
	if _, err := cs.CoordinationV1().Leases("default").Patch(context.Background(), "ka", "application/merge-patch+json",
		[]byte(`{"spec":{"holderIdentity":"watched"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch: %v", err)
	}
	if r := next("row for the change"); len(r) != 3 || r[0] != "ka" || r[1] != "watched" {
		t.Errorf("watch row after change = %q, want ka watched <age>", r)
	}
}

func kubectlExplain(t *testing.T, k *kubectlEnv) {
	out := k.ok("explain", "lease")
	for _, re := range []string{`(?m)^GROUP:\s+coordination\.k8s\.io$`, `(?m)^KIND:\s+Lease$`, `(?m)^VERSION:\s+v1$`,
		`Lease defines a lease concept\.`, `(?m)^\s+spec\s+<LeaseSpec>$`, `(?m)^\s+metadata\s+<ObjectMeta>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain lease lacks %s:\n%s", re, out)
		}
	}
	out = k.ok("explain", "lease.spec")
	for _, re := range []string{`(?m)^FIELD:\s+spec <LeaseSpec>$`, `LeaseSpec is a specification of a Lease\.`,
		`(?m)^\s+holderIdentity\s+<string>$`, `(?m)^\s+leaseDurationSeconds\s+<integer>$`, `(?m)^\s+acquireTime\s+<string>$`,
		`(?m)^\s+renewTime\s+<string>$`, `(?m)^\s+leaseTransitions\s+<integer>$`, `(?m)^\s+strategy\s+<string>$`,
		`(?m)^\s+preferredHolder\s+<string>$`, `holderIdentity contains the identity of the holder of a current lease\.`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain lease.spec lacks %s:\n%s", re, out)
		}
	}
}

func kubectlDelete(t *testing.T, k *kubectlEnv, cs kubernetes.Interface) {
	out := k.ok("delete", "lease", "ka")
	if !regexp.MustCompile(`^lease\.coordination\.k8s\.io "ka" deleted( from default namespace)?\n$`).MatchString(out) {
		t.Errorf("kubectl delete printed %q", out)
	}
	_, err := cs.CoordinationV1().Leases("default").Get(context.Background(), "ka", metav1.GetOptions{})
	wantStatus(t, "get after kubectl delete", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "ka" not found`)
	code, _, errOut := k.run("delete", "lease", "ka")
	if code != 1 || strings.TrimSpace(errOut) != `Error from server (NotFound): leases.coordination.k8s.io "ka" not found` {
		t.Errorf("delete missing: exit %d stderr %q", code, errOut)
	}
}
