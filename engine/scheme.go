package engine

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Scheme knows every type leasehold reads or writes: the coordination.k8s.io
// versions it serves, core/v1 (Namespace, Event) and events.k8s.io/v1, the self reviews of authentication.k8s.io and
// authorization.k8s.io (computed per request, never stored), plus
// meta.k8s.io's Status, options, Table and PartialObjectMetadata.
var Scheme = runtime.NewScheme()

// Codecs are the serializers (JSON, YAML, protobuf) for Scheme.
var Codecs serializer.CodecFactory

// ParameterCodec decodes query parameters into option structs
// (ListOptions, GetOptions, ...), with upstream's conversions.
var ParameterCodec runtime.ParameterCodec

func init() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(coordinationv1.AddToScheme(Scheme))
	must(coordinationv1beta1.AddToScheme(Scheme))
	must(coordinationv1alpha2.AddToScheme(Scheme))
	must(corev1.AddToScheme(Scheme))
	must(eventsv1.AddToScheme(Scheme))
	must(authenticationv1.AddToScheme(Scheme))
	must(authorizationv1.AddToScheme(Scheme))
	must(metav1beta1.AddMetaToScheme(Scheme))
	// Status, options and WatchEvent in group "" version v1, as kube-apiserver
	// registers them for every API group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	must(metav1.AddMetaToScheme(Scheme))
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
	ParameterCodec = runtime.NewParameterCodec(Scheme)
}
