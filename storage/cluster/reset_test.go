package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/datadir"
)

// TestReset: a member's data becomes a staged one-member cluster holding
// every key it had at its last write's revision; the member's files are
// kept aside; a running member, a directory without one and a second
// reset are refused.
func TestReset(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	layout := datadir.At(t.TempDir())
	if _, err := Reset(ctx, layout, log); err == nil || !strings.Contains(err.Error(), "no cluster member to reset") {
		t.Fatalf("Reset of an empty data directory = %v, want a refusal", err)
	}
	cfg := memberConfig(t, newTestCA(t, "ca"), layout.Member().Dir, "m1", nil)
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var last int64
	for i := range n {
		resp, err := m.client.Put(ctx, fmt.Sprintf("/pfx/k%03d", i), strings.Repeat("v", i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := Reset(ctx, layout, log); err == nil || !strings.Contains(err.Error(), "is running: stop it first") {
		t.Errorf("Reset of a running member = %v, want a refusal", err)
	}
	m.Close()

	res, err := Reset(ctx, layout, log)
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if res.State.Name != "m1" || res.Info.Revision < last || res.Snapshot != layout.Member().RestoreSnapshot {
		t.Errorf("Reset = %+v, want member m1's data at revision %d or later, staged in %s", res, last, layout.Member().RestoreSnapshot)
	}
	if _, err := os.Stat(res.KeptAs + "/etcd/member"); err != nil {
		t.Errorf("the member's old data is not kept aside: %v", err)
	}
	if _, err := os.Stat(layout.Member().Dir + ".reset"); !os.IsNotExist(err) {
		t.Errorf("the reset's work directory is left (%v)", err)
	}
	if _, err := Reset(ctx, layout, log); err == nil {
		t.Errorf("a second Reset over a staged snapshot succeeded")
	}

	// The staged snapshot starts a new cluster with every key.
	fresh := memberConfig(t, newTestCA(t, "ca2"), layout.Member().Dir, "m1", nil)
	if err := Restore(ctx, res.Snapshot, fresh, RestoreRevisionBump); err != nil {
		t.Fatal(err)
	}
	r, err := Start(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	resp, err := r.client.Get(ctx, "/pfx/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != n || string(resp.Kvs[n-1].Value) != strings.Repeat("v", n-1) {
		t.Errorf("the reset cluster holds %d keys (want %d) or a wrong value", len(resp.Kvs), n)
	}
	if st, err := r.Status(ctx); err != nil || len(st.Members) != 1 {
		t.Errorf("the reset cluster's members: %+v, %v; want m1 alone", st, err)
	}
}
