// Package kubeconfig renders and writes the kubeconfig files leasehold
// hands out: the one "leasehold serve" writes for local clients and the
// one "leasehold kubeconfig" prints for remote ones.
//
// It is a leaf shared by both ends of web/: the server (web/security)
// renders the kubeconfig it writes, and the client commands (web/client/...)
// render the ones they print, yet neither end imports the other. It
// therefore imports only the standard library and sigs.k8s.io/yaml.
package kubeconfig
