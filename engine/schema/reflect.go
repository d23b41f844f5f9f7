package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// definitionBuilder turns Go API types into kube-openapi definitions the way
// openapi-gen does from source, but from reflection: json tags give names,
// omitempty gives optionality and enforced defaults, SwaggerDoc() gives the
// descriptions, and named struct types become $refs to their own definition.
type definitionBuilder struct {
	ref  common.ReferenceCallback
	defs map[string]common.OpenAPIDefinition
	err  error
}

var (
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	modelNamer      = reflect.TypeOf((*util.OpenAPIModelNamer)(nil)).Elem()
	swaggerDoccer   = reflect.TypeOf((*interface{ SwaggerDoc() map[string]string })(nil)).Elem()
	schemaTyper     = reflect.TypeOf((*interface {
		OpenAPISchemaType() []string
		OpenAPISchemaFormat() string
	})(nil)).Elem()
)

// modelName is the OpenAPI definition name of a named Go type: the
// OpenAPIModelName() the k8s.io types carry, or, failing that, the package
// path in REST-friendly form (k8s.io/x/y.T -> io.k8s.x.y.T) as upstream does.
func modelName(t reflect.Type) string {
	if reflect.PointerTo(t).Implements(modelNamer) {
		return reflect.New(t).Interface().(util.OpenAPIModelNamer).OpenAPIModelName()
	}
	return util.ToRESTFriendlyName(t.PkgPath() + "." + t.Name())
}

// docsOf returns the SwaggerDoc() of t, or the fallback table for the few
// types whose package has no generated swagger docs.
func docsOf(t reflect.Type) map[string]string {
	if reflect.PointerTo(t).Implements(swaggerDoccer) {
		return reflect.New(t).Interface().(interface{ SwaggerDoc() map[string]string }).SwaggerDoc()
	}
	return fallbackDocs[modelName(t)]
}

// addType makes sure t (a named struct) and everything it references have a
// definition, and returns t's definition name.
func (b *definitionBuilder) addType(t reflect.Type) string {
	name := modelName(t)
	if _, done := b.defs[name]; done {
		return name
	}
	// Reserve the name first so that recursive types terminate.
	b.defs[name] = common.OpenAPIDefinition{}
	def := common.OpenAPIDefinition{}
	docs := docsOf(t)
	def.Schema.Description = docs[""]
	if reflect.PointerTo(t).Implements(schemaTyper) {
		// Types with custom JSON (Time, MicroTime) describe themselves.
		v := reflect.New(t).Interface().(interface {
			OpenAPISchemaType() []string
			OpenAPISchemaFormat() string
		})
		def.Schema.Type = v.OpenAPISchemaType()
		def.Schema.Format = v.OpenAPISchemaFormat()
	} else {
		def.Schema.Type = []string{"object"}
		deps := map[string]bool{}
		b.addMembers(t, name, &def.Schema, deps)
		for d := range deps {
			def.Dependencies = append(def.Dependencies, d)
		}
		sort.Strings(def.Dependencies) // map order must not leak into builds
	}
	if ext := typeExtensions[name]; len(ext) > 0 {
		def.Schema.Extensions = cloneExtensions(ext)
	}
	b.defs[name] = def
	return name
}

// addMembers adds the json-visible fields of struct t to s, inlining
// embedded structs with an empty json name (TypeMeta, ListMeta-less inlines).
func (b *definitionBuilder) addMembers(t reflect.Type, owner string, s *spec.Schema, deps map[string]bool) {
	docs := docsOf(t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if f.Anonymous && hasTag && (tag == "" || strings.HasPrefix(tag, ",")) {
			b.addMembers(f.Type, owner, s, deps)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
		optional := omitEmpty
		if o, ok := optionalOverrides[owner+"."+name]; ok {
			optional = o
		}
		if !optional {
			s.Required = append(s.Required, name)
		}
		prop := b.property(f, omitEmpty, deps)
		prop.Description = docs[name]
		if ext := memberExtensions(owner, name, f); len(ext) > 0 {
			prop.Extensions = ext
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = prop
	}
}

// property is openapi-gen's generateProperty: the default a non-pointer,
// non-omitempty field must have, then a simple type, map, array or $ref.
func (b *definitionBuilder) property(f reflect.StructField, omitEmpty bool, deps map[string]bool) spec.Schema {
	var s spec.Schema
	if _, opts, _ := strings.Cut(f.Tag.Get("json"), ","); strings.Contains(","+opts+",", ",string,") {
		s.Type = []string{"string"}
		return s
	}
	s.Default = enforcedDefault(f.Type, omitEmpty)
	b.typeInto(f.Type, &s, deps)
	return s
}

// typeInto fills in the type of a value of Go type t.
func (b *definitionBuilder) typeInto(t reflect.Type, s *spec.Schema, deps map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if typ, format, ok := simpleType(t); ok {
		s.Type = []string{typ}
		s.Format = format
		return
	}
	switch t.Kind() {
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			b.fail(fmt.Errorf("map %v: only string keys are representable", t))
			return
		}
		item := spec.Schema{}
		b.typeInto(t.Elem(), &item, deps)
		s.Type = []string{"object"}
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &item}
	case reflect.Slice, reflect.Array:
		item := spec.Schema{}
		b.typeInto(t.Elem(), &item, deps)
		s.Type = []string{"array"}
		s.Items = &spec.SchemaOrArray{Schema: &item}
	case reflect.Struct:
		name := b.addType(t)
		deps[name] = true
		s.Ref = b.ref(name)
	case reflect.Interface:
		// openapi-gen emits nothing for interfaces.
	default:
		b.fail(fmt.Errorf("type %v has no OpenAPI representation", t))
	}
}

func (b *definitionBuilder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// simpleType maps builtin kinds (and named types over them, such as
// CoordinatedLeaseStrategy or types.UID) to OpenAPI type and format, with
// openapi-gen's table ([]byte is base64 "byte").
func simpleType(t reflect.Type) (typ, format string, ok bool) {
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		return "string", "byte", true
	}
	switch t.Kind() {
	case reflect.String:
		return "string", "", true
	case reflect.Bool:
		return "boolean", "", true
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint16:
		return "integer", "int32", true
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer", "int64", true
	case reflect.Int8, reflect.Uint8:
		return "integer", "byte", true
	case reflect.Float32:
		return "number", "float", true
	case reflect.Float64:
		return "number", "double", true
	}
	return "", "", false
}

// enforcedDefault is openapi-gen's mustEnforceDefault: a value field that is
// always serialized gets its zero value as default ({} for structs), except
// types with custom unmarshalling (their zero value is null).
func enforcedDefault(t reflect.Type, omitEmpty bool) interface{} {
	if t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	case reflect.Struct:
		return map[string]interface{}{}
	}
	if omitEmpty {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	default:
		if _, _, ok := simpleType(t); ok {
			return 0
		}
	}
	return nil
}

// derefType is the struct type of a sample (&T{} -> T).
func derefType(sample interface{}) reflect.Type {
	t := reflect.TypeOf(sample)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
