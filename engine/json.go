package engine

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine/leasecodec"
)

// Plain JSON without the serializer, for the kinds with their own codec
// (coordination.k8s.io/v1 Lease, engine/leasecodec): the serializer's
// reflection costs a quarter of a renewal's CPU on decode and a tenth on
// encode. Each function answers ok false for anything its codec does not
// reproduce byte for byte, and the caller then uses Codecs. The HTTP layer
// decides only when a response or body is plain application/json (no
// indentation, Table or metadata-only conversion); these decide by kind.
// Engine.GetJSON and Engine.ListJSON do the same from stored values.

// EncodeJSON renders obj, an object or list the engine returned in
// version gv, as the body of a plain application/json response.
func EncodeJSON(obj runtime.Object, gv schema.GroupVersion) ([]byte, bool) {
	if gv != coordinationv1.SchemeGroupVersion {
		return nil, false
	}
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		return leasecodec.JSON(o)
	case *coordinationv1.LeaseList:
		return leasecodec.ListJSON(o)
	}
	return nil, false
}

// AppendWatchEventJSON appends the plain JSON frame of a watch event in
// version gv, as the serializer writes a metav1.WatchEvent around the
// object (with a trailing newline). obj must be an object as the engine's
// watches deliver it.
func AppendWatchEventJSON(b []byte, typ watch.EventType, obj runtime.Object, gv schema.GroupVersion) ([]byte, bool) {
	if gv != coordinationv1.SchemeGroupVersion {
		return nil, false
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		return leasecodec.AppendEventJSON(b, string(typ), l)
	}
	return nil, false
}

// HasJSONCodec reports whether objects of gvk may take EncodeJSON and
// AppendWatchEventJSON, so that a watch stream checks once.
func HasJSONCodec(gvk schema.GroupVersionKind) bool {
	return gvk == leaseV1
}

// DecodeJSON decodes a create or update body of kind gvk sent as
// application/json into a new object, when its codec is certain to produce
// exactly what the strict serializer would, without warnings.
func DecodeJSON(gvk schema.GroupVersionKind, body []byte) (runtime.Object, bool) {
	if gvk != leaseV1 {
		return nil, false
	}
	if l, ok := leasecodec.DecodeJSON(body); ok {
		return l, true
	}
	return nil, false
}

var leaseV1 = coordinationv1.SchemeGroupVersion.WithKind("Lease")
