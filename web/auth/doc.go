// Package auth is leasehold's authentication and authorization, shaped
// like kube-apiserver's so that the files and flags operators already
// have work unchanged:
//
//   - Token authentication from a --token-auth-file in kube-apiserver's
//     static token CSV format (token,user,uid,"group1,group2"), compared in
//     constant time.
//   - x509 client certificates verified against a --client-ca-file: the
//     user is the subject's CommonName, the groups its Organizations.
//   - Authorization from an --authorization-policy-file in kube-apiserver's
//     ABAC format (one abac.authorization.kubernetes.io/v1beta1 Policy per
//     line), with the same matching rules.
//   - RequestInfo: kube-apiserver's reading of a request path and method as
//     verb, API group, resource, namespace and name, which authorization,
//     the access log and the metrics share.
//   - The 401 and 403 Status errors with kube-apiserver's exact messages.
//
// The package knows nothing of storage or the engine; the web server calls
// it from its middleware.
package auth
