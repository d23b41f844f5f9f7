// Package cluster is the client side of leasehold's embedded etcd
// cluster, over HTTP only: the joiner's half of the join handshake (used by
// "leasehold serve --join") and "leasehold cluster status|members|remove".
package cluster
