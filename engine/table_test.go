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

	"github.com/leasehold/leasehold/storage/boltdb"
)

func TestConvertToTable(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("demo")
	renew := metav1.NewMicroTime(env.clock.Now())
	env.mustCreate(t, "demo", newLease("my-lease", func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = ptr("holder-b")
		l.Spec.RenewTime = &renew
		l.Spec.LeaseTransitions = ptr[int32](2)
	}))
	env.mustCreate(t, "demo", newLease("free", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }))
	env.clock.Add(41 * time.Second)
	list, err := env.e.List(ctx, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := env.e.ConvertToTable(ctx, sc, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first three column definitions are upstream's, byte for byte
	// (ref-samples/table-leases.json).
	b, _ := json.Marshal(tbl.ColumnDefinitions[:3])
	want := `[{"name":"Name","type":"string","format":"name","description":"Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names","priority":0},{"name":"Holder","type":"string","format":"","description":"holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.","priority":0},{"name":"Age","type":"string","format":"","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata","priority":0}]`
	if string(b) != want {
		t.Errorf("columns\n%s\nwant\n%s", b, want)
	}
	for _, c := range tbl.ColumnDefinitions[3:] {
		if c.Priority != 1 {
			t.Errorf("extra column %s has priority %d", c.Name, c.Priority)
		}
	}
	if got := fmt.Sprint(tbl.Rows[0].Cells, tbl.Rows[1].Cells); got != "[free  41s <none> <none> 0 ] [my-lease holder-b 41s 41s expired 2 ]" {
		t.Errorf("cells %s", got)
	}
	p, ok := tbl.Rows[1].Object.Object.(*metav1.PartialObjectMetadata)
	if !ok || p.APIVersion != "meta.k8s.io/v1" || p.Kind != "PartialObjectMetadata" || p.Namespace != "demo" || tbl.ResourceVersion == "" {
		t.Errorf("row object %#v", tbl.Rows[1].Object.Object)
	}

	one, _ := env.e.Get(ctx, sc, "my-lease", nil)
	tbl, err = env.e.ConvertToTable(ctx, sc, one, &metav1.TableOptions{IncludeObject: metav1.IncludeObject})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := tbl.Rows[0].Object.Object.(*coordinationv1.Lease); !ok || l.Kind != "Lease" || len(tbl.Rows) != 1 {
		t.Errorf("includeObject=Object row %#v", tbl.Rows[0].Object.Object)
	}
	tbl, _ = env.e.ConvertToTable(ctx, sc, one, &metav1.TableOptions{IncludeObject: metav1.IncludeNone, NoHeaders: true})
	if tbl.Rows[0].Object.Object != nil || tbl.ColumnDefinitions != nil {
		t.Errorf("includeObject=None %#v", tbl)
	}
	_, err = env.e.ConvertToTable(ctx, sc, one, &metav1.TableOptions{IncludeObject: "Foo"})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, `Unable to convert to Table as requested: includeObject: Invalid value: "Foo": must be 'Metadata', 'Object', 'None', or empty`)

	// LeaseCandidate columns.
	csc := env.candidates("v1beta1", "demo")
	if _, err := env.e.Create(ctx, csc, newCandidate("c1"), nil); err != nil {
		t.Fatal(err)
	}
	cl, _ := env.e.List(ctx, csc, nil)
	tbl, err = env.e.ConvertToTable(ctx, csc, cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name+":"+fmt.Sprint(c.Description != ""))
	}
	if got := fmt.Sprint(cols, tbl.Rows[0].Cells); got != "[Name:true LeaseName:true BinaryVersion:false EmulationVersion:false Age:true Drained:true Drained By:true] [c1 lease 1.37.0 1.36.0 0s false <none>]" {
		t.Errorf("candidate table %s", got)
	}
}

func TestGetResourceVersion(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	l := env.mustCreate(t, "default", newLease("g"))
	for _, rv := range []string{"", "0", l.ResourceVersion} {
		if _, err := env.e.Get(ctx, env.leases("default"), "g", &metav1.GetOptions{ResourceVersion: rv}); err != nil {
			t.Errorf("rv %q: %v", rv, err)
		}
	}
	_, err := env.e.Get(ctx, env.leases("default"), "g", &metav1.GetOptions{ResourceVersion: "abc"})
	wantStatus(t, err, 500, "", `resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`)
	_, err = env.e.Get(ctx, env.leases("default"), "g", &metav1.GetOptions{ResourceVersion: "99999999"})
	wantStatus(t, err, 504, metav1.StatusReasonTimeout, "Timeout: Too large resource version: 99999999, current: "+l.ResourceVersion)
	// A future RV reached while waiting is served. The wait, not its
	// length, is under test: a minute's wait holds the create below
	// however loaded the machine (it failed at 100 ms under -race).
	env.e.rvWait = time.Minute
	go func() {
		time.Sleep(20 * time.Millisecond)
		env.mustCreate(t, "default", newLease("g2"))
	}()
	if _, err := env.e.Get(ctx, env.leases("default"), "g", &metav1.GetOptions{ResourceVersion: fmt.Sprint(mustAtoi(l.ResourceVersion) + 1)}); err != nil {
		t.Errorf("waiting get: %v", err)
	}
	_, err = env.e.Get(ctx, env.leases("other"), "g", nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "g" not found`)
}

func mustAtoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestCandidateTableDrained: the Drained and Drained By columns come from
// Options.Drained, per namespace and candidate name.
func TestCandidateTableDrained(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{Drained: func(ns, id string) (string, bool) {
		return "alice", ns == "demo" && id == "c2"
	}})
	ctx := context.Background()
	csc := env.candidates("v1beta1", "demo")
	for _, name := range []string{"c1", "c2"} {
		if _, err := env.e.Create(ctx, csc, newCandidate(name), nil); err != nil {
			t.Fatal(err)
		}
	}
	cl, _ := env.e.List(ctx, csc, nil)
	tbl, err := env.e.ConvertToTable(ctx, csc, cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tbl.Rows {
		got = append(got, fmt.Sprint(r.Cells[0], " ", r.Cells[5], " ", r.Cells[6]))
	}
	if s := strings.Join(got, ", "); s != "c1 false <none>, c2 true alice" {
		t.Errorf("candidate rows %s, want c2 drained by alice", s)
	}
}
