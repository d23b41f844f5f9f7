package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzPatch sends random patch bodies of every type at a stored lease: the
// engine must never panic and every error must be a StatusError.
func FuzzPatch(f *testing.F) {
	env := newTestEnv(f)
	env.mustCreate(f, "default", newLease("fz", func(l *coordinationv1.Lease) {
		l.Labels = map[string]string{"a": "b"}
		l.Finalizers = []string{"example.com/x"}
	}))
	seeds := []string{
		`{}`, `[]`, `null`, `{"spec":{"holderIdentity":null}}`, `{"metadata":{"labels":{"$patch":"replace"}}}`,
		`[{"op":"remove","path":"/spec"}]`, `[{"op":"add","path":"/metadata/finalizers/-","value":"x"}]`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/x"]}}`, `{"metadata":{"$retainKeys":["labels"]}}`,
		"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: fz\n", `{"kind":"Status","apiVersion":"v1"}`,
		`{"spec":{"renewTime":"bad"}}`, `{"metadata":{"managedFields":[{"manager":1}]}}`, "\x00\xff",
	}
	for _, s := range seeds {
		for pt := 0; pt < 4; pt++ {
			f.Add(uint8(pt), []byte(s))
		}
	}
	pts := []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		pt := pts[int(which)%len(pts)]
		opts := &metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
		if pt == types.ApplyPatchType {
			opts.FieldManager = "fuzz"
		}
		_, _, err := env.e.Patch(context.Background(), env.leases("default"), "fz", pt, body, opts)
		if err != nil {
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("%s %q: error %T is not a StatusError: %v", pt, body, err, err)
			}
			if strings.HasPrefix(se.ErrStatus.Message, "Internal error occurred: patch failed: ") {
				t.Fatalf("%s %q: recovered panic: %v", pt, body, err)
			}
		}
	})
}
