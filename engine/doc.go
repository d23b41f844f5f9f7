// Package engine holds leasehold's Kubernetes semantics: the served
// resources (Lease, LeaseCandidate, Namespace, Event in core/v1 and
// events.k8s.io/v1), object metadata handling, validation,
// resourceVersion and preconditions, patches and server-side apply,
// managedFields, label and field selectors, pagination, watches with
// bookmarks, and Table conversion.
//
// The engine speaks Go objects from k8s.io/api and errors from
// k8s.io/apimachinery (*errors.StatusError); it knows nothing of HTTP,
// bbolt or wazero. Objects are persisted through the storage.Interface
// contract as protobuf in their storage version, under keys shaped like
// kube-apiserver's (/registry/<group>/<resource>/<namespace>/<name>).
// engine/leasecodec reads the stored Leases straight into plain JSON
// response bodies (Engine.GetJSON, Engine.ListJSON) and encodes and
// decodes decoded Leases as the JSON serializer would (EncodeJSON,
// DecodeJSON, AppendWatchEventJSON), for the renewal path.
package engine

// Deliberate differences from kube-apiserver, because leasehold serves
// only coordination.k8s.io and what clients of it need (namespaces.go,
// events.go, eventstore.go):
//
//   - With NamespacesImplicit (serve's default), a write into a missing
//     namespace creates it where kube-apiserver answers 404
//     `namespaces "x" not found`; NamespacesStrict answers the 404. The
//     engine plays kube-controller-manager's namespace controller itself:
//     a deleted namespace is Terminating while its leases, candidates and
//     events are deleted, then goes. The status (get, update, patch) and
//     finalize (update) subresources are served through their own
//     strategies and field managers, as upstream's.
//   - Events expire EventTTL after they were last seen (lastTimestamp,
//     series), not after their last write, and beyond EventMaxCount or
//     EventMaxBytes the oldest are deleted.
//   - There is no garbage collector. A delete with propagationPolicy
//     Orphan or Foreground stores the object with deletionTimestamp and the
//     orphan/foregroundDeletion finalizer (watchers see MODIFIED, the
//     client gets that object, as upstream), then the engine removes those
//     finalizers itself, as kube-controller-manager would moments later,
//     which deletes the object when no other finalizer remains.
//   - The etcd key in the text of a PUT uid-precondition conflict is
//     upstream's (/registry/leases/...), not leasehold's storage key.
