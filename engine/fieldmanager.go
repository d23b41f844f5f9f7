package engine

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// newFieldManagers builds one managedfields.FieldManager per served
// version of k, with the storage version as the hub. This is the same
// stack kube-apiserver wires into every write handler (version check,
// last-applied handling, skip-non-applied, cap of 10 update managers,
// manager info, strip-meta, structured merge).
func newFieldManagers(k *kind, tc managedfields.TypeConverter) error {
	k.fieldManagers = map[string]*managedfields.FieldManager{}
	for _, v := range k.res.Versions {
		fm, err := managedfields.NewDefaultFieldManager(tc, versionConvertor{}, Scheme, Scheme, k.gvk(v.Version), k.storageGV, k.subresource, k.resetFields)
		if err != nil {
			return fmt.Errorf("field manager for %s: %w", k.gvk(v.Version), err)
		}
		k.fieldManagers[v.Version] = fm
	}
	for _, sub := range k.subresources {
		if err := newFieldManagers(sub, tc); err != nil {
			return err
		}
	}
	return nil
}

// managerOrUserAgent is kube-apiserver's default field manager: the
// fieldManager option, else the User-Agent up to its first "/", printable
// characters only, at most 128 bytes.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	m, _, _ := strings.Cut(userAgent, "/")
	var buf bytes.Buffer
	for _, r := range m {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	return buf.String()
}

// versionConvertor is the runtime.ObjectConvertor the field manager uses
// to move objects between served versions and the storage (hub) version.
// k8s.io/api registers no conversions between v1alpha2 and v1beta1
// LeaseCandidate (upstream converts through internal types that live in
// k8s.io/kubernetes), so the engine converts itself.
type versionConvertor struct{}

func (versionConvertor) Convert(in, out, _ interface{}) error {
	return fmt.Errorf("conversion from %T to %T is not supported", in, out)
}

func (versionConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
}

func (versionConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		typed, err := Scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, fmt.Errorf("converting %s from unstructured: %w", gvk, err)
		}
		typed.GetObjectKind().SetGroupVersionKind(gvk)
		in = typed
	}
	kinds, _, err := Scheme.ObjectKinds(in)
	if err != nil {
		return nil, err
	}
	from := kinds[0]
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if gv, isGV := target.(schema.GroupVersion); !ok && isGV {
		// Event moves between groups (core/v1, events.k8s.io/v1).
		to, ok = gv.WithKind(from.Kind), true
	}
	if !ok {
		return nil, runtime.NewNotRegisteredErrForTarget(Scheme.Name(), reflect.TypeOf(in), target)
	}
	if to == from {
		in.GetObjectKind().SetGroupVersionKind(from)
		return in, nil
	}
	switch c := in.(type) {
	case *corev1.Event:
		if to.Group == eventsv1.GroupName {
			return coreToEventsV1(c), nil
		}
	case *eventsv1.Event:
		if to.Group == corev1.GroupName {
			return eventsV1ToCore(c), nil
		}
	case *coordinationv1alpha2.LeaseCandidate:
		if to.Version == "v1beta1" {
			return candidateToV1beta1(c), nil
		}
	case *coordinationv1beta1.LeaseCandidate:
		if to.Version == "v1alpha2" {
			return candidateToV1alpha2(c), nil
		}
	}
	return nil, runtime.NewNotRegisteredErrForTarget(Scheme.Name(), reflect.TypeOf(in), target)
}
