package engine

import (
	lhschema "github.com/leasehold/leasehold/engine/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// defaultTypeConverter is the server-side-apply type converter used when
// Options.TypeConverter is nil: the one built from leasehold's OpenAPI
// definitions, as kube-apiserver builds its own from its models.
func defaultTypeConverter() (managedfields.TypeConverter, error) {
	return lhschema.TypeConverter()
}
