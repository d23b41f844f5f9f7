package backend

import "log/slog"

// LogJoinHint tells once, when store is a cluster member whose start
// generated the cluster token, how another device joins the new cluster
// at serverURL. As kubeadm and k3s do, the new cluster says how to join
// it once; unlike them, by the token's file, never the token (logs
// travel). Other stores log nothing.
func LogJoinHint(store Store, serverURL string, log *slog.Logger) {
	ms, ok := store.(*MemberStore)
	if !ok || ms.Membership().GeneratedToken() == "" {
		return
	}
	log.Info("A new cluster with a generated token: copy the token file to each device that joins, then run there the command",
		"token_file", ms.Membership().GeneratedToken(),
		"command", "leasehold serve --join "+serverURL+" --cluster-token-file COPY_OF_TOKEN_FILE --data-dir DIR --peer-listen HOST:PORT")
}

// AnnounceAPI records, on a member, the URL it serves the API at in the
// cluster's record, where the other members keep it: a member whose
// certificate expired while it was off renews it there before it starts
// (storage/cluster's apiurls.go). Other storage ignores it.
func AnnounceAPI(store Store, serverURL string) {
	if ms, ok := store.(*MemberStore); ok {
		ms.Membership().AnnounceAPI(serverURL)
	}
}
