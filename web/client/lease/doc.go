// Package lease is a small client for leasehold's (and
// kube-apiserver's) coordination.k8s.io API over net/http and JSON: get,
// create, update and watch one Lease (v1) or LeaseCandidate (v1beta1).
//
// It exists so that command-line tools ("leasehold run", "leasehold
// leader") need neither client-go nor the server's internals: it imports
// only the standard library, k8s.io/api and k8s.io/apimachinery types, and
// sigs.k8s.io/yaml for the kubeconfig basics (server, bearer token, CA and
// client certificates, insecure-skip-tls-verify) that LoadKubeconfig reads.
//
// Errors from the server are *StatusError values carrying the decoded
// metav1.Status; IsNotFound, IsConflict and IsAlreadyExists classify them
// the way client-go's apierrors helpers do.
package lease
