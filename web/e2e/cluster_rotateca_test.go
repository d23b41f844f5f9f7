package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// rotateCAValidity is the test's --cluster-cert-validity: a replica asks
// for its renewal every twentieth of it (3 s), so that the rotation
// reaches it within seconds, not the minute of longer certificates.
const rotateCAValidity = "60s"

// TestClusterRotateCA runs three members and a replica under client-go
// renewal load through a member and through the replica (every 50 ms),
// then "cluster rotate-ca": no renewal fails and no process restarts;
// at the end every device's certificate chains to the new CA alone,
// every trust file holds the new CA only, the old CA's key is in no file
// of any member, and a client holding only the new CA reads through
// every member.
func TestClusterRotateCA(t *testing.T) {
	testneeds.Slow(t, "a three-member embedded etcd cluster and a replica through a CA rotation")
	t.Parallel()
	members := startClusterOf(t, nil, "", "--cluster-cert-validity", rotateCAValidity)
	replica := startClusterReplica(t, t.TempDir(), "127.0.0.1:0", members[1].ts.URL)

	pkiDir := func(m *clusterMember) string { return filepath.Join(m.dataDir, "cluster", "pki") }
	oldCAPEM, err := os.ReadFile(filepath.Join(pkiDir(members[0]), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	oldKeyPEM, err := os.ReadFile(filepath.Join(pkiDir(members[0]), "ca.key"))
	if err != nil {
		t.Fatal(err)
	}

	viaMember := startRotationLoad(t, members[0].ts, "via-m1")
	viaReplica := startRotationLoad(t, replica, "via-r1")
	time.Sleep(time.Second)

	started := time.Now()
	code, out, errOut := runCLI(t, "cluster", "rotate-ca", "--timeout", "90s", "--kubeconfig", members[0].ts.Kubeconfig)
	took := time.Since(started)
	if code != 0 {
		t.Fatalf("cluster rotate-ca: exit %d after %s\n%s%s", code, took.Round(time.Millisecond), out, errOut)
	}
	t.Logf("rotate-ca took %s:\n%s", took.Round(time.Millisecond), out)
	for _, want := range []string{"CA rotation started", "every device holds a certificate of the new CA", "the CA rotation is done", "CA rotation: done"} {
		if !strings.Contains(out, want) {
			t.Errorf("rotate-ca's output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI(t, "cluster", "status", "-o", "json", "--kubeconfig", members[2].ts.Kubeconfig)
	if code != 0 {
		t.Fatalf("cluster status: exit %d: %s", code, errOut)
	}
	var st clusterapi.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.CA == nil || st.CA.Phase != clusterapi.CAPhaseDone || len(st.CA.Members) != 3 {
		t.Fatalf("cluster status' CA after rotate-ca: %+v, want phase done with three members", st.CA)
	}
	newID := st.CA.Current.ID
	oldCA, err := pki.ParseCertificate(oldCAPEM)
	if err != nil {
		t.Fatal(err)
	}
	if newID == pki.KeyID(oldCA) {
		t.Fatalf("the current CA is still the old one (%s)", newID)
	}
	for _, c := range st.Certificates {
		if c.CA != newID {
			t.Errorf("%s %s's newest certificate is the CA %s's, want the new CA %s's", c.Kind, c.Name, c.CA, newID)
		}
	}
	newCAPEM, err := os.ReadFile(filepath.Join(pkiDir(members[0]), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}

	// The replica drops the old CA at its next check.
	replicaFiles := filepath.Join(replica.DataDir, "replica")
	eventually(t, 30*time.Second, "the replica's trust file holds the new CA only", func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(replicaFiles, "ca.crt"))
		return err == nil && bytes.Equal(data, newCAPEM), string(data)
	})
	logs := []string{members[0].ts.Log(), members[1].ts.Log(), members[2].ts.Log(), replica.proc.log.String()}
	viaMember.finish(t, logs...)
	viaReplica.finish(t, logs...)

	for _, p := range []*serverProcess{members[0].ts.proc, members[1].ts.proc, members[2].ts.proc, replica.proc} {
		select {
		case <-p.exited:
			t.Errorf("a server exited during the CA rotation (code %d)", p.code)
		default:
		}
	}

	// A member off during a rotation: the rotation cannot finish without
	// it and says so; once it starts again (with the CA it knew, the
	// first rotation's, which the others' certificates still chain to
	// through their cross-certificates) it renews by itself, and
	// rotate-ca resumes and finishes. This second rotation also carries
	// the first one's cross-certificate in its chain.
	firstKeyPEM, err := os.ReadFile(filepath.Join(pkiDir(members[0]), "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if code, ok := members[2].ts.proc.stop(30 * time.Second); !ok {
		t.Fatalf("m3 did not stop (code %d)", code)
	}
	code, out, errOut = runCLI(t, "cluster", "rotate-ca", "--timeout", "6s", "--kubeconfig", members[0].ts.Kubeconfig)
	if code == 0 || !strings.Contains(errOut, "member m3") || strings.Contains(errOut, "member m1") {
		t.Fatalf("rotate-ca with m3 off: exit %d, want a failure naming m3 alone among the members:\n%s%s", code, out, errOut)
	}
	t.Logf("rotate-ca with m3 off:\n%s%s", out, errOut)
	members[2].start(t)
	started = time.Now()
	code, out, errOut = runCLI(t, "cluster", "rotate-ca", "--timeout", "90s", "--kubeconfig", members[1].ts.Kubeconfig)
	if code != 0 || !strings.Contains(out, "resuming the CA rotation") || !strings.Contains(out, "the CA rotation is done") {
		t.Fatalf("rotate-ca after m3 came back: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("rotate-ca resumed once m3 was back, in %s:\n%s", time.Since(started).Round(time.Millisecond), out)
	if newCAPEM, err = os.ReadFile(filepath.Join(pkiDir(members[0]), "ca.crt")); err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.ParseCertificate(newCAPEM)
	if err != nil {
		t.Fatal(err)
	}
	newID = pki.KeyID(newCA)
	eventually(t, 30*time.Second, "the replica's trust file holds the second rotation's CA only", func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(replicaFiles, "ca.crt"))
		return err == nil && bytes.Equal(data, newCAPEM), string(data)
	})

	// Every device's certificate chains to the new CA alone; every
	// member signs with it and trusts it only; neither earlier CA's key
	// is in any file of any member's data directory, or in its log.
	certFiles := []string{filepath.Join(replicaFiles, "client.crt")}
	for _, m := range members {
		dir := pkiDir(m)
		certFiles = append(certFiles, filepath.Join(dir, "member.crt"))
		if trust, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil || !bytes.Equal(trust, newCAPEM) {
			t.Errorf("%s's trust file is not the new CA alone (%v):\n%s", m.name, err, trust)
		}
		key, err := os.ReadFile(filepath.Join(dir, "ca.key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pki.ParseAuthority(newCAPEM, key); err != nil {
			t.Errorf("%s's CA key is not the new CA's: %v", m.name, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's CA key file: %v, mode %v, want 0600", m.name, err, fi.Mode().Perm())
		}
		for _, keyPEM := range [][]byte{oldKeyPEM, firstKeyPEM} {
			body := bytes.TrimSpace(keyPEM[bytes.IndexByte(keyPEM, '\n')+1 : bytes.LastIndex(keyPEM, []byte("-----END"))])
			_ = filepath.WalkDir(m.dataDir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, body) {
					t.Errorf("an earlier CA's key is still in %s", path)
				}
				return nil
			})
			if strings.Contains(m.ts.Log(), string(body)) {
				t.Errorf("%s's log holds an earlier CA's key", m.name)
			}
		}
	}
	for _, f := range certFiles {
		certPEM, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.VerifyChain(certPEM, newCAPEM); err != nil {
			t.Errorf("%s does not chain to the new CA: %v", f, err)
		}
		leaf, err := pki.ParseCertificate(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		if pki.IssuerID(leaf) != newID {
			t.Errorf("%s was issued by %s, want the new CA %s", f, pki.IssuerID(leaf), newID)
		}
	}

	// A client holding only the new CA (and the replica's certificate)
	// reads through every member: their servers' certificates chain to it,
	// and every member (each started before the rotation, trusting the
	// old CA only in etcd's memory) admits the new CA's certificate.
	newCAFile := filepath.Join(t.TempDir(), "new-ca.crt")
	if err := os.WriteFile(newCAFile, newCAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		cli := etcdClientWith(t, memberClientURL(t, m), newCAFile, filepath.Join(replicaFiles, "client.crt"), filepath.Join(replicaFiles, "client.key"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Get(ctx, "/leasehold/", clientv3.WithPrefix())
		cancel()
		if err != nil {
			t.Errorf("a client holding only the new CA cannot read through %s: %v", m.name, err)
		}
	}

	code, out, _ = runCLI(t, "cluster", "status", "--kubeconfig", members[1].ts.Kubeconfig)
	if code != 0 || !strings.Contains(out, "CA rotation: done") || !strings.Contains(out, newID[:12]) {
		t.Errorf("cluster status does not show the rotated CA %s:\n%s", newID[:12], out)
	}
	checkCASystemPage(t, members[1], newID[:12])
}

// checkCASystemPage opens m's system page in Chromium: its cluster
// section shows the CA id and that it was rotated, and each
// certificate's CA.
func checkCASystemPage(t *testing.T, m *clusterMember, id string) {
	t.Helper()
	chromium := testneeds.Chromium(t)
	ctx, closeBrowser := openBrowser(t, chromium, 60*time.Second)
	defer closeBrowser()
	if err := chromedp.Do(ctx, chromedp.Navigate(m.ts.URL+"/ui/#/system")); err != nil {
		t.Fatalf("open the system page: %v", err)
	}
	eventually(t, 30*time.Second, "the system page shows the rotated cluster CA", func() (bool, string) {
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('cluster') || {}).innerText || ''`))
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(text, "Cluster CA") && strings.Contains(text, "rotated at") && strings.Count(text, id) >= 5, text
	})
}
