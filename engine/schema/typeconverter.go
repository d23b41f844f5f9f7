package schema

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/managedfields"
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
