package buildversion

// The Kubernetes release whose coordination.k8s.io API leasehold implements;
// /version reports it, as kubectl and client-go expect a kube-apiserver to.
const (
	KubeMajor          = "1"
	KubeMinor          = "37"
	KubeMinCompatMinor = "36"
)
