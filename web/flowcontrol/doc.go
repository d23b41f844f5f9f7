// Package flowcontrol is leasehold's API Priority and Fairness, after
// kube-apiserver's (KEP-1040), simplified for one small device: renewals
// first, so that no reader, watcher or noisy client can stall leader
// election.
//
// # Classes
//
// Every request that is not a health check is classified (Classify) into
// one priority level, a Class:
//
//   - leader-election: single-object reads and writes of Leases and
//     LeaseCandidates with small bodies: what client-go's LeaseLock and
//     the coordinated-election candidates send.
//   - list: LIST, WATCH and DELETECOLLECTION of any resource, weighted by
//     the objects they touch.
//   - ui: the built-in web UI.
//   - metrics: /metrics.
//   - admin: /leasehold/ (backup, cluster membership, operator actions).
//   - workload: everything else (other resources, discovery, large-body
//     writes of leases).
//
// Each class owns a fixed number of seats, its share of the server's
// total (--max-requests-inflight), and never lends them: a class can be
// slow only because of its own traffic, so the leader-election class is
// never starved by the others. A request occupies Width seats while it
// is served; a LIST's width grows with the response size remembered from
// the previous LIST of the same collection (Estimator), so that one LIST
// of 10,000 leases takes the class's whole allowance and many small ones
// share it.
//
// # Fair queuing
//
// A request that finds no free seat waits in its class, in the queue of
// its flow: the user, or the remote address for anonymous requests.
// Freed seats go to the flows round-robin, so one client's storm of
// requests delays that client, not its neighbours in the class. A flow
// whose queue is full, a class whose queues together are full, or a
// request that waited longer than the queue wait is rejected with 429
// Too Many Requests, a Retry-After header and a Status body.
//
// # Memory
//
// LIST responses are built in memory before they are written. Bytes
// bounds them: a weighted semaphore on the estimated response size, held
// from before the response is built until it has been written to the
// connection, so the bytes of LIST responses in flight stay within
// --max-list-bytes-inflight however many clients list at once.
//
// # Processors
//
// Seats bound how many requests run, not which goroutine the Go
// scheduler runs next, and it has no priorities: a renewal's write that
// blocked in fsync waits for a free P behind whatever bulk work holds
// them. ReserveProcs (--flowcontrol-spare-procs) runs the server with
// more Ps than CPUs, so that one is free when the write comes back and
// the kernel's scheduler, which favours threads that slept, decides.
//
// # Metrics
//
// WritePrometheus adds, per class, apiserver_flowcontrol_current_executing_seats,
// apiserver_flowcontrol_current_executing_requests,
// apiserver_flowcontrol_current_inqueue_requests,
// apiserver_flowcontrol_nominal_limit_seats,
// apiserver_flowcontrol_dispatched_requests_total and
// apiserver_flowcontrol_rejected_requests_total (label priority_level,
// plus reason for rejections), as kube-apiserver names them, and
// leasehold_flowcontrol_list_bytes_inflight with its budget.
package flowcontrol
