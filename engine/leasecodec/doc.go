// Package leasecodec owns the stored format of coordination.k8s.io/v1
// Leases and their plain JSON renderings, the hot path of leader
// election: it reads the stored protobuf straight into JSON response
// bodies (GET and LIST without decoding into fresh objects), appends a
// decoded Lease, LeaseList or watch event as the JSON serializer would,
// and decodes the JSON bodies clients PUT on renewal.
//
// Every function is all-or-nothing: it returns ok false for anything it
// does not reproduce byte for byte as the k8s.io/apimachinery serializer
// and the generated protobuf code do, and the caller then uses those.
// The tests and fuzzers compare each path with them.
//
// engine calls this package (Engine.GetJSON, Engine.ListJSON,
// engine.EncodeJSON, engine.DecodeJSON); the HTTP layer only chooses when
// a plain JSON response may take these paths.
package leasecodec
