// Package apiserver serves kube-apiserver's REST surface for the resources
// engine.API reports: resource routing (namespaced, all-namespace and the
// deprecated /watch/ paths), content negotiation (JSON, YAML, protobuf,
// Table, PartialObjectMetadata), request decoding and field validation,
// Status errors, watch streaming, legacy and aggregated discovery and the
// OpenAPI documents.
//
// The behaviour follows k8s.io/apiserver's handlers (endpoints/handlers,
// negotiation, responsewriters, discovery) closely enough that client-go
// and kubectl cannot tell the difference; the upstream file each piece
// mirrors is named in its comments. The package speaks fasthttp and calls
// only engine.API, engine.Codecs/ParameterCodec, the engine's plain JSON
// codecs (EncodeJSON, DecodeJSON, AppendWatchEventJSON) and engine/schema.
//
// The engine owns every check on what a request carries (options, names,
// objects) and the stored format: this package decodes, negotiates the
// content type, and maps errors to Statuses. Verb handlers return their
// error and serveResource writes it, in one place.
package apiserver
