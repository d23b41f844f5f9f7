package engine

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func newCandidate(name string, mut ...func(*coordinationv1beta1.LeaseCandidate)) *coordinationv1beta1.LeaseCandidate {
	c := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName: "lease", BinaryVersion: "1.37.0", EmulationVersion: "1.36.0",
			Strategy: coordinationv1.OldestEmulationVersion,
		},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func TestLeaseCandidateValidation(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.candidates("v1beta1", "default")
	for _, c := range []struct {
		name string
		mut  func(*coordinationv1beta1.LeaseCandidate)
		msg  string
	}{
		{"Cand_1.x", nil, ""},
		{"third-party", func(c *coordinationv1beta1.LeaseCandidate) {
			c.Spec.Strategy = "foo.com/bar"
			c.Spec.EmulationVersion = ""
		}, ""},
		{"pre", func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.BinaryVersion = "1.37.0-alpha.1+build.5" }, ""},
		{"..", nil, `LeaseCandidate.coordination.k8s.io ".." is invalid: metadata.name: Invalid value: "..": must not be '..'`},
		{"bad name!", nil, `LeaseCandidate.coordination.k8s.io "bad name!" is invalid: metadata.name: Invalid value: "bad name!": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`},
		{"empty", func(c *coordinationv1beta1.LeaseCandidate) { c.Spec = coordinationv1beta1.LeaseCandidateSpec{} },
			`LeaseCandidate.coordination.k8s.io "empty" is invalid: [spec.leaseName: Required value, spec.binaryVersion: Required value, spec.strategy: Required value]`},
		{"vprefix", func(c *coordinationv1beta1.LeaseCandidate) {
			c.Spec.BinaryVersion = "v1.36"
			c.Spec.EmulationVersion = "1.37.0"
		},
			"LeaseCandidate.coordination.k8s.io \"vprefix\" is invalid: [spec.binaryVersion: Invalid value: \"v1.36\": must be a valid semantic version, spec.binaryVersion: Invalid value: \"v1.36\": must be greater than or equal to `emulationVersion`]"},
		{"leadingzero", func(c *coordinationv1beta1.LeaseCandidate) {
			c.Spec.BinaryVersion = "1.037.0"
			c.Spec.EmulationVersion = ""
		},
			"LeaseCandidate.coordination.k8s.io \"leadingzero\" is invalid: [spec.binaryVersion: Invalid value: \"1.037.0\": must be a valid semantic version, spec.emulationVersion: Required value: must be specified when `strategy` is 'OldestEmulationVersion']"},
		{"older", func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.BinaryVersion = "1.36.0-rc.1" },
			"LeaseCandidate.coordination.k8s.io \"older\" is invalid: spec.binaryVersion: Invalid value: \"1.36.0-rc.1\": must be greater than or equal to `emulationVersion`"},
		{"noemu", func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.EmulationVersion = "" },
			"LeaseCandidate.coordination.k8s.io \"noemu\" is invalid: spec.emulationVersion: Required value: must be specified when `strategy` is 'OldestEmulationVersion'"},
		{"badstrategy", func(c *coordinationv1beta1.LeaseCandidate) { c.Spec.Strategy = "foo.com/Bad_/x" },
			`LeaseCandidate.coordination.k8s.io "badstrategy" is invalid: spec.strategy.strategy: Invalid value: "foo.com/Bad_/x": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := newCandidate(c.name)
			if c.mut != nil {
				c.mut(obj)
			}
			_, err := env.e.Create(ctx, sc, obj, nil)
			if c.msg == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			wantStatus(t, err, 422, metav1.StatusReasonInvalid, c.msg)
		})
	}

	// leaseName is immutable.
	cur, err := env.e.Get(ctx, sc, "Cand_1.x", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cur.(*coordinationv1beta1.LeaseCandidate).DeepCopy()
	c.Spec.LeaseName = "y"
	_, _, err = env.e.Update(ctx, sc, "Cand_1.x", c, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `LeaseCandidate.coordination.k8s.io "Cand_1.x" is invalid: spec.leaseName: Invalid value: "y": field is immutable`)
}

func TestLeaseCandidateVersions(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	alpha := env.candidates("v1alpha2", "default")
	in := &coordinationv1alpha2.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec:       coordinationv1alpha2.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.37.0", Strategy: "foo.com/bar"},
	}
	out, err := env.e.Create(ctx, alpha, in, &metav1.CreateOptions{FieldManager: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	ac := out.(*coordinationv1alpha2.LeaseCandidate)
	if ac.APIVersion != "coordination.k8s.io/v1alpha2" || ac.ManagedFields[0].APIVersion != "coordination.k8s.io/v1alpha2" {
		t.Errorf("v1alpha2 create %+v", ac)
	}
	got, err := env.e.Get(ctx, env.candidates("v1beta1", "default"), "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.(*coordinationv1beta1.LeaseCandidate); b.Spec.LeaseName != "l" || b.APIVersion != "coordination.k8s.io/v1beta1" {
		t.Errorf("v1beta1 view %+v", b)
	}
	// Apply through v1alpha2 after updates through v1beta1: versions convert.
	_, _, err = env.e.Patch(ctx, alpha, "c", types.ApplyPatchType, []byte(`{"apiVersion":"coordination.k8s.io/v1alpha2","kind":"LeaseCandidate","metadata":{"name":"c"},"spec":{"leaseName":"l","binaryVersion":"1.38.0","strategy":"foo.com/bar"}}`), &metav1.PatchOptions{FieldManager: "ssa", Force: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := env.e.List(ctx, alpha, nil)
	if err != nil {
		t.Fatal(err)
	}
	if items := l.(*coordinationv1alpha2.LeaseCandidateList).Items; len(items) != 1 || items[0].Spec.BinaryVersion != "1.38.0" {
		t.Errorf("list %+v", items)
	}
	r, _ := env.e.ResourceFor(GroupName, "v1alpha2", "leasecandidates")
	if v, _ := r.ServedVersion("v1alpha2"); v.Deprecation != "coordination.k8s.io/v1alpha2 LeaseCandidate is deprecated in v1.35+, unavailable in v1.38+" {
		t.Errorf("deprecation %q", v.Deprecation)
	}
	if _, ok := env.e.ResourceFor(GroupName, "v1", "leasecandidates"); ok {
		t.Errorf("LeaseCandidate must not be served in v1")
	}
}

func TestSemver(t *testing.T) {
	for s, ok := range map[string]bool{
		"1.2.3": true, "0.0.0": true, "1.2.3-alpha.1": true, "1.2.3+b.1": true, "1.2.3-0a": true,
		"v1.2.3": false, "1.2": false, "01.2.3": false, "1.2.3-01": false, "1.2.3-": false, "1.2.3+": false,
		"1.2.3-a..b": false, "1.2.x": false, "": false, "1.2.3-a_b": false, "99999999999999999999.0.0": false,
	} {
		if _, err := parseSemver(s); (err == nil) != ok {
			t.Errorf("parseSemver(%q) error %v, want ok=%v", s, err, ok)
		}
	}
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0"}
	for i := 1; i < len(order); i++ {
		a, _ := parseSemver(order[i-1])
		b, _ := parseSemver(order[i])
		if a.compare(b) != -1 || b.compare(a) != 1 {
			t.Errorf("%s < %s not respected", order[i-1], order[i])
		}
	}
}
