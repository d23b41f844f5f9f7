package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/web/client/lease"
)

// Replayer runs a strategy module offline on a decision history document
// and prints the comparison (plugins/host.ReplayMain; main wires it in,
// since client tools may not import the WASM host). settings is a
// settings file to use instead of the recorded ones ("" for none), output
// "text" or "json"; it returns the exit status.
type Replayer func(ctx context.Context, module string, history []byte, settings, output string, stdout, stderr io.Writer) int

// PluginReplayCommand is "leasehold plugin replay": it fetches a server's
// recorded decisions (or reads a file saved earlier) and hands them to
// replay.
func PluginReplayCommand(replay Replayer) cli.Command {
	return cli.Command{
		Name:     "replay",
		Synopsis: pluginReplaySynopsis,
		Summary:  "run a module offline on a server's recorded decisions and show where it agrees or differs",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return pluginReplayCommand(ctx, replay, args, stdout, stderr)
		},
	}
}

const pluginReplaySynopsis = "plugin replay MODULE.wasm [--server URL] [--kubeconfig F] (--lease NS/NAME | --all) [--save FILE] [--settings F] [-o text|json]\n" +
	"plugin replay MODULE.wasm --from FILE [--settings F] [-o text|json]\n" +
	"plugin replay --save FILE [--server URL] (--lease NS/NAME | --all)"

const pluginReplayAbout = `Feeds the inputs of a server's recorded election decisions through
MODULE.wasm offline (the sandbox "plugin test" uses, with the server's
default decision deadline) and prints, decision by decision, whether its
answer agrees with the one recorded (action, ranking and preempt; the
reason is not compared) and who it would have made leader, then a summary.

The history comes from the server's decisions endpoint
(GET /ui/api/v1/namespaces/NS/leases/NAME/decisions, authenticated and
authorized as the web UI is) for one lease (--lease) or every lease (--all,
which lists leases first), or from a file (--from) that --save wrote. With
--save and no MODULE.wasm it only saves. Each decision sees the settings it
was made with unless --settings names another settings file (to try a
change). Records without an input (conflicts, records of older servers)
are skipped and counted.

Exit status: 0 when every replayed decision agrees, 3 when one differs or
the module failed on one, 1 when nothing could be replayed (2: usage).`

func pluginReplayCommand(ctx context.Context, replay Replayer, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(pluginReplaySynopsis, pluginReplayAbout, stderr)
	var conn connFlags
	conn.registerServer(fs)
	leaseRef := fs.String("lease", "", "the lease whose history to replay, `NS/NAME` (a bare NAME is in \"default\")")
	all := fs.Bool("all", false, "replay the history of every lease")
	from := fs.String("from", "", "replay the history saved in `file` (by --save) instead of asking a server")
	save := fs.String("save", "", "write the fetched history to `file`, for --from")
	settings := fs.String("settings", "", "settings `file` to decide with instead of the recorded settings")
	output := fs.String("output", "text", "output format: `text` or json")
	fs.Alias("o", "output")
	pos, err := fs.ParseInterspersed(args)
	module := ""
	switch {
	case err != nil:
	case len(pos) > 1:
		err = fmt.Errorf("expected one MODULE.wasm, got %q", pos)
	case len(pos) == 0 && *save == "":
		err = errors.New("expected MODULE.wasm")
	case *output != "text" && *output != "json":
		err = fmt.Errorf("invalid --output %q: use text or json", *output)
	case *from != "" && (*leaseRef != "" || *all || *save != "" || conn.Server != "" || conn.Kubeconfig != ""):
		err = errors.New("--from replays a saved file: it takes no --lease, --all, --save, --server or --kubeconfig")
	case *from == "" && (*leaseRef == "") == !*all:
		err = errors.New("give --lease NS/NAME or --all (or --from FILE)")
	default:
		if len(pos) == 1 {
			module = pos[0]
		}
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "leasehold plugin replay: %v\n", err)
		return cli.ExitFailure
	}
	var history []byte
	if *from != "" {
		if history, err = readHistoryFile(*from); err != nil {
			return fail(err)
		}
	} else {
		cl, _, err := conn.client("leasehold-plugin-replay", 30*time.Second)
		if err != nil {
			return fail(err)
		}
		if history, err = fetchHistory(ctx, cl, *leaseRef, *all); err != nil {
			return fail(fmt.Errorf("%s: %w", cl.Server(), err))
		}
		if *save != "" {
			if err := saveHistoryFile(*save, history); err != nil {
				return fail(err)
			}
			fmt.Fprintf(stderr, "leasehold plugin replay: saved the history to %s\n", *save)
		}
	}
	if module == "" {
		return cli.ExitOK
	}
	return replay(ctx, module, history, *settings, *output, stdout, stderr)
}

// maxHistoryFileBytes bounds what --from reads: far over what a server
// keeps (DefaultDecisionHistory records of up to a few hundred kB each,
// per lease), far under what would hurt the machine running the replay.
const maxHistoryFileBytes = 256 << 20

// readHistoryFile reads a file --save wrote, refusing one over
// maxHistoryFileBytes before reading it.
func readHistoryFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxHistoryFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit of a decision history", path, st.Size(), maxHistoryFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHistoryFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxHistoryFileBytes {
		return nil, fmt.Errorf("%s: over the %d-byte limit of a decision history", path, maxHistoryFileBytes)
	}
	return b, nil
}

// saveHistoryFile writes the history readable by its owner only (it holds
// the inputs of every decision: holder identities, lease names, settings),
// through a temporary file renamed into place, so that an existing file's
// wider mode is not kept either.
func saveHistoryFile(path string, history []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(history); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// leaseDecisions is one lease's part of the saved history document:
// the decisions endpoint's items, as they came.
type leaseDecisions struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Items     []json.RawMessage `json:"items"`
}

// fetchHistory builds the history document: the decision records of
// leaseRef, or of every lease the server lists.
func fetchHistory(ctx context.Context, cl *lease.Client, leaseRef string, all bool) ([]byte, error) {
	var refs [][2]string
	if all {
		var list struct {
			Items []struct {
				Metadata struct {
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := cl.GetJSON(ctx, "/apis/coordination.k8s.io/v1/leases", &list); err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		for _, it := range list.Items {
			refs = append(refs, [2]string{it.Metadata.Namespace, it.Metadata.Name})
		}
		sort.Slice(refs, func(i, j int) bool {
			return refs[i][0] < refs[j][0] || (refs[i][0] == refs[j][0] && refs[i][1] < refs[j][1])
		})
	} else {
		ns, name, err := parseLeaseRef(leaseRef)
		if err != nil {
			return nil, err
		}
		refs = append(refs, [2]string{ns, name})
	}
	doc := struct {
		Server string           `json:"server"`
		Leases []leaseDecisions `json:"leases"`
	}{Server: cl.Server(), Leases: []leaseDecisions{}}
	for _, ref := range refs {
		var body struct {
			Items []json.RawMessage `json:"items"`
		}
		path := "/ui/api/v1/namespaces/" + url.PathEscape(ref[0]) + "/leases/" + url.PathEscape(ref[1]) + "/decisions"
		if err := cl.GetJSON(ctx, path, &body); err != nil {
			return nil, fmt.Errorf("decisions of %s/%s: %w", ref[0], ref[1], err)
		}
		if all && len(body.Items) == 0 {
			continue // not a coordinated lease
		}
		if body.Items == nil {
			body.Items = []json.RawMessage{}
		}
		doc.Leases = append(doc.Leases, leaseDecisions{Namespace: ref[0], Name: ref[1], Items: body.Items})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseLeaseRef splits "NS/NAME"; a bare NAME is in "default".
func parseLeaseRef(ref string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		ns, name = "default", ref
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("invalid lease %q: use NS/NAME", ref)
	}
	return ns, name, nil
}
