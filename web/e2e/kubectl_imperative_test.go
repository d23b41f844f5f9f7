package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// kubectlImperative covers the other everyday verbs: create/replace -f,
// label, annotate, diff and server-side dry runs, a single-lease watch
// (fieldSelector) and delete --all.
func kubectlImperative(t *testing.T, k *kubectlEnv, cs kubernetes.Interface, dir string) {
	manifest := func(holder string) string {
		return writeFile(t, dir, "kc-"+holder+".yaml", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: kc\nspec:\n  holderIdentity: "+holder+"\n  leaseDurationSeconds: 15\n")
	}
	k.wantOutput("lease.coordination.k8s.io/kc created\n", "create", "-f", manifest("c1"))
	code, _, errOut := k.run("create", "-f", manifest("c1"))
	if code != 1 || !strings.Contains(errOut, `Error from server (AlreadyExists): error when creating "`) || !strings.Contains(errOut, `leases.coordination.k8s.io "kc" already exists`) {
		t.Errorf("second create: exit %d stderr %q", code, errOut)
	}
	k.wantOutput("lease.coordination.k8s.io/kc replaced\n", "replace", "-f", manifest("c2"))
	k.wantOutput("lease.coordination.k8s.io/kc labeled\n", "label", "lease", "kc", "tier=edge")
	k.wantOutput("lease.coordination.k8s.io/kc annotated\n", "annotate", "lease", "kc", "note=hi")
	l := getLease(t, cs, "default", "kc")
	if *l.Spec.HolderIdentity != "c2" || l.Labels["tier"] != "edge" || l.Annotations["note"] != "hi" {
		t.Errorf("kc after replace/label/annotate: holder %q labels %v annotations %v", *l.Spec.HolderIdentity, l.Labels, l.Annotations)
	}

	// diff runs a server-side dry-run apply and exits 1 when they differ.
	code, out, errOut := k.run("diff", "-f", manifest("c3"))
	if code != 1 || !strings.Contains(out, "\n-  holderIdentity: c2\n+  holderIdentity: c3\n") {
		t.Errorf("kubectl diff: exit %d stdout %q stderr %q", code, out, errOut)
	}
	k.wantOutput("lease.coordination.k8s.io/kc serverside-applied (server dry run)\n", "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", manifest("c3"))
	if l2 := getLease(t, cs, "default", "kc"); l2.ResourceVersion != l.ResourceVersion || *l2.Spec.HolderIdentity != "c2" {
		t.Errorf("dry runs changed kc: rv %s -> %s holder %q", l.ResourceVersion, l2.ResourceVersion, *l2.Spec.HolderIdentity)
	}

	// A single-lease watch with event types.
	lines, stop := k.streamLines("get", "lease", "kc", "-w", "--output-watch-events")
	defer stop()
	read := func() []string {
		select {
		case line := <-lines:
			return strings.Fields(line)
		case <-time.After(10 * time.Second):
			t.Fatalf("kubectl get lease kc -w printed nothing within 10s")
		}
		return nil
	}
	if h := read(); !slices.Equal(h, []string{"EVENT", "NAME", "HOLDER", "AGE"}) {
		t.Errorf("single watch header = %q", h)
	}
	if r := read(); len(r) != 4 || r[0] != "ADDED" || r[1] != "kc" || r[2] != "c2" {
		t.Errorf("single watch first row = %q", r)
	}
	k.wantOutput("lease.coordination.k8s.io/kc patched\n", "patch", "lease", "kc", "-p", `{"spec":{"holderIdentity":"c4"}}`)
	if r := read(); len(r) != 4 || r[0] != "MODIFIED" || r[1] != "kc" || r[2] != "c4" {
		t.Errorf("single watch row after patch = %q", r)
	}
	k.wantOutput("lease.coordination.k8s.io \"kc\" deleted\n", "delete", "lease", "kc", "--cascade=orphan")
	// Orphan propagation passes through the terminating state (MODIFIED),
	// then the lease goes.
	r := read()
	if len(r) == 4 && r[0] == "MODIFIED" {
		r = read()
	}
	if len(r) != 4 || r[0] != "DELETED" || r[1] != "kc" {
		t.Errorf("single watch row after delete = %q, want DELETED kc", r)
	}
}
