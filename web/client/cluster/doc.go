// Package cluster is "leasehold cluster status|members|remove", the
// operator's client of an embedded etcd cluster, over HTTP only. The wire
// types it reads are storage/cluster/clusterapi's, the one definition the
// answering member writes with; the joiner's half of the join handshake
// lives with the member's, in storage/cluster.
package cluster
