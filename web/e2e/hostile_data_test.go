package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// hostileAnnotations is the reproducer's body: a Lease with 100,000
// annotation keys, about 1.5 MB of JSON (under the 3 MiB body limit).
func hostileAnnotations(name string) []byte {
	ann := make(map[string]string, 100000)
	for i := 0; i < 100000; i++ {
		ann[fmt.Sprintf("k%d", i)] = "v"
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": name, "annotations": ann},
	})
	return b
}

// send is one raw request; it returns the status, the body and how long
// the answer took.
func send(t *testing.T, method, url, contentType string, body []byte) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), time.Since(start)
}

// TestE2EHostileAnnotationsRefusedFast replays the reproducer: 100,000
// annotation keys took 9-12 s of managedFields work before their 422, and
// four at once slowed every other client. Validation now runs first, on
// create, update, merge patch and apply: each answers kube-apiserver's 422
// with well under two seconds of the server's CPU (four of a patch), four
// at once included.
func TestE2EHostileAnnotationsRefusedFast(t *testing.T) {
	testneeds.Slow(t, "many large hostile requests")
	ts := startServer(t)
	createLease(t, ts.URL, "default", "target", "h")
	leases := ts.URL + "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	const invalid = `Lease.coordination.k8s.io \"%s\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes`

	var target struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_, body, _ := send(t, "GET", leases+"/target", "", nil)
	if err := json.Unmarshal([]byte(body), &target); err != nil {
		t.Fatal(err)
	}
	put := bytes.Replace(hostileAnnotations("target"), []byte(`"name":"target"`),
		[]byte(`"name":"target","resourceVersion":"`+target.Metadata.ResourceVersion+`"`), 1)
	cases := []struct {
		verb, method, url, contentType, name string
		body                                 []byte
	}{
		{"create", "POST", leases, "application/json", "hostile", hostileAnnotations("hostile")},
		{"update", "PUT", leases + "/target", "application/json", "target", put},
		{"merge patch", "PATCH", leases + "/target", "application/merge-patch+json", "target", hostileAnnotations("target")},
		{"apply", "PATCH", leases + "/target?fieldManager=e2e", "application/apply-patch+yaml", "target", hostileAnnotations("target")},
	}
	for _, c := range cases {
		cpu0 := processCPU(t, ts.Pid())
		code, body, took := send(t, c.method, c.url, c.contentType, c.body)
		cpu := processCPU(t, ts.Pid()) - cpu0
		t.Logf("%s of 100,000 annotation keys (%d bytes): %d in %v, %v of the server's CPU", c.verb, len(c.body), code, took, cpu)
		if code != 422 || !strings.Contains(body, fmt.Sprintf(invalid, c.name)) || !strings.Contains(body, `"reason":"Invalid"`) {
			t.Errorf("%s: %d %.300s", c.verb, code, body)
		}
		// Create and update decode the body once; a patch is parsed once
		// more and merged into the live object: still linear, but slower.
		// The bound is on the server's CPU time, the work done, which a
		// loaded machine does not inflate as it does the wall-clock time
		// (at a load of 50 on 2 cores a refusal took 1-24 s of it).
		bound := 2 * time.Second
		if c.method == "PATCH" {
			bound = 4 * time.Second
		}
		if cpu > bound {
			t.Errorf("%s refused with %v of the server's CPU, want under %v", c.verb, cpu, bound)
		}
	}

	// Four at once, while another client reads.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var reads []time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if code, _, took := send(t, "GET", leases+"/target", "", nil); code == 200 {
				reads = append(reads, took)
			}
		}
	}()
	var hostile sync.WaitGroup
	cpu0 := processCPU(t, ts.Pid())
	took := make([]time.Duration, 4)
	for i := range took {
		hostile.Add(1)
		go func() {
			defer hostile.Done()
			var code int
			code, _, took[i] = send(t, "POST", leases, "application/json", hostileAnnotations(fmt.Sprintf("hostile-%d", i)))
			if code != 422 {
				t.Errorf("concurrent create %d: %d", i, code)
			}
		}()
	}
	hostile.Wait()
	cpu := processCPU(t, ts.Pid()) - cpu0
	close(stop)
	wg.Wait()
	slices.Sort(reads)
	p50 := time.Duration(0)
	if len(reads) > 0 {
		p50 = reads[len(reads)/2]
	}
	t.Logf("four concurrent hostile creates: %v, %v of the server's CPU in all; %d GETs meanwhile, p50 %v", took, cpu, len(reads), p50)
	// Four refusals' work (and the GETs'), the server's CPU time again.
	if bound := 4 * 2 * time.Second; cpu > bound {
		t.Errorf("four concurrent creates refused with %v of the server's CPU, want under %v", cpu, bound)
	}
}

// TestE2EUndecodableRecordIsolated replays the reproducer: one lease whose
// stored protobuf has a broken length. It used to fail /readyz, every LIST
// of its namespace and cluster-wide, and watches, and could be neither
// read, replaced nor deleted, while leasehold backup copied it silently.
func TestE2EUndecodableRecordIsolated(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir)
	createLease(t, ts.URL, "default", "a", "h")
	createLease(t, ts.URL, "default", "victim", "h")
	createLease(t, ts.URL, "default", "z", "h")
	createLease(t, ts.URL, "other", "b", "h")
	ts.Stop(t)

	// Damage the stored value through the storage contract, in the real
	// file: the first length prefix (metadata's) claims 127 bytes.
	const key = "/registry/coordination.k8s.io/leases/default/victim"
	ctx := context.Background()
	st, err := boltdb.Open(ctx, filepath.Join(dir, "leasehold.db"), boltdb.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	broken := append([]byte(nil), kv.Value...)
	broken[1] = 0x7f
	if _, err := st.Update(ctx, key, broken, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// leasehold backup names it and refuses, unless --keep-undecodable.
	out := filepath.Join(t.TempDir(), "backup.db")
	code, _, errOut := runCLI(t, "backup", "--data-dir", dir, out)
	if code != 1 || !strings.Contains(errOut, "record "+key+" does not decode") || !strings.Contains(errOut, "--keep-undecodable") {
		t.Errorf("backup of a damaged store = %d %s", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("backup wrote %s without --keep-undecodable (%v)", out, err)
	}
	if code, _, errOut := runCLI(t, "backup", "--data-dir", dir, "--keep-undecodable", out); code != 0 || !strings.Contains(errOut, key) {
		t.Errorf("backup --keep-undecodable = %d %s", code, errOut)
	}

	ts = startServerIn(t, dir)
	start := time.Now()
	eventually(t, 30*time.Second, "/readyz passes", func() (bool, string) {
		code, _, body := httpGet(t, ts.URL+"/readyz?verbose")
		return code == 200, body
	})
	t.Logf("ready %v after start with one undecodable record", time.Since(start))

	cfg := restConfig(t, ts, wireJSON)
	var warnings warningLog
	cfg.WarningHandler = &warnings
	cs := clientset(t, cfg)
	leases := cs.CoordinationV1().Leases("default")
	for _, ns := range []string{"default", ""} {
		l, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("LIST %q: %v", ns, err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Namespace+"/"+it.Name)
		}
		want := []string{"default/a", "default/z"}
		if ns == "" {
			want = []string{"default/a", "default/z", "other/b"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("LIST %q = %v, want %v", ns, names, want)
		}
		if w := warnings.take(); len(w) != 1 || !strings.Contains(w[0], "lease default/victim was left out") {
			t.Errorf("LIST %q warnings %q", ns, w)
		}
	}
	const corrupt = "StorageError: corrupt object, Code: 6, Key: /registry/leases/default/victim"
	_, err = leases.Get(ctx, "victim", metav1.GetOptions{})
	if st := apiStatus(t, err); st.Code != 500 || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("GET: %d %q", st.Code, st.Message)
	}
	_, err = leases.Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "victim", ResourceVersion: "1"}}, metav1.UpdateOptions{})
	if st := apiStatus(t, err); st.Code != 500 || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("PUT: %d %q", st.Code, st.Message)
	}
	err = leases.Delete(ctx, "victim", metav1.DeleteOptions{})
	if st := apiStatus(t, err); st.Code != 500 || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("plain DELETE: %d %q", st.Code, st.Message)
	}

	// A watch delivers the events around it.
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createLease(t, ts.URL, "default", "after", "h")
	eventually(t, 10*time.Second, "watch delivers the new lease", func() (bool, string) {
		select {
		case ev := <-w.ResultChan():
			l, ok := ev.Object.(*coordinationv1.Lease)
			return ok && l.Name == "after", fmt.Sprintf("%s %T", ev.Type, ev.Object)
		case <-time.After(100 * time.Millisecond):
			return false, "no event yet"
		}
	})

	// Reported: /readyz?verbose (passing), /metrics, one log line.
	code, _, body := httpGet(t, ts.URL+"/readyz?verbose")
	if code != 200 || !strings.Contains(body, "[+]stored-objects ok\nwarn: 1 stored object(s) cannot be decoded") || strings.Contains(body, "victim") {
		t.Errorf("/readyz?verbose = %d %q", code, body)
	}
	_, _, m := httpGet(t, ts.URL+"/metrics")
	if !strings.Contains(m, "leasehold_storage_undecodable_objects 1\n") {
		t.Errorf("/metrics lacks leasehold_storage_undecodable_objects 1")
	}
	if n := strings.Count(ts.Log(), "Stored object cannot be decoded"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, ts.Log())
	}

	// The unsafe delete removes it.
	yes := true
	unsafe := metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: &yes}
	if err := leases.Delete(ctx, "victim", unsafe); err != nil {
		t.Fatalf("DELETE with ignoreStoreReadErrorWithClusterBreakingPotential: %v", err)
	}
	_, err = leases.Get(ctx, "victim", metav1.GetOptions{})
	if st := apiStatus(t, err); st.Code != 404 {
		t.Errorf("GET after the unsafe delete: %d %q", st.Code, st.Message)
	}
	if _, _, body := httpGet(t, ts.URL+"/readyz?verbose"); strings.Contains(body, "warn:") {
		t.Errorf("/readyz?verbose still warns: %q", body)
	}
	if _, err := leases.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"ok":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("the other leases stay writable: %v", err)
	}
	warnings.take()
	if _, err := leases.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("LIST after the delete: %v", err)
	}
	if w := warnings.take(); len(w) != 0 {
		t.Errorf("LIST after the delete warns %q", w)
	}
}
