package leasecodec

import (
	"reflect"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// strictDecodeLease is the serializer path DecodeJSON replaces.
func strictDecodeLease(body []byte) (*coordinationv1.Lease, bool) {
	var info *runtime.SerializerInfo
	for _, i := range testCodecs.SupportedMediaTypes() {
		if i.MediaType == "application/json" {
			info = &i
		}
	}
	into := &coordinationv1.Lease{}
	gvk := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	obj, actual, err := info.StrictSerializer.Decode(body, &gvk, into)
	if err != nil || *actual != gvk || obj != into {
		return nil, false
	}
	return into, true
}

// renewalBody is a GET result as the server renders it.
const renewalBody = `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"bench-000001","namespace":"bench","uid":"3f0c1c9e-5d7a-4a3e-9e0e-0c4f2d9b1a77","resourceVersion":"1234","creationTimestamp":"2026-11-21T16:28:05Z","labels":{"app":"x"},"managedFields":[{"manager":"leasehold-bench","operation":"Update","apiVersion":"coordination.k8s.io/v1","time":"2026-11-21T16:28:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:acquireTime":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:leaseTransitions":{},"f:renewTime":{}}}}]},"spec":{"holderIdentity":"loadgen-1","leaseDurationSeconds":15,"acquireTime":"2026-11-21T16:28:05.123456Z","renewTime":"2026-11-21T16:28:06.654321Z","leaseTransitions":0}}`

// FuzzFastDecodeLease checks the renewal decoder against the strict
// serializer: whenever the fast decoder accepts a body, the serializer
// must accept it too, without strict-mode complaints, and decode exactly
// the same object.
func FuzzFastDecodeLease(f *testing.F) {
	for _, s := range []string{
		renewalBody,
		strings.Replace(renewalBody, `"labels":{"app":"x"},`, `"labels":{"app":"x","app":"y"},`, 1),
		strings.Replace(renewalBody, `"leaseTransitions":0`, `"leaseTransitions":1.0`, 1),
		strings.Replace(renewalBody, `"renewTime":"2026-11-21T16:28:06.654321Z"`, `"renewTime":null`, 1),
		strings.Replace(renewalBody, `"time":"2026-11-21T16:28:05Z"`, `"time":null`, 1),
		strings.Replace(renewalBody, `"holderIdentity":"loadgen-1"`, `"holderIdentity":"l\u00e9"`, 1),
		strings.Replace(renewalBody, `"creationTimestamp":"2026-11-21T16:28:05Z"`, `"creationTimestamp":null`, 1),
		strings.Replace(renewalBody, `"kind":"Lease"`, `"Kind":"Lease"`, 1),
		strings.Replace(renewalBody, `"spec":{`, `"spec":{"extra":1,`, 1),
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a","finalizers":[],"annotations":{}},"spec":{}}`,
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease"} x`,
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"generation":-9223372036854775807}}`,
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"acquireTime":"2026-11-21T16:28:05+02:00"}}`,
		"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := DecodeJSON(body)
		if !ok {
			return
		}
		slow, ok := strictDecodeLease(body)
		if !ok {
			t.Fatalf("fast decoder accepted a body the serializer rejects: %q", body)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoders differ on %q\nfast: %#v\nslow: %#v", body, fast, slow)
		}
	})
}

// TestFastDecodeLeaseTakesRenewals guards the point of the fast decoder:
// a renewal body as clients send it must not fall back.
func TestFastDecodeLeaseTakesRenewals(t *testing.T) {
	if _, ok := DecodeJSON([]byte(renewalBody)); !ok {
		t.Fatal("a renewal body fell back to the serializer")
	}
}
