package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func listLeases(t *testing.T, env *testEnv, ns string, opts *metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	t.Helper()
	out, err := env.e.List(context.Background(), env.leases(ns), opts)
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.LeaseList), nil
}

func names(l *coordinationv1.LeaseList) []string {
	var out []string
	for _, i := range l.Items {
		out = append(out, i.Namespace+"/"+i.Name)
	}
	return out
}

func TestListSelectorsAndErrors(t *testing.T) {
	env := newTestEnv(t)
	for _, ns := range []string{"a", "a-b", "b"} {
		for i, name := range []string{"x1", "x2", "x3"} {
			env.mustCreate(t, ns, newLease(name, func(l *coordinationv1.Lease) { l.Labels = map[string]string{"n": fmt.Sprint(i)} }))
		}
	}
	all, err := listLeases(t, env, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Byte order of "<ns>/<name>": "a-b" sorts before "a".
	if got := fmt.Sprint(names(all)); got != "[a-b/x1 a-b/x2 a-b/x3 a/x1 a/x2 a/x3 b/x1 b/x2 b/x3]" {
		t.Errorf("order %s", got)
	}
	if all.Kind != "LeaseList" || all.Items[0].Kind != "" {
		t.Errorf("list TypeMeta %+v item %+v", all.TypeMeta, all.Items[0].TypeMeta)
	}
	cur, _ := env.store.CurrentRevision(context.Background())
	if all.ResourceVersion != fmt.Sprint(cur) {
		t.Errorf("list RV %s, want %d", all.ResourceVersion, cur)
	}

	for _, c := range []struct {
		ns, label, field, want string
	}{
		{"a", "n in (0,2)", "", "[a/x1 a/x3]"},
		{"", "n!=1", "metadata.namespace=b", "[b/x1 b/x3]"},
		{"", "", "metadata.name==x2,metadata.namespace!=a", "[a-b/x2 b/x2]"},
		{"", "!n", "", "[]"},
		{"zz", "", "", "[]"},
	} {
		l, err := listLeases(t, env, c.ns, &metav1.ListOptions{LabelSelector: c.label, FieldSelector: c.field})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(names(l)); got != c.want && !(c.want == "[]" && len(l.Items) == 0) {
			t.Errorf("%q %q: %s, want %s", c.label, c.field, got, c.want)
		}
		if l.Items == nil {
			t.Errorf("items must be [] not null")
		}
	}

	for _, c := range []struct {
		name   string
		opts   metav1.ListOptions
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{"label syntax", metav1.ListOptions{LabelSelector: "a b"}, 400, metav1.StatusReasonBadRequest,
			"unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"},
		{"field syntax", metav1.ListOptions{FieldSelector: "foo"}, 400, metav1.StatusReasonBadRequest,
			"invalid selector: 'foo'; can't understand 'foo'"},
		{"field unknown", metav1.ListOptions{FieldSelector: "spec.holderIdentity=x"}, 400, metav1.StatusReasonBadRequest,
			`"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{"match without rv", metav1.ListOptions{ResourceVersionMatch: "Exact"}, 422, metav1.StatusReasonInvalid,
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`},
		{"exact 0", metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: "Exact"}, 422, metav1.StatusReasonInvalid,
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{"sendInitialEvents", metav1.ListOptions{SendInitialEvents: ptr(true)}, 422, metav1.StatusReasonInvalid,
			`ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list`},
		{"rv syntax", metav1.ListOptions{ResourceVersion: "abc"}, 400, metav1.StatusReasonBadRequest,
			`invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`},
		{"rv negative", metav1.ListOptions{ResourceVersion: "-1"}, 400, metav1.StatusReasonBadRequest,
			`invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax`},
		{"rv syntax with continue", metav1.ListOptions{Continue: base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":3,"start":"/a\u0000"}`)), ResourceVersion: "abc"}, 400, metav1.StatusReasonBadRequest,
			"specifying resource version is not allowed when using continue"},
		{"bad continue", metav1.ListOptions{Continue: "!!"}, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: continue key is not valid: illegal base64 data at input byte 0"},
		{"continue with rv", metav1.ListOptions{Continue: base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":3,"start":"/a\u0000"}`)), ResourceVersion: "3"}, 400, metav1.StatusReasonBadRequest,
			"specifying resource version is not allowed when using continue"},
		{"continue traversal", metav1.ListOptions{Continue: base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":3,"start":"/../x"}`))}, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: continue key is not valid: /../x"},
		{"rv too large", metav1.ListOptions{ResourceVersion: "999999"}, 504, metav1.StatusReasonTimeout,
			fmt.Sprintf("Timeout: Too large resource version: 999999, current: %d", cur)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := listLeases(t, env, "", &c.opts)
			st := wantStatus(t, err, c.code, c.reason, c.msg)
			if c.code == 504 && (st.Details == nil || st.Details.RetryAfterSeconds != 1 || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge) {
				t.Errorf("504 details %+v", st.Details)
			}
		})
	}
}

func TestListPagination(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		env.mustCreate(t, "default", newLease(fmt.Sprintf("l%d", i), func(l *coordinationv1.Lease) { l.Labels = map[string]string{"odd": fmt.Sprint(i%2 == 1)} }))
	}
	p1, err := listLeases(t, env, "default", &metav1.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := base64.RawURLEncoding.DecodeString(p1.Continue)
	if want := fmt.Sprintf(`{"v":"meta.k8s.io/v1","rv":%s,"start":"/l2\u0000"}`, p1.ResourceVersion); string(tok) != want {
		t.Errorf("token %s\nwant  %s", tok, want)
	}
	if p1.RemainingItemCount == nil || *p1.RemainingItemCount != 4 {
		t.Errorf("remainingItemCount %v", p1.RemainingItemCount)
	}
	// Changes after the first page do not show in later pages.
	env.mustCreate(t, "default", newLease("l3a"))
	if _, _, err := env.e.Delete(ctx, env.leases("default"), "l5", nil); err != nil {
		t.Fatal(err)
	}
	p2, err := listLeases(t, env, "default", &metav1.ListOptions{Limit: 3, Continue: p1.Continue})
	if err != nil {
		t.Fatal(err)
	}
	p3, err := listLeases(t, env, "default", &metav1.ListOptions{Limit: 3, Continue: p2.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(p1), names(p2), names(p3)); got != "[default/l0 default/l1 default/l2] [default/l3 default/l4 default/l5] [default/l6]" {
		t.Errorf("pages %s", got)
	}
	if p2.ResourceVersion != p1.ResourceVersion || p3.Continue != "" || p3.RemainingItemCount != nil {
		t.Errorf("page meta %+v %+v", p2.ListMeta, p3.ListMeta)
	}
	// All-namespaces token is relative to the resource prefix.
	pa, _ := listLeases(t, env, "", &metav1.ListOptions{Limit: 1})
	tok, _ = base64.RawURLEncoding.DecodeString(pa.Continue)
	if want := fmt.Sprintf(`{"v":"meta.k8s.io/v1","rv":%s,"start":"/default/l0\u0000"}`, pa.ResourceVersion); string(tok) != want {
		t.Errorf("token %s", tok)
	}
	// With a selector, pages are filled and no remainingItemCount is given.
	s1, err := listLeases(t, env, "default", &metav1.ListOptions{Limit: 2, LabelSelector: "odd=true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(s1)); got != "[default/l1 default/l3]" || s1.RemainingItemCount != nil || s1.Continue == "" {
		t.Errorf("selector page %s %+v", got, s1.ListMeta)
	}
	// RV=0 ignores limit.
	z, _ := listLeases(t, env, "default", &metav1.ListOptions{Limit: 2, ResourceVersion: "0"})
	if len(z.Items) != 7 || z.Continue != "" {
		t.Errorf("rv=0 list %d items, continue %q", len(z.Items), z.Continue)
	}
	// Exact RV from history: the state when the first page was read.
	ex, err := listLeases(t, env, "default", &metav1.ListOptions{ResourceVersion: p1.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Items) != 7 || ex.ResourceVersion != p1.ResourceVersion {
		t.Errorf("exact list %s at %s", names(ex), ex.ResourceVersion)
	}
	// After compaction: 410 for exact and for continue, with a fresh token.
	cur, _ := env.store.CurrentRevision(ctx)
	if err := env.store.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	_, err = listLeases(t, env, "default", &metav1.ListOptions{ResourceVersion: p1.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	wantStatus(t, err, 410, metav1.StatusReasonExpired, "The resourceVersion for the provided list is too old.")
	_, err = listLeases(t, env, "default", &metav1.ListOptions{Limit: 3, Continue: p1.Continue})
	st := wantStatus(t, err, 410, metav1.StatusReasonExpired, inconsistentContinue)
	tok, _ = base64.RawURLEncoding.DecodeString(st.ListMeta.Continue)
	if string(tok) != `{"v":"meta.k8s.io/v1","rv":-1,"start":"/l2\u0000"}` {
		t.Errorf("fresh token %s", tok)
	}
	rest, err := listLeases(t, env, "default", &metav1.ListOptions{Limit: 10, Continue: st.ListMeta.Continue})
	if err != nil || len(rest.Items) != 4 {
		t.Fatalf("continuing with the fresh token: %v %v", err, names(rest))
	}
}

// TestListSkip: a list whose context carries WithListSkip leaves out the
// stored values the test answers true for, before decoding them, and the
// page's resourceVersion is the list's all the same; a list without it
// (as every HTTP request) is whole.
func TestListSkip(t *testing.T) {
	env := newTestEnv(t)
	for _, name := range []string{"keep-1", "drop-1", "keep-2", "drop-2"} {
		env.mustCreate(t, "ns", newLease(name))
	}
	asked := 0
	ctx := WithListSkip(context.Background(), func(stored []byte) bool {
		asked++
		return bytes.Contains(stored, []byte("drop-"))
	})
	out, err := env.e.List(ctx, env.leases(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*coordinationv1.LeaseList)
	if n := names(got); fmt.Sprint(n) != "[ns/keep-1 ns/keep-2]" || asked != 4 {
		t.Errorf("with the skip: %v (asked %d times), want ns/keep-1 and ns/keep-2, asked 4 times", n, asked)
	}
	whole, err := listLeases(t, env, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Items) != 4 || whole.ResourceVersion != got.ResourceVersion {
		t.Errorf("without the skip: %v at %s, want all 4 at %s", names(whole), whole.ResourceVersion, got.ResourceVersion)
	}
}
