package main

// "leasehold serve --join URL --cluster-token T --replica": an API-only
// replica of an embedded cluster, for devices beyond the five members. The
// join handshake hands it a client certificate of the cluster CA and the
// members' client URLs; it keeps them in <data-dir>/replica and serves on
// the etcd backend against the members, as --storage etcd does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/leasehold/leasehold/datadir"
	"github.com/leasehold/leasehold/storage/cluster"
	clusterclient "github.com/leasehold/leasehold/web/client/cluster"
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

// prepareReplica readies the replica of --replica (or of a data directory
// that holds one) and points cfg.Storage at the members' etcd; it does
// nothing otherwise.
func prepareReplica(ctx context.Context, cfg *serveConfig, log *slog.Logger) error {
	cl := &cfg.Storage.Cluster
	if !cl.Replica {
		return nil
	}
	files := cfg.Layout.Replica()
	st, err := loadReplicaState(files)
	switch {
	case err == nil:
		log.Info("Restarting the replica from its data", "replica", st.Name, "endpoints", strings.Join(st.Endpoints, ","))
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case cl.Join == "":
		return errors.New("--replica needs --join URL (a member's API URL) and --cluster-token the first time")
	default:
		token, err := givenClusterToken(cl)
		if err != nil {
			return err
		}
		if st, err = joinAsReplica(ctx, cl.Join, cl.Name, token, files, log); err != nil {
			return err
		}
	}
	s := &cfg.Storage
	s.Backend = "etcd"
	s.EtcdEndpoints = strings.Join(st.Endpoints, ",")
	s.EtcdPrefix = st.Prefix
	s.EtcdCAFile, s.EtcdCertFile, s.EtcdKeyFile = files.CAFile, files.CertFile, files.KeyFile
	s.EtcdAutoSync = true
	s.EtcdIdentity = st.Name
	return nil
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
	resp, err := joinWithRetry(ctx, joinURL, []byte(token), clusterclient.JoinRequest{Name: name, Replica: true}, log)
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
		{files.CAFile, []byte(resp.CACert), 0o644}, {files.CertFile, []byte(resp.Cert), 0o644}, {files.KeyFile, []byte(resp.Key), 0o600},
	} {
		if err := cluster.WriteFile(f.path, f.data, f.mode); err != nil {
			return st, err
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return st, err
	}
	// The state file is written last: its presence says the replica is
	// complete.
	if err := cluster.WriteFile(files.State, append(data, '\n'), 0o600); err != nil {
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
