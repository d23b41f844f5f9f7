package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// crashChild is a leasehold server in a child process (the real
// binary), so that it can be killed with SIGKILL.
type crashChild struct {
	URL string
	*serverProcess
}

// startCrashChild runs "leasehold serve" on dataDir and waits until it
// serves, or until it exits (ready is then false).
func startCrashChild(t *testing.T, dataDir string, args ...string) (c *crashChild, ready bool) {
	t.Helper()
	all := append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn", "--write-kubeconfig", "-"}, args...)
	p, ready := spawnServer(t, all, nil)
	c = &crashChild{serverProcess: p}
	if ready {
		c.URL = "http://" + p.hostPort()
	}
	return c, ready
}

// ackedWrite is one write the server acknowledged: the lease's holder
// carries a per-lease sequence number, so a later state must carry an
// equal or larger one.
type ackedWrite struct {
	rv  int64
	seq int
}

// crashWriter owns a few leases and writes them (POST, then PUT with the
// last acknowledged resourceVersion) until the server goes away.
type crashWriter struct {
	id     int
	hc     *http.Client
	base   string
	seq    map[string]int    // next sequence number per lease
	rv     map[string]string // last known resourceVersion ("" = create)
	acked  map[string]ackedWrite
	writes int
}

const crashLeasesPerWriter = 4

func (w *crashWriter) name(i int) string { return fmt.Sprintf("w%d-l%d", w.id, i) }

func (w *crashWriter) leasesURL() string {
	return w.base + "/apis/coordination.k8s.io/v1/namespaces/crash/leases"
}

// run writes until the first transport error (the server was killed).
func (w *crashWriter) run() {
	for i := 0; ; i = (i + 1) % crashLeasesPerWriter {
		name := w.name(i)
		seq := w.seq[name] + 1
		body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"resourceVersion":%q},"spec":{"holderIdentity":"seq-%d","leaseDurationSeconds":15}}`,
			name, w.rv[name], seq)
		method, url := http.MethodPut, w.leasesURL()+"/"+name
		if w.rv[name] == "" {
			method, url = http.MethodPost, w.leasesURL()
		}
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := w.hc.Do(req)
		if err != nil {
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return
		}
		switch resp.StatusCode {
		case http.StatusOK, http.StatusCreated:
			var l struct {
				Metadata struct{ ResourceVersion string }
			}
			if json.Unmarshal(data, &l) != nil {
				return
			}
			rv, _ := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
			w.rv[name], w.seq[name] = l.Metadata.ResourceVersion, seq
			w.acked[name] = ackedWrite{rv: rv, seq: seq}
			w.writes++
		case http.StatusConflict:
			// A write committed but not acknowledged before a kill (or a
			// create of an existing lease): read the current state.
			w.refresh(name)
		default:
			return
		}
	}
}

// refresh reads a lease's resourceVersion and sequence after a conflict.
func (w *crashWriter) refresh(name string) {
	resp, err := w.hc.Get(w.leasesURL() + "/" + name)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if l, ok := decodeCrashLease(resp.Body); ok {
		w.rv[name], w.seq[name] = l.rv, l.seq
	}
}

type crashLease struct {
	rv  string
	seq int
}

func decodeCrashLease(r io.Reader) (crashLease, bool) {
	var l struct {
		Metadata struct{ ResourceVersion string }
		Spec     struct{ HolderIdentity string }
	}
	if json.NewDecoder(r).Decode(&l) != nil {
		return crashLease{}, false
	}
	seq, err := strconv.Atoi(strings.TrimPrefix(l.Spec.HolderIdentity, "seq-"))
	return crashLease{rv: l.Metadata.ResourceVersion, seq: seq}, err == nil
}

// TestE2ECrashDurability kills a server process with SIGKILL several times
// while concurrent clients write, restarting it on the same file: every
// write the server acknowledged must be there afterwards (at that
// resourceVersion or a later one, with that value or a newer one), and the
// bbolt file must pass an integrity check after every kill.
func TestE2ECrashDurability(t *testing.T) {
	testneeds.Slow(t, "SIGKILLs a server five times under thousands of writes")
	t.Parallel()
	dataDir := t.TempDir()
	const writers = 8
	ws := make([]*crashWriter, writers)
	for i := range ws {
		ws[i] = &crashWriter{id: i, seq: map[string]int{}, rv: map[string]string{}, acked: map[string]ackedWrite{}}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	total := 0
	for round := range 5 {
		srv, ok := startCrashChild(t, dataDir)
		if !ok {
			t.Fatalf("round %d: server did not start (exit %d):\n%s", round, srv.code, srv.log.String())
		}
		if round > 0 {
			checkAcked(t, round, srv.URL, ws)
		}
		var wg sync.WaitGroup
		for _, w := range ws {
			w.base = srv.URL
			w.hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			wg.Go(w.run)
		}
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		srv.kill()
		wg.Wait()
		before := total
		total = 0
		for _, w := range ws {
			total += w.writes
		}
		if total == before {
			t.Fatalf("round %d: no write was acknowledged before the kill:\n%s", round, srv.log.String())
		}
		verifyFile(t, round, filepath.Join(dataDir, "leasehold.db"))
	}
	srv, ok := startCrashChild(t, dataDir)
	if !ok {
		t.Fatalf("final restart failed:\n%s", srv.log.String())
	}
	checkAcked(t, 5, srv.URL, ws)
	t.Logf("%d acknowledged writes over 5 SIGKILLs, all present", total)
}

// checkAcked reads every lease and compares it with the last acknowledged
// write.
func checkAcked(t *testing.T, round int, base string, ws []*crashWriter) {
	t.Helper()
	for _, w := range ws {
		for name, a := range w.acked {
			resp, err := http.Get(base + "/apis/coordination.k8s.io/v1/namespaces/crash/leases/" + name)
			if err != nil {
				t.Fatalf("round %d: get %s: %v", round, name, err)
			}
			got, ok := decodeCrashLease(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !ok {
				t.Fatalf("round %d: acknowledged lease %s (rv %d, seq %d) is gone: HTTP %d", round, name, a.rv, a.seq, resp.StatusCode)
			}
			rv, _ := strconv.ParseInt(got.rv, 10, 64)
			if rv < a.rv || got.seq < a.seq || (rv == a.rv && got.seq != a.seq) {
				t.Fatalf("round %d: lease %s is at rv %d seq %d, but rv %d seq %d was acknowledged", round, name, rv, got.seq, a.rv, a.seq)
			}
		}
	}
}

// verifyFile opens the database as the server does and runs the
// integrity check (bbolt's page consistency plus leasehold's format).
func verifyFile(t *testing.T, round int, path string) {
	t.Helper()
	s, err := boltdb.Open(context.Background(), path, boltdb.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
	}
	defer s.Close()
	if err := s.Verify(context.Background()); err != nil {
		t.Fatalf("round %d: integrity check after SIGKILL: %v", round, err)
	}
}

// TestE2ERefusesForeignDatabase starts the binary on a data directory
// whose leasehold.db is not a leasehold database (garbage, then a valid
// bbolt file of another program): it must exit non-zero naming the file
// and the problem, and leave the file untouched - never start empty.
func TestE2ERefusesForeignDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		write func(path string) error
		want  string
	}{
		{"garbage", func(path string) error {
			return os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 4096), 0o600)
		}, "meta pages are unreadable"},
		{"foreign bbolt", writeForeignBolt, "not a leasehold store"},
		// bbolt would silently start an empty store on a 0-byte file.
		{"empty", func(path string) error { return os.WriteFile(path, nil, 0o600) }, "is empty (0 bytes)"},
		// A file cut short would be mapped past its end (SIGBUS).
		{"truncated", func(path string) error {
			if err := writeForeignBolt(path); err != nil {
				return err
			}
			return os.Truncate(path, 8<<10)
		}, "leasehold restore"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "leasehold.db")
			if err := c.write(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			srv, ready := startCrashChild(t, dir)
			if ready {
				t.Fatalf("server started on a foreign database file")
			}
			msg := srv.log.String()
			if srv.code != 1 || !strings.Contains(msg, path) || !strings.Contains(msg, c.want) {
				t.Fatalf("exit code %d, output:\n%s\nwant exit status 1 naming %s and %q", srv.code, msg, path, c.want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatalf("the refused file was modified")
			}
		})
	}
}

// writeForeignBolt writes a valid bbolt file with another program's
// bucket.
func writeForeignBolt(path string) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("settings"))
		if err != nil {
			return err
		}
		return b.Put([]byte("theme"), []byte("dark"))
	}); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}
