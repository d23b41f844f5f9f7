package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// mountTmpfs mounts a tmpfs of the given size on a fresh directory and
// unmounts it at cleanup. It needs root (CI runs as root); without it the
// test fails rather than pretending the disk-full case was checked.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	testneeds.Root(t, "mount(8) of a small tmpfs to fill up")
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test needs to mount a small tmpfs to fill it up (run as root with mount(8) available): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file until the filesystem is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

type apiResult struct {
	code   int
	status struct {
		Kind, Status, Message, Reason string
		Code                          int
	}
}

func apiDo(t *testing.T, method, url, body string) apiResult {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := apiResult{code: resp.StatusCode}
	_ = json.Unmarshal(data, &r.status)
	return r
}

// TestE2EDiskFull fills the filesystem under a running server: writes then
// fail with a 500 Status naming the storage failure, reads (get, list)
// keep working, and once space is freed writes succeed again without a
// restart; the file stays consistent and every acknowledged write stays.
func TestE2EDiskFull(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "6m")
	dataDir := filepath.Join(mnt, "data")
	ts := startServerIn(t, dataDir, "--write-kubeconfig", "-")
	leases := ts.URL + "/apis/coordination.k8s.io/v1/namespaces/full/leases"
	lease := func(name, holder string, pad int) string {
		return fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"annotations":{"pad":%q}},"spec":{"holderIdentity":%q}}`,
			name, strings.Repeat("x", pad), holder)
	}
	if r := apiDo(t, http.MethodPost, leases, lease("kept", "h0", 0)); r.code != http.StatusCreated {
		t.Fatalf("create before the disk is full: %d %+v", r.code, r.status)
	}

	fillDisk(t, filepath.Join(mnt, "filler"))
	// bbolt reuses free pages it already holds, so a few writes may still
	// fit; large values need new pages.
	var failed apiResult
	for i := 0; i < 50 && failed.code == 0; i++ {
		r := apiDo(t, http.MethodPost, leases, lease(fmt.Sprintf("big-%d", i), "h", 200<<10))
		switch r.code {
		case http.StatusCreated:
		case http.StatusInternalServerError:
			failed = r
		default:
			t.Fatalf("write on a full disk: HTTP %d %+v, want 201 or 500", r.code, r.status)
		}
	}
	if failed.code == 0 {
		t.Fatalf("50 writes of 200 KiB succeeded on a full 6 MiB filesystem")
	}
	if failed.status.Kind != "Status" || failed.status.Reason != "InternalError" || !strings.Contains(failed.status.Message, "no space left on device") {
		t.Fatalf("write on a full disk: %+v, want an InternalError Status naming the storage failure", failed.status)
	}
	t.Logf("write on a full disk: %d %s", failed.code, failed.status.Message)
	if r := apiDo(t, http.MethodGet, leases+"/kept", ""); r.code != http.StatusOK {
		t.Fatalf("get on a full disk: %d %+v", r.code, r.status)
	}
	if r := apiDo(t, http.MethodGet, leases, ""); r.code != http.StatusOK {
		t.Fatalf("list on a full disk: %d %+v", r.code, r.status)
	}

	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	if r := apiDo(t, http.MethodPost, leases, lease("after", "h1", 0)); r.code != http.StatusCreated {
		t.Fatalf("create after space returned: %d %+v", r.code, r.status)
	}
	get := apiDo(t, http.MethodGet, leases+"/kept", "")
	if get.code != http.StatusOK {
		t.Fatalf("get after space returned: %d", get.code)
	}
	ts.Stop(t)
	verifyFile(t, 0, filepath.Join(dataDir, "leasehold.db"))

	// A restart on the same file still has both leases.
	ts = startServerIn(t, dataDir, "--write-kubeconfig", "-")
	for _, name := range []string{"kept", "after"} {
		if r := apiDo(t, http.MethodGet, ts.URL+"/apis/coordination.k8s.io/v1/namespaces/full/leases/"+name, ""); r.code != http.StatusOK {
			t.Fatalf("after restart, lease %s: HTTP %d", name, r.code)
		}
	}
}

// TestE2EReadOnlyDataDir starts the binary on a data directory whose
// filesystem is read-only: it must exit non-zero with a message naming
// the database and the read-only filesystem, not start without storage.
// (Writes failing at run time take the path TestE2EDiskFull and
// storage/boltdb's TestWriteFailureAndRecovery check.)
func TestE2EReadOnlyDataDir(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "4m")
	dataDir := filepath.Join(mnt, "data")
	srv, ok := startCrashChild(t, dataDir)
	if !ok {
		t.Fatalf("first start failed:\n%s", srv.log.String())
	}
	srv.kill()
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	defer exec.Command("mount", "-o", "remount,rw", mnt).Run()
	srv, ok = startCrashChild(t, dataDir)
	if ok {
		t.Fatal("server started on a read-only data directory")
	}
	if msg := srv.log.String(); srv.code == 0 || !strings.Contains(msg, "leasehold.db") || !strings.Contains(msg, "read-only file system") {
		t.Fatalf("exit code %d, output:\n%s\nwant a non-zero exit naming the database and the read-only filesystem", srv.code, msg)
	}
}
