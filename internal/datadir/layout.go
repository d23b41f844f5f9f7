package datadir

import (
	"path/filepath"
	"time"
)

// Default is --data-dir's default, relative to the working directory.
const Default = "leasehold-data"

// Layout names the files of one data directory. Its zero value is not
// useful: use At, Open or Inspect.
type Layout struct {
	// Dir is the data directory itself.
	Dir string
}

// At is the layout of dir, without reading or writing anything.
func At(dir string) Layout { return Layout{Dir: dir} }

// VersionFile holds the directory's format version.
func (l Layout) VersionFile() string { return filepath.Join(l.Dir, "layout-version") }

// Database is the single-device bbolt database.
func (l Layout) Database() string { return filepath.Join(l.Dir, "leasehold.db") }

// DatabaseImported is where --cluster-init keeps the single-device
// database once its records are imported into the new cluster.
func (l Layout) DatabaseImported() string { return l.Database() + ".pre-cluster" }

// Kubeconfig is the kubeconfig the server writes for local clients
// (--write-kubeconfig's default).
func (l Layout) Kubeconfig() string { return filepath.Join(l.Dir, "kubeconfig") }

// TLS is the directory of the --tls-auto CA and serving certificate.
func (l Layout) TLS() string { return filepath.Join(l.Dir, "pki") }

// TLSCA is the --tls-auto CA certificate, which verifies the server (the
// name package pki gives it in TLS()).
func (l Layout) TLSCA() string { return filepath.Join(l.TLS(), "ca.crt") }

// Plugins is the watched directory of strategy modules (--plugins-dir's
// default).
func (l Layout) Plugins() string { return filepath.Join(l.Dir, "plugins") }

// PluginSequences remembers, with --plugin-trust-keys, the newest signed
// statement accepted per strategy, so that an older module or settings
// file put back into the plugins directory is refused after a restart.
func (l Layout) PluginSequences() string { return filepath.Join(l.Dir, "plugin-sequences.json") }

// WASMCache is wazero's compilation cache of the strategy modules.
func (l Layout) WASMCache() string { return filepath.Join(l.Dir, "wasm-cache") }

// Snapshots is the scheduled snapshots' directory (--snapshot-dir's
// default).
func (l Layout) Snapshots() string { return filepath.Join(l.Dir, "snapshots") }

// Member is the embedded etcd member's files (--cluster-init, --join).
func (l Layout) Member() MemberFiles { return MemberFilesIn(filepath.Join(l.Dir, "cluster")) }

// MemberKeptAside is where "leasehold restore" of a cluster snapshot
// moves a member's old files, stamped with the time of the restore.
func (l Layout) MemberKeptAside(at time.Time) string {
	return l.Member().Dir + ".pre-restore-" + at.UTC().Format("20060102T150405Z")
}

// Replica is an API-only replica's files (--replica).
func (l Layout) Replica() ReplicaFiles {
	dir := filepath.Join(l.Dir, "replica")
	return ReplicaFiles{Dir: dir, State: filepath.Join(dir, "replica.json"),
		CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key")}
}

// MemberFiles are the files of a member under its cluster directory.
type MemberFiles struct {
	Dir       string // the cluster directory
	State     string // member.json
	EtcdDir   string // etcd's data directory
	CAFile    string // the cluster CA certificate
	CAKeyFile string // the cluster CA key: every member can admit joiners
	CertFile  string // this member's peer and client certificate
	KeyFile   string
	TokenFile string // the cluster token, kept so a restart needs no flag
	// RestoreSnapshot is a snapshot "leasehold restore" staged for the
	// next --cluster-init, which starts a new cluster from it.
	RestoreSnapshot string
	// ImportDir holds the temporary member of an import under way.
	ImportDir string
}

// MemberFilesIn lays a member's files out in the cluster directory dir.
func MemberFilesIn(dir string) MemberFiles {
	return MemberFiles{
		Dir:       dir,
		State:     filepath.Join(dir, "member.json"),
		EtcdDir:   filepath.Join(dir, "etcd"),
		CAFile:    filepath.Join(dir, "pki", "ca.crt"),
		CAKeyFile: filepath.Join(dir, "pki", "ca.key"),
		CertFile:  filepath.Join(dir, "pki", "member.crt"),
		KeyFile:   filepath.Join(dir, "pki", "member.key"),
		TokenFile: filepath.Join(dir, "token"),

		RestoreSnapshot: filepath.Join(dir, "restore.snapshot"),
		ImportDir:       filepath.Join(dir, "import.tmp"),
	}
}

// ReplicaFiles are an API-only replica's files: its state and the client
// certificate the join handed it.
type ReplicaFiles struct {
	Dir               string
	State             string // replica.json, written last: its presence says the replica is complete
	CAFile            string // the cluster CA certificate (without its key)
	CertFile, KeyFile string
}
