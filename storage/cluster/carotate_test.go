package cluster

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// caMember is a member's CA files (no etcd: syncCA and healOwnCert work
// on files and the record's mirror only), with the old CA, and a member
// certificate it issued.
func caMember(t *testing.T) (*Member, *pki.Authority) {
	t.Helper()
	p := PathsIn(t.TempDir())
	old, err := pki.NewAuthority("old")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := old.IssuePeer("m1", []string{memberCertHost}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{p.CAFile, old.CertPEM, 0o644}, {p.CAKeyFile, old.KeyPEM, 0o600}, {p.CertFile, certPEM, 0o644}, {p.KeyFile, keyPEM, 0o600}} {
		if err := WriteFile(f.path, f.data, f.perm); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := &Member{cfg: Config{State: State{Name: "m1"}, Paths: p}, log: log, gate: newGate("/leasehold", "", filepath.Join(p.Dir, "trust.json"), log, nil)}
	return m, old
}

// startRotation is what RotateCA records, applied to m's mirror.
func startRotation(t *testing.T, m *Member, old *pki.Authority) *pki.Authority {
	t.Helper()
	next, err := pki.NewAuthority("new")
	if err != nil {
		t.Fatal(err)
	}
	cross, err := old.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := old.SealKey(next.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(caRecord{Phase: clusterapi.CAPhaseReissue, Started: time.Now(), Cert: string(next.CertPEM), Old: string(old.CertPEM), SealedKey: sealed, Chain: string(cross)})
	m.gate.apply([]byte(caKey), data, false)
	next.Chain = cross
	return next
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestSyncCAPhases: a member applying a rotation writes the new key over
// the old (0600), a trust file of both CAs (the new first) and the chain;
// a crash after the key alone is completed by the next call; the
// finished rotation leaves the new CA alone in the trust file; what the
// member then issues chains to the new CA and, through its chain, to the
// old.
func TestSyncCAPhases(t *testing.T) {
	m, old := caMember(t)
	p := m.cfg.Paths
	if err := m.syncCA(); err != nil {
		t.Fatalf("no rotation: %v", err)
	}
	if readFile(t, p.CAKeyFile) != string(old.KeyPEM) {
		t.Fatal("syncCA without a rotation changed the CA key")
	}
	next := startRotation(t, m, old)
	if !m.gate.reissueDue(pki.KeyID(old.Cert)) || m.gate.reissueDue(pki.KeyID(next.Cert)) {
		t.Error("reissueDue: want the old CA's certificates due, the new CA's not")
	}
	// A crash right after the key was written.
	if err := WriteFile(p.CAKeyFile, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCA(p); err == nil {
		t.Error("loadCA accepted a key that is not its CA file's first certificate's")
	}
	if err := m.syncCA(); err != nil {
		t.Fatalf("reissue after a crash: %v", err)
	}
	if got := readFile(t, p.CAFile); got != string(next.CertPEM)+string(old.CertPEM) {
		t.Errorf("trust file during the rotation: want the new CA then the old, got:\n%s", got)
	}
	if fi, err := os.Stat(p.CAKeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("CA key file mode: %v %v, want 0600", fi.Mode().Perm(), err)
	}
	// From the old key, as a member that was off opens it.
	if err := WriteFile(p.CAKeyFile, old.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p.CAFile, old.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.syncCA(); err != nil {
		t.Fatalf("reissue from the old key: %v", err)
	}
	if readFile(t, p.CAKeyFile) != string(next.KeyPEM) {
		t.Fatal("the member's CA key is not the new CA's")
	}
	ca, err := loadCA(p)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := pki.GenerateKey()
	issued, err := ca.SignClient("r1", nil, key.Public(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, roots := range map[string][]byte{"old": old.CertPEM, "new": next.CertPEM} {
		if err := pki.VerifyChain(issued, roots); err != nil {
			t.Errorf("a certificate issued during the rotation does not verify against the %s CA: %v", name, err)
		}
	}

	rec := m.gate.caRecordNow()
	rec.Phase, rec.SealedKey = clusterapi.CAPhaseDone, ""
	data, _ := json.Marshal(rec)
	m.gate.apply([]byte(caKey), data, false)
	if err := m.syncCA(); err != nil {
		t.Fatalf("done: %v", err)
	}
	if got := readFile(t, p.CAFile); got != string(next.CertPEM) {
		t.Errorf("trust file after the rotation: want the new CA alone, got:\n%s", got)
	}

	// A member that missed the whole rotation cannot follow it, and is
	// told what to do.
	late, _ := caMember(t)
	data, _ = json.Marshal(rec)
	late.gate.apply([]byte(caKey), data, false)
	if err := late.syncCA(); err == nil || !strings.Contains(err.Error(), "join it again") {
		t.Errorf("a member that missed a finished rotation: %v, want it told to join again", err)
	}
}

// TestHealOwnCert: a member whose certificate is the old CA's while its
// trust file holds the new CA alone (it stopped between its renewal's
// record and its file, and the rotation finished) re-signs it for its
// own key at start; one its trust verifies is left alone.
func TestHealOwnCert(t *testing.T) {
	m, old := caMember(t)
	p := m.cfg.Paths
	before := readFile(t, p.CertFile)
	if err := healOwnCert(p, time.Hour, m.log); err != nil {
		t.Fatal(err)
	}
	if readFile(t, p.CertFile) != before {
		t.Fatal("healOwnCert replaced a certificate its trust verifies")
	}
	next := startRotation(t, m, old)
	if err := m.syncCA(); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p.CAFile, next.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := healOwnCert(p, time.Hour, m.log); err != nil {
		t.Fatal(err)
	}
	healed := readFile(t, p.CertFile)
	if err := pki.VerifyChain([]byte(healed), next.CertPEM); err != nil {
		t.Fatalf("the healed certificate does not chain to the new CA: %v", err)
	}
	oldCert, _ := pki.ParseCertificate([]byte(before))
	newCert, _ := pki.ParseCertificate([]byte(healed))
	if keyHash(oldCert) != keyHash(newCert) || newCert.Subject.CommonName != "m1" {
		t.Error("the healed certificate is not for the member's own key and name")
	}
}

// TestLagging names the devices whose newest certificate is not the new
// CA's.
func TestLagging(t *testing.T) {
	now := time.Now()
	creds := map[string]Credential{
		"a": {Kind: KindMember, Name: "m1", CA: "old", Issued: now.Add(-time.Hour)},
		"b": {Kind: KindMember, Name: "m1", CA: "new", Issued: now},
		"c": {Kind: KindMember, Name: "m2", CA: "old", Issued: now},
		"d": {Kind: KindReplica, Name: "r1", Issued: now},
	}
	if got := strings.Join(lagging(creds, "new"), ","); got != "member m2,replica r1" {
		t.Errorf("lagging: %q, want member m2,replica r1", got)
	}
}
