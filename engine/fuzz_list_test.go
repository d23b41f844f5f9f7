package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzListSelectors lists stored leases with random label and field
// selectors, limits and continue tokens (parsed by the engine from
// untrusted query parameters): the engine must never panic, must answer a
// bad request with a 4xx Status (never a 500), and every item it returns
// must match the label selector.
func FuzzListSelectors(f *testing.F) {
	env := newTestEnv(f)
	for i := 0; i < 12; i++ {
		env.mustCreate(f, fmt.Sprintf("ns%d", i%2), newLease(fmt.Sprintf("l%02d", i), func(l *coordinationv1.Lease) {
			l.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%3), "tier": "x"}
		}))
	}
	// A real continue token to mutate.
	first, err := env.e.List(context.Background(), env.leases(""), &metav1.ListOptions{Limit: 2})
	if err != nil {
		f.Fatal(err)
	}
	token := first.(*coordinationv1.LeaseList).Continue
	for _, s := range []struct {
		label, field, cont string
		limit              int64
	}{
		{"app=a1", "", "", 0}, {"app in (a0,a2),tier", "metadata.name!=l03", "", 3},
		{"!app", "metadata.namespace=ns1", "", 0}, {"app notin (", "spec.holderIdentity=h1", "", -1},
		{"", "", token, 2}, {"", "", token + "x", 0}, {"", "", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIifQ", 1},
		{"a=b,c!=d,e in (f),!g,h", "metadata.name=,x==y", "%%%", 1 << 40}, {"app=" + string(make([]byte, 70)), "", "", 0},
	} {
		f.Add(s.label, s.field, s.cont, s.limit, "")
		f.Add(s.label, s.field, s.cont, s.limit, "ns1")
	}
	f.Fuzz(func(t *testing.T, label, field, cont string, limit int64, ns string) {
		opts := &metav1.ListOptions{LabelSelector: label, FieldSelector: field, Continue: cont, Limit: limit}
		out, err := env.e.List(context.Background(), env.leases(ns), opts)
		if err != nil {
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("%+v: error %T is not a StatusError: %v", opts, err, err)
			}
			if se.ErrStatus.Code >= 500 {
				t.Fatalf("%+v: %d %s", opts, se.ErrStatus.Code, se.ErrStatus.Message)
			}
			return
		}
		sel, perr := labels.Parse(label)
		if perr != nil {
			t.Fatalf("%+v: the engine accepted a label selector that does not parse: %v", opts, perr)
		}
		list := out.(*coordinationv1.LeaseList)
		for _, l := range list.Items {
			if !sel.Matches(labels.Set(l.Labels)) {
				t.Fatalf("%+v: lease %s/%s with labels %v does not match", opts, l.Namespace, l.Name, l.Labels)
			}
			if ns != "" && l.Namespace != ns {
				t.Fatalf("%+v: lease %s/%s listed in namespace %q", opts, l.Namespace, l.Name, ns)
			}
		}
		if limit > 0 && int64(len(list.Items)) > limit {
			t.Fatalf("%+v: %d items for limit %d", opts, len(list.Items), limit)
		}
	})
}
