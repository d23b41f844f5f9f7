package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// replicaState is replica.json: what a restart needs besides the
// certificates.
type replicaState struct {
	Name string `json:"name"`
	// Endpoints are the members' etcd client URLs when the replica joined;
	// the etcd client then follows the member list by itself.
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
	JoinedVia string   `json:"joinedVia"`
}

// Replica is what an API-only replica (--replica) needs to serve on the
// members' etcd: their client URLs, the key prefix, and the client
// certificate the join handed it.
type Replica struct {
	Name      string
	Endpoints []string
	Prefix    string
	Files     datadir.ReplicaFiles
	// JoinedVia is the member's API URL the replica joined through, which
	// it renews its certificate through (RenewReplica).
	JoinedVia string
}

// PrepareReplica readies the replica of --replica --join, or of a data
// directory that holds one: a first start runs the join handshake as a
// replica and keeps what it returns in files; a restart reads it back.
func PrepareReplica(ctx context.Context, f Flags, files datadir.ReplicaFiles, log *slog.Logger) (Replica, error) {
	st, err := loadReplicaState(files)
	switch {
	case err == nil:
		log.Info("Restarting the replica from its data", "replica", st.Name, "endpoints", strings.Join(st.Endpoints, ","))
		// The token is not stored (a replica admits nobody): a replica
		// whose certificate expired while it was off is given it.
		token, err := f.givenToken()
		if err != nil {
			return Replica{}, err
		}
		if err := renewIfExpired(ctx, KindReplica, st.Name, certFiles{files.CertFile, files.KeyFile, files.CAFile}, []byte(token),
			renewURLs(f.Join, st.JoinedVia), log); err != nil {
			return Replica{}, fmt.Errorf("%w. Otherwise, to bring the replica back: on a member \"leasehold cluster revoke %s\"; "+
				"here, move %s aside and start again with --replica --join URL --cluster-token-file (docs/cluster.md, \"Certificate rotation\")", err, st.Name, files.Dir)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Replica{}, err
	case f.Join == "":
		return Replica{}, errors.New("--replica needs --join URL (a member's API URL) and --cluster-token the first time")
	default:
		token, err := f.givenToken()
		if err != nil {
			return Replica{}, err
		}
		if st, err = joinAsReplica(ctx, f.Join, f.Name, token, files, log); err != nil {
			return Replica{}, err
		}
	}
	return Replica{Name: st.Name, Endpoints: st.Endpoints, Prefix: st.Prefix, Files: files, JoinedVia: st.JoinedVia}, nil
}

// joinAsReplica runs the handshake and stores what it returns. The token
// is not stored: a replica admits nobody, and its certificate is all a
// restart needs.
func joinAsReplica(ctx context.Context, joinURL, name, token string, files datadir.ReplicaFiles, log *slog.Logger) (replicaState, error) {
	if token == "" {
		return replicaState{}, errors.New("--replica --join needs --cluster-token or --cluster-token-file")
	}
	if name == "" {
		host, _ := os.Hostname()
		name = "replica-" + host
	}
	if !memberName.MatchString(name) {
		return replicaState{}, fmt.Errorf("invalid replica name %q (--member-name): use letters, digits, '.', '_' and '-' (at most 63)", name)
	}
	resp, keyPEM, err := joinWithKey(ctx, joinURL, []byte(token), clusterapi.JoinRequest{Name: name, Replica: true}, log)
	if err != nil {
		return replicaState{}, err
	}
	if len(resp.ClientURLs) == 0 || resp.Cert == "" || resp.CACert == "" {
		return replicaState{}, fmt.Errorf("join %s as a replica: the member's answer lacks certificates or client URLs (is it an older leasehold?)", joinURL)
	}
	prefix := resp.EtcdPrefix
	if prefix == "" {
		prefix = "/leasehold"
	}
	st := replicaState{Name: name, Endpoints: resp.ClientURLs, Prefix: prefix, JoinedVia: joinURL}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{files.CAFile, []byte(resp.CACert), 0o644}, {files.CertFile, []byte(resp.Cert), 0o644}, {files.KeyFile, keyPEM, 0o600},
	} {
		if err := WriteFile(f.path, f.data, f.mode); err != nil {
			return st, err
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return st, err
	}
	// The state file is written last: its presence says the replica is
	// complete.
	if err := WriteFile(files.State, append(data, '\n'), 0o600); err != nil {
		return st, err
	}
	log.Info("Joined the cluster as a replica", "replica", name, "via", joinURL, "endpoints", strings.Join(st.Endpoints, ","))
	return st, nil
}

func loadReplicaState(files datadir.ReplicaFiles) (replicaState, error) {
	var st replicaState
	data, err := os.ReadFile(files.State)
	if err != nil {
		return st, fmt.Errorf("replica state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("replica state %s: %w", files.State, err)
	}
	if len(st.Endpoints) == 0 || st.Prefix == "" {
		return st, fmt.Errorf("replica state %s: endpoints or prefix missing", files.State)
	}
	return st, nil
}
