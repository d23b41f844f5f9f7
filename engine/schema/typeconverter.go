package schema

import (
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

var (
	converterOnce sync.Once
	converter     managedfields.TypeConverter
	converterErr  error
)

// TypeConverter returns the server-side apply / managedFields type converter
// for every served kind, built once from Definitions() as kube-apiserver
// builds its own from its OpenAPI models (unknown fields not preserved).
func TypeConverter() (managedfields.TypeConverter, error) {
	converterOnce.Do(func() {
		converter, converterErr = managedfields.NewTypeConverter(Definitions(), false)
		if converterErr != nil {
			converterErr = fmt.Errorf("building type converter: %w", converterErr)
		}
	})
	return converter, converterErr
}

var (
	reviewConverterOnce sync.Once
	reviewConverter     managedfields.TypeConverter
	reviewConverterErr  error
)

// ReviewTypeConverter is the managedFields type converter of
// authorization.k8s.io/v1 SelfSubjectAccessReview: kube-apiserver's create
// handler runs the field manager on reviews too, and the review it echoes
// carries the managedFields. It stays out of Definitions, so the OpenAPI
// documents are unchanged.
func ReviewTypeConverter() (managedfields.TypeConverter, error) {
	reviewConverterOnce.Do(func() {
		sample := &authorizationv1.SelfSubjectAccessReview{}
		b := &definitionBuilder{ref: refTo("#/components/schemas/"), defs: map[string]common.OpenAPIDefinition{}}
		b.addType(derefType(sample))
		if b.err != nil {
			reviewConverterErr = fmt.Errorf("review definitions: %w", b.err)
			return
		}
		name := util.GetCanonicalTypeName(sample)
		cfg := &common.OpenAPIV3Config{
			Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: Version}},
			Definitions: b.defs,
			GetDefinitionName: func(n string) (string, spec.Extensions) {
				if n == name {
					return n, spec.Extensions{"x-kubernetes-group-version-kind": []interface{}{
						gvk(authorizationv1.GroupName, "v1", "SelfSubjectAccessReview")}}
				}
				return n, nil
			},
		}
		defs, err := builder3.BuildOpenAPIDefinitionsForResources(cfg, name)
		if err != nil {
			reviewConverterErr = fmt.Errorf("review definitions: %w", err)
			return
		}
		if reviewConverter, err = managedfields.NewTypeConverter(defs, false); err != nil {
			reviewConverterErr = fmt.Errorf("building review type converter: %w", err)
		}
	})
	return reviewConverter, reviewConverterErr
}
