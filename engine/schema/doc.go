// Package schema generates the OpenAPI documents leasehold serves and the
// server-side-apply type converter built from them.
//
// Nothing here is a captured copy of kube-apiserver output. The component
// schemas are produced by reflection over the k8s.io/api and
// k8s.io/apimachinery Go types (json tags, SwaggerDoc() descriptions),
// following the rules of kube-openapi's openapi-gen (required from
// omitempty, enforced zero defaults, refs for named structs), plus a small
// table of what openapi-gen reads from comment markers (+listType,
// +structType, ...), which reflection cannot see. The paths and operations
// are described as kube-openapi common.Route values shaped like the ones
// the apiserver's endpoint installer registers, and kube-openapi's own
// builders (builder3 for v3, builder for v2) turn them into documents, so
// parameter hoisting and sorting, $ref wrapping and serialization are
// upstream's.
//
// Everything is computed once (sync.Once) and then served from memory.
package schema
