package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// manyKeys is the reproducer's map: n short keys, about 15 bytes each in
// JSON.
func manyKeys(n int) map[string]string {
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

// TestOversizedMetadataRefusedBeforeFieldManager: every write verb answers
// kube-apiserver's 422 for 100,000 annotation keys (over the 256 KiB total)
// without computing managedFields, which took ten seconds.
func TestOversizedMetadataRefusedBeforeFieldManager(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("target"))
	big := manyKeys(100000)
	const tooLong = `Lease.coordination.k8s.io "%s" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes`
	annotationsPatch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": big}})
	if err != nil {
		t.Fatal(err)
	}
	applyPatch, err := json.Marshal(map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "target", "annotations": big},
	})
	if err != nil {
		t.Fatal(err)
	}
	applyNew := strings.Replace(string(applyPatch), `"name":"target"`, `"name":"fresh"`, 1)

	cases := []struct {
		name, object string
		do           func() error
	}{
		{"create", "big", func() error {
			_, err := env.e.Create(ctx, sc, newLease("big", func(l *coordinationv1.Lease) { l.Annotations = big }), nil)
			return err
		}},
		{"update", "target", func() error {
			cur := env.mustGet(t, "default", "target")
			cur.Annotations = big
			_, _, err := env.e.Update(ctx, sc, "target", cur, nil)
			return err
		}},
		{"update creating", "missing", func() error {
			_, _, err := env.e.Update(ctx, sc, "missing", newLease("missing", func(l *coordinationv1.Lease) { l.Annotations = big }), nil)
			return err
		}},
		{"merge patch", "target", func() error {
			_, _, err := env.e.Patch(ctx, sc, "target", types.MergePatchType, annotationsPatch, nil)
			return err
		}},
		{"strategic merge patch", "target", func() error {
			_, _, err := env.e.Patch(ctx, sc, "target", types.StrategicMergePatchType, annotationsPatch, nil)
			return err
		}},
		{"apply", "target", func() error {
			_, _, err := env.e.Patch(ctx, sc, "target", types.ApplyPatchType, applyPatch, &metav1.PatchOptions{FieldManager: "m"})
			return err
		}},
		{"apply creating", "fresh", func() error {
			_, _, err := env.e.Patch(ctx, sc, "fresh", types.ApplyPatchType, []byte(applyNew), &metav1.PatchOptions{FieldManager: "m"})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := c.do()
			t.Logf("refused in %v", time.Since(start))
			wantStatus(t, err, 422, metav1.StatusReasonInvalid, fmt.Sprintf(tooLong, c.object))
		})
	}
	if got := env.mustGet(t, "default", "target"); len(got.Annotations) != 0 {
		t.Errorf("target was changed: %d annotations", len(got.Annotations))
	}
}

// TestMetadataEntryBound: each metadata collection holds at most
// maxMetadataEntries entries; as many as that is accepted.
func TestMetadataEntryBound(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	ok := env.mustCreate(t, "default", newLease("at-bound", func(l *coordinationv1.Lease) { l.Labels = manyKeys(maxMetadataEntries) }))
	if len(ok.ManagedFields) != 1 {
		t.Errorf("managedFields %d entries, want 1", len(ok.ManagedFields))
	}
	_, err := env.e.Create(ctx, sc, newLease("over", func(l *coordinationv1.Lease) { l.Labels = manyKeys(maxMetadataEntries + 1) }), nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Lease.coordination.k8s.io "over" is invalid: metadata.labels: Too many: 1025: must have at most 1024 items`)

	fin := make([]string, maxMetadataEntries+1)
	for i := range fin {
		fin[i] = fmt.Sprintf("example.com/f%d", i)
	}
	cur := env.mustGet(t, "default", "at-bound")
	cur.Finalizers = fin
	_, _, err = env.e.Update(ctx, sc, "at-bound", cur, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Lease.coordination.k8s.io "at-bound" is invalid: metadata.finalizers: Too many: 1025: must have at most 1024 items`)
}
