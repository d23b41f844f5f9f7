package backend

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/pki"
)

// Mode is which storage a server runs, resolved once from the flags and
// the data directory (Resolve) before anything starts.
type Mode int

const (
	// SingleDevice is one bbolt file in the data directory.
	SingleDevice Mode = iota + 1
	// ExternalEtcd is an etcd cluster that several servers share
	// (--storage etcd).
	ExternalEtcd
	// Member runs an embedded etcd member of a leasehold cluster
	// (--cluster-init, --join, or a data directory that holds a member).
	Member
	// Replica serves only the API, on the members' etcd (--replica, or a
	// data directory that holds a replica).
	Replica
)

func (m Mode) String() string {
	switch m {
	case SingleDevice:
		return "single device"
	case ExternalEtcd:
		return "external etcd"
	case Member:
		return "cluster member"
	case Replica:
		return "cluster replica"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Shared reports whether several servers share the storage, so that a
// server's election controller runs only while the store elects it.
func (m Mode) Shared() bool { return m != SingleDevice }

// Resolve checks the flags against the data directory dir and says which
// storage runs. It reads dir but writes nothing: a directory that holds a
// cluster member restarts it whatever the flags say (serving a fresh bbolt
// database from it would split the device off its cluster without a
// word), and one that holds a replica restarts as one.
func (c *Config) Resolve(dir datadir.Layout) (Mode, error) {
	if err := c.Snapshots.Validate(); err != nil {
		return 0, err
	}
	cl := &c.Cluster
	holdsMember := exists(dir.Member().State)
	replica := cl.Replica || exists(dir.Replica().State)
	member := !replica && (cl.Init || cl.Join != "" || holdsMember)
	if exists(dir.Member().RestoreSnapshot) && !member {
		return 0, fmt.Errorf("%s holds a cluster snapshot staged by leasehold restore: start the restored cluster with --cluster-init (and the member flags), or remove it", dir.Dir)
	}
	switch {
	case replica:
		return Replica, c.validateReplica(holdsMember)
	case member:
		return Member, c.validateMember()
	}
	switch c.Backend {
	case "bbolt":
		return SingleDevice, nil
	case "etcd":
		if len(splitList(c.EtcdEndpoints)) == 0 {
			return 0, errors.New("--storage etcd needs --etcd-endpoints")
		}
		if c.EtcdDialTimeout <= 0 {
			return 0, fmt.Errorf("invalid --etcd-dial-timeout %s: must be positive", c.EtcdDialTimeout)
		}
		return ExternalEtcd, nil
	}
	return 0, fmt.Errorf("invalid --storage %q: use bbolt or etcd", c.Backend)
}

func (c *Config) validateReplica(holdsMember bool) error {
	cl := &c.Cluster
	switch {
	case cl.Init:
		return errors.New("--replica joins an existing cluster: use it with --join, not --cluster-init")
	case holdsMember:
		return errors.New("--replica: the data directory holds a cluster member; a member cannot become a replica (use another --data-dir)")
	case c.Backend != "bbolt":
		return fmt.Errorf("--storage %s cannot be combined with --replica (the cluster's etcd is the storage)", c.Backend)
	case cl.Token != "" && cl.TokenFile != "":
		return errors.New("give --cluster-token or --cluster-token-file, not both")
	}
	if c.EtcdDialTimeout <= 0 {
		return fmt.Errorf("invalid --etcd-dial-timeout %s: must be positive", c.EtcdDialTimeout)
	}
	if cl.RequestTimeout <= 0 {
		return fmt.Errorf("invalid --cluster-request-timeout %s: must be positive", cl.RequestTimeout)
	}
	return nil
}

func (c *Config) validateMember() error {
	cl := &c.Cluster
	if cl.Init && cl.Join != "" {
		return errors.New("--cluster-init and --join exclude each other: a cluster starts once, then members join it")
	}
	if c.Backend != "bbolt" {
		return fmt.Errorf("--storage %s cannot be combined with --cluster-init, --join, or a data directory that holds a cluster member (the embedded etcd member is the storage)", c.Backend)
	}
	if cl.Token != "" && cl.TokenFile != "" {
		return errors.New("give --cluster-token or --cluster-token-file, not both")
	}
	if _, _, err := net.SplitHostPort(cl.PeerListen); err != nil {
		return fmt.Errorf("invalid --peer-listen %q: %w", cl.PeerListen, err)
	}
	if cl.ClientListen != "" {
		if _, _, err := net.SplitHostPort(cl.ClientListen); err != nil {
			return fmt.Errorf("invalid --cluster-client-listen %q: %w", cl.ClientListen, err)
		}
	}
	if cl.RequestTimeout <= 0 {
		return fmt.Errorf("invalid --cluster-request-timeout %s: must be positive", cl.RequestTimeout)
	}
	if cl.CertValidity < pki.MinCertValidity {
		return fmt.Errorf("invalid --cluster-cert-validity %s: must be at least %s", cl.CertValidity, pki.MinCertValidity)
	}
	if cl.StaleLearnerAfter <= 0 {
		return fmt.Errorf("invalid --cluster-stale-learner-after %s: must be positive", cl.StaleLearnerAfter)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
