package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// settingsStatus and replayRecord decode what these tests read of the
// UI's JSON (web/ui's module status, engine/history.DecisionRecord).
type settingsStatus struct {
	Name, SettingsSHA256, SettingsFile string
	Builtin, Active                    bool
}

type replayRecord struct {
	Action, Chosen string
	Module         struct{ Name, SettingsSHA256 string }
	Input          *struct {
		Strategy   string
		Settings   json.RawMessage
		Candidates []struct{ Name string }
	}
	Decision *struct{ Action string }
}

// TestE2EPluginReplay: candidates elect with the built-in strategy and
// the server records each decision's input; `plugin replay` of the
// built-in's own module agrees with every recorded decision, and of the
// Go example (newest binary) shows each difference and the other leader,
// from the server and from the saved file. The example is then deployed
// with a settings file: the settings digest shows in the lease's module
// annotation and in the decision records with the settings themselves,
// and editing the file hot-reloads the module under the new digest.
func TestE2EPluginReplay(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1")
	t.Parallel()    // mostly lease timers
	go newestWasm() // overlap the slow build with the first election
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	oldestPath := filepath.Join(root, "plugins", "builtin", "oldest.wasm")
	plugins := t.TempDir()
	work := t.TempDir()
	ts := startServer(t, "--plugins-dir", plugins)
	ctx := context.Background()
	cs := clientset(t, restConfig(t, ts, wireJSON))
	lt := &leaderTracker{leading: map[string]bool{}}
	const lease = "e2e-replay"
	members := [][3]string{{"kcm-old", "1.31.0", "1.30.0"}, {"kcm-mid", "1.32.0", "1.32.0"}, {"kcm-new", "1.33.0", "1.31.0"}}
	for _, v := range members {
		startMember(t, ts, lt, lease, v[0], v[1], v[2], string(coordinationv1.OldestEmulationVersion))
	}
	if who := waitLeader(t, lt, 1, 20*time.Second); who != "kcm-old" {
		t.Fatalf("first leader = %s, want kcm-old (oldest emulation version)", who)
	}
	eventually(t, 10*time.Second, "a granting decision with its input recorded", func() (bool, string) {
		var d struct{ Items []replayRecord }
		uiGet(t, ts, "/ui/api/v1/namespaces/kube-system/leases/"+lease+"/decisions", &d)
		for _, r := range d.Items {
			if r.Action == "grant" && r.Chosen == "kcm-old" && r.Input != nil && len(r.Input.Candidates) == 3 && r.Decision != nil {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", d.Items)
	})

	// The built-in's own module agrees with every recorded decision.
	saved := filepath.Join(work, "history.json")
	code, out, errOut := runCLI(t, "plugin", "replay", oldestPath, "--server", ts.URL, "--lease", "kube-system/"+lease, "--save", saved)
	if code != 0 || !strings.Contains(out, " 0 differ") || strings.Contains(out, "\ndiffer") || !strings.Contains(out, "agree ") {
		t.Fatalf("replay of the built-in module: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("replay of the built-in:\n%s", out)
	// The saved history holds every decision's input: its owner's only.
	if st, err := os.Stat(saved); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved history: %v, mode %v, want 0600", err, st.Mode().Perm())
	}

	// The newest-binary strategy would have chosen kcm-new: shown per
	// decision, from the server (--all) and from the saved file alike.
	wasm, err := newestWasm()
	if err != nil {
		t.Fatal(err)
	}
	newestPath := filepath.Join(work, "newest-binary-version.wasm")
	if err := os.WriteFile(newestPath, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range [][]string{{"--from", saved}, {"--server", ts.URL, "--all"}} {
		code, out, errOut = runCLI(t, append([]string{"plugin", "replay", newestPath}, src...)...)
		if code != 3 || !strings.Contains(out, "differ ") || !strings.Contains(out, "leader kcm-old -> kcm-new") ||
			!strings.Contains(out, "summary: "+newestStrategy+"@1.0.0") {
			t.Fatalf("replay of the newest-binary module (%v): exit %d, want 3 with kcm-old -> kcm-new\n%s%s", src, code, out, errOut)
		}
	}
	t.Logf("replay of the newest-binary module:\n%s", out)
	code, out, errOut = runCLI(t, "plugin", "replay", newestPath, "--from", saved, "-o", "json")
	var rep struct {
		Decisions []struct{ Verdict, RecordedLeader, ReplayedLeader string }
		Summary   struct{ Decisions, Differ, LeaderChanges int }
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 3 || err != nil || rep.Summary.Differ == 0 ||
		rep.Summary.LeaderChanges == 0 || len(rep.Decisions) != rep.Summary.Decisions {
		t.Fatalf("replay -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}

	// Deploy the module with settings: the digest is audited.
	settings1 := []byte(`{"note":"first"}`)
	sum1 := fmt.Sprintf("%x", sha256.Sum256(settings1))
	writeSettings(t, plugins, "newest-binary-version.json", settings1)
	modSum := installPlugin(t, plugins, "newest-binary-version.wasm", wasm)
	waitSettings(t, ts, sum1)
	cands := cs.CoordinationV1beta1().LeaseCandidates("kube-system")
	patch := []byte(`{"spec":{"strategy":"` + newestStrategy + `"}}`)
	for _, v := range members {
		if _, err := cands.Patch(ctx, v[0], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch candidate %s: %v", v[0], err)
		}
	}
	wantModule := newestStrategy + "@1.0.0 sha256:" + modSum + " settings:sha256:" + sum1
	eventually(t, 30*time.Second, "kcm-new granted by the module with its settings", func() (bool, string) {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return deref(l.Spec.HolderIdentity) == "kcm-new" && l.Annotations["leasehold.dev/elected-by-module"] == wantModule,
			fmt.Sprintf("holder %q annotations %v", deref(l.Spec.HolderIdentity), l.Annotations)
	})
	var d struct{ Items []replayRecord }
	uiGet(t, ts, "/ui/api/v1/namespaces/kube-system/leases/"+lease+"/decisions", &d)
	audited := false
	for _, r := range d.Items {
		if r.Module.Name == newestStrategy && r.Module.SettingsSHA256 == sum1 && r.Input != nil &&
			string(r.Input.Settings) == string(settings1) && r.Input.Strategy == newestStrategy {
			audited = true
		}
	}
	if !audited {
		t.Fatalf("no decision record of the module with settings digest %s and its settings: %+v", sum1, d.Items)
	}

	// Editing the settings reloads the module under the new digest.
	settings2 := []byte(`{"note":"second"}`)
	writeSettings(t, plugins, "newest-binary-version.json", settings2)
	waitSettings(t, ts, fmt.Sprintf("%x", sha256.Sum256(settings2)))

	// Replaying the module on its own decisions agrees with them.
	code, out, errOut = runCLI(t, "plugin", "replay", newestPath, "--server", ts.URL, "--lease", "kube-system/"+lease, "-o", "json")
	var own struct {
		Decisions []struct {
			Verdict, RecordedBy string
		}
	}
	if err := json.Unmarshal([]byte(out), &own); err != nil {
		t.Fatalf("replay -o json: %v\n%s%s", err, out, errOut)
	}
	mine := 0
	for _, dd := range own.Decisions {
		if strings.HasPrefix(dd.RecordedBy, newestStrategy+"@") {
			mine++
			if dd.Verdict != "agree" {
				t.Errorf("replay of the module on its own decision: %+v\n%s", dd, out)
			}
		}
	}
	if mine == 0 {
		t.Errorf("no decision of the module replayed:\n%s%s", out, errOut)
	}
}

// writeSettings writes a settings file the way installPlugin writes a
// module: a dot name renamed into place.
func writeSettings(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// waitSettings waits until the newest-binary module serves with the
// settings of digest sum.
func waitSettings(t *testing.T, ts *testServer, sum string) {
	t.Helper()
	eventually(t, 15*time.Second, "module serving with settings "+sum, func() (bool, string) {
		var st struct{ Modules []settingsStatus }
		uiGet(t, ts, "/ui/api/v1/system", &st)
		for _, m := range st.Modules {
			if m.Name == newestStrategy && !m.Builtin && m.Active && m.SettingsSHA256 == sum {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", st.Modules)
	})
}
