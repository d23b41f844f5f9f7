package leasecodec

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// testCodecs are the serializers the codec must match, built as
// engine.Codecs is (engine imports this package, so its tests cannot
// import engine): strict, over coordination.k8s.io/v1 and the meta types.
// engine's TestGetJSON and TestListJSON compare against engine.Codecs
// itself.
var testCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()
