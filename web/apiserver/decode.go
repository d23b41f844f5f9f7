package apiserver

import (
	"encoding/hex"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/leasehold/leasehold/engine"
)

// decodeBody decodes a create or update body into the scope's versioned
// type (handlers.createHandler / UpdateResource): a missing apiVersion or
// kind defaults to the endpoint's, unknown and duplicate fields are
// warnings (Warn, the default), errors (Strict) or ignored (Ignore).
func (r *request) decodeBody(info *runtime.SerializerInfo, body []byte, fieldValidation string) (runtime.Object, error) {
	gvk := r.scope.GroupVersionKind()
	if info.MediaType == "application/json" {
		if obj, ok := engine.DecodeJSON(gvk, body); ok {
			return obj, nil // the renewal path; same result as below
		}
	}
	into, err := engine.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("creating %v: %w", gvk, err)
	}
	var dec runtime.Decoder = info.StrictSerializer
	if fieldValidation == metav1.FieldValidationIgnore || dec == nil {
		// engine.Codecs are strict throughout; Ignore needs the lenient
		// decoder of the same media type.
		dec = lenientDecoder(info.MediaType)
	}
	obj, actual, err := dec.Decode(body, &gvk, into)
	if err != nil {
		if strict, ok := runtime.AsStrictDecodingError(err); ok && obj != nil && fieldValidation != metav1.FieldValidationStrict {
			for _, e := range strict.Errors() {
				for _, w := range parseYAMLWarnings(e.Error()) {
					r.warnings.Add(w)
				}
			}
		} else {
			return nil, decodeError(err, gvk.Kind, actual, body)
		}
	}
	if obj != into && (actual.Kind != gvk.Kind || internalPackage(actual.Group) != internalPackage(gvk.Group)) {
		// A registered kind other than the endpoint's: upstream decodes
		// into the internal type and fails to convert to it. This comes
		// before the version check, which only a convertible kind reaches.
		return nil, decodeError(fmt.Errorf("converting (%s) to (%s.%s): unknown conversion", typeName(obj), internalPackage(gvk.Group), gvk.Kind), gvk.Kind, actual, body)
	}
	if actual.GroupVersion() != gvk.GroupVersion() {
		return nil, badRequestf("the API version in the data (%s) does not match the expected API version (%s)",
			actual.GroupVersion().String(), gvk.GroupVersion().String())
	}
	if obj != into {
		return nil, decodeError(fmt.Errorf("converting (%s) to (%s.%s): unknown conversion", typeName(obj), internalPackage(gvk.Group), gvk.Kind), gvk.Kind, actual, body)
	}
	return obj, nil
}

// lenientCodecs decode without strict field checks (fieldValidation=Ignore).
var lenientCodecs = serializer.NewCodecFactory(engine.Scheme)

func lenientDecoder(mediaType string) runtime.Decoder {
	for _, i := range lenientCodecs.SupportedMediaTypes() {
		if i.MediaType == mediaType {
			return i.Serializer
		}
	}
	return lenientCodecs.UniversalDeserializer()
}

// internalPackage is the name of the Go package of upstream's internal
// types for an API group (k8s.io/kubernetes/pkg/apis/<name>), which
// conversion errors print: events.k8s.io Events are core's.
func internalPackage(group string) string {
	switch group {
	case "", "events.k8s.io":
		return "core"
	}
	name, _, _ := strings.Cut(group, ".")
	return name
}

// typeName prints a type like conversion errors do ("v1.Lease").
func typeName(obj runtime.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
}

// Prefixes of YAML strict errors, split into one warning per line
// (handlers.parseYAMLWarnings).
const (
	yamlShortPrefix = "yaml: unmarshal errors:\n"
	yamlLongPrefix  = "error converting YAML to JSON: yaml: unmarshal errors:\n"
)

func parseYAMLWarnings(s string) []string {
	var rest string
	switch {
	case strings.HasPrefix(s, yamlShortPrefix):
		rest = s[len(yamlShortPrefix):]
	case strings.HasPrefix(s, yamlLongPrefix):
		rest = s[len(yamlLongPrefix):]
	default:
		return []string{s}
	}
	out := strings.Split(rest, "\n")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// decodeError is handlers.transformDecodeError: a 400 naming what the body
// claimed to be, or a summary of the body when it claimed nothing.
func decodeError(err error, kind string, actual *schema.GroupVersionKind, body []byte) error {
	msg := strings.ReplaceAll(err.Error(), engineSchemeName, upstreamSchemeName)
	if actual != nil && actual.Kind != "" {
		return badRequestf("%s in version %q cannot be handled as a %s: %s", actual.Kind, actual.Version, kind, msg)
	}
	return badRequestf("the object provided is unrecognized (must be of type %s): %s (%s)", kind, msg, summarizeData(body, 30))
}

// The scheme name appears in "no kind is registered" errors; upstream's is
// the legacy scheme's.
var (
	engineSchemeName   = fmt.Sprintf("in scheme %q", engine.Scheme.Name())
	upstreamSchemeName = `in scheme "pkg/api/legacyscheme/scheme.go:30"`
)

func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// deleteScheme knows the DeleteOptions kinds a DELETE body may carry.
// Like upstream's metainternalversion scheme it accepts meta.k8s.io/v1
// and v1, plus the per-group DeleteOptions older clients send.
var deleteScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for gvk := range engine.Scheme.AllKnownTypes() {
		if gvk.Kind == "DeleteOptions" && gvk.Version != runtime.APIVersionInternal {
			s.AddKnownTypeWithName(gvk, &metav1.DeleteOptions{})
		}
	}
	return s
}()

// deleteCodecs decode DeleteOptions bodies.
var deleteCodecs = serializer.NewCodecFactory(deleteScheme)

// The scheme name in a DELETE body's "no kind is registered" error:
// upstream's is metainternalversion's, as a -trimpath build names it.
var (
	deleteSchemeName         = fmt.Sprintf("in scheme %q", deleteScheme.Name())
	upstreamDeleteSchemeName = `in scheme "pkg/apis/meta/internalversion/scheme/register.go:27"`
)

// decodeDeleteOptions decodes a DELETE body. A body that does not decode
// is a 400 with the decoder's text, as handlers.DeleteResource answers.
func decodeDeleteOptions(info *runtime.SerializerInfo, body []byte, into *metav1.DeleteOptions) error {
	var dec runtime.Decoder
	for _, i := range deleteCodecs.SupportedMediaTypes() {
		if i.MediaType == info.MediaType {
			dec = i.Serializer
		}
	}
	if dec == nil {
		return plainInternal(fmt.Errorf("no decoder for %s", info.MediaType))
	}
	def := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
	obj, _, err := dec.Decode(body, &def, into)
	if err != nil {
		return badRequestf("%s", strings.ReplaceAll(err.Error(), deleteSchemeName, upstreamDeleteSchemeName))
	}
	if obj != into {
		return badRequestf("decoded object cannot be converted to DeleteOptions")
	}
	return nil
}
