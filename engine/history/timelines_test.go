package history

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestTimelines stores, replaces, lists and deletes timeline documents,
// keeps them out of the Kubernetes API, and refuses oversized ones.
func TestTimelines(t *testing.T) {
	env := newTestStore(t)
	ctx := context.Background()
	if err := env.SaveTimeline(ctx, "default", "app", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := env.SaveTimeline(ctx, "default", "app", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := env.SaveTimeline(ctx, "edge", "gw", []byte(`{"v":3}`)); err != nil {
		t.Fatal(err)
	}
	docs, err := env.Timelines(ctx)
	if err != nil || len(docs) != 2 || !bytes.Equal(docs[types.NamespacedName{Namespace: "default", Name: "app"}], []byte(`{"v":2}`)) {
		t.Fatalf("timelines: %v %q", err, docs)
	}
	// Decision histories are a separate prefix: neither sees the other.
	if d, err := env.DecisionLeases(ctx); err != nil || len(d) != 0 {
		t.Errorf("decision leases: %v %v", err, d)
	}
	if err := env.DeleteTimeline(ctx, "default", "app"); err != nil {
		t.Fatal(err)
	}
	if err := env.DeleteTimeline(ctx, "default", "app"); err != nil {
		t.Errorf("deleting a missing timeline: %v", err)
	}
	if docs, _ := env.Timelines(ctx); len(docs) != 1 {
		t.Errorf("%d timelines after the delete, want 1", len(docs))
	}
	if err := env.SaveTimeline(ctx, "default", "big", bytes.Repeat([]byte("x"), MaxTimelineBytes+1)); err == nil {
		t.Error("an oversized timeline was stored")
	}
	if err := env.SaveTimeline(ctx, "default", "a/b", []byte("{}")); err == nil || !strings.Contains(err.Error(), "invalid lease") {
		t.Errorf("a name with a slash: %v", err)
	}
}
