package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
)

// PluginListCommand is "leasehold plugin list": the strategy modules a
// server has seen, with their state, as its web UI's system page shows
// them. main adds it to the plugin command (plugins/host runs modules
// locally and may not import HTTP clients).
var PluginListCommand = cli.Command{
	Name:     "list",
	Synopsis: pluginListSynopsis,
	Summary:  "list a server's strategy modules: name, ABI, sha256, signer, state, calls, errors, latency",
	Run:      pluginListCommand,
}

const pluginListSynopsis = "plugin list [--server URL] [--kubeconfig F] [-o table|json]"

const pluginListAbout = `Lists every strategy module the server has seen: the embedded built-ins and
each file of its plugins directory, with name, version, lease-strategy ABI
version, sha256 (first 12 digits in the table), the key id that signed it
(servers started with --plugin-trust-keys), state ("loaded", or "refused:
REASON" for a file that never loaded), decision calls, errors and latency
p50/p99. A file whose newer content was refused while its previous version
keeps serving shows a second line with the refused content's sha256.

It reads GET /ui/api/v1/system, authenticated and authorized as the web UI is.
-o json prints the server's module objects as they are.`

// moduleView is what the list shows of one module of the system status:
// the client reads the wire, not the server's Go types.
type moduleView struct {
	Name          string        `json:"name"`
	File          string        `json:"file"`
	SHA256        string        `json:"sha256"`
	Version       string        `json:"version"`
	Builtin       bool          `json:"builtin"`
	Active        bool          `json:"active"`
	Calls         uint64        `json:"calls"`
	Errors        uint64        `json:"errors"`
	LatencyP50    time.Duration `json:"latencyP50"`
	LatencyP99    time.Duration `json:"latencyP99"`
	LoadError     string        `json:"loadError"`
	ABIVersion    string        `json:"abiVersion"`
	SignerKeyID   string        `json:"signerKeyId"`
	State         string        `json:"state"`
	RefusedSHA256 string        `json:"refusedSha256"`
}

func pluginListCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(pluginListSynopsis, pluginListAbout, stderr)
	var conn connFlags
	conn.registerServer(fs)
	output := fs.String("output", "table", "output format: `table` or json")
	fs.Alias("o", "output")
	err := fs.ParseNoArgs(args)
	if err == nil && *output != "table" && *output != "json" {
		err = fmt.Errorf("invalid --output %q: use table or json", *output)
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	cl, _, err := conn.client("leasehold-plugin-list", 10*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin list: %v\n", err)
		return cli.ExitFailure
	}
	var system struct {
		Modules []json.RawMessage `json:"modules"`
	}
	if err := cl.GetJSON(ctx, "/ui/api/v1/system", &system); err != nil {
		fmt.Fprintf(stderr, "leasehold plugin list: %s: %v\n", cl.Server(), err)
		return cli.ExitFailure
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if system.Modules == nil {
			system.Modules = []json.RawMessage{}
		}
		_ = enc.Encode(system.Modules)
		return cli.ExitOK
	}
	mods := make([]moduleView, 0, len(system.Modules))
	for _, raw := range system.Modules {
		var m moduleView
		if err := json.Unmarshal(raw, &m); err != nil {
			fmt.Fprintf(stderr, "leasehold plugin list: %s: unexpected module status: %v\n", cl.Server(), err)
			return cli.ExitFailure
		}
		mods = append(mods, m)
	}
	writeModuleTable(stdout, mods)
	return cli.ExitOK
}

// writeModuleTable prints one line per module, and one more per file
// whose newer content was refused while its previous version serves.
func writeModuleTable(w io.Writer, mods []moduleView) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tABI\tSHA256\tSIGNER\tFILE\tSTATE\tCALLS\tERRORS\tP50\tP99")
	for _, m := range mods {
		name, file, signer := m.Name, filepath.Base(m.File), m.SignerKeyID
		if name == "" {
			name = "-" // never loaded: a refused module is not run to ask its name
		}
		if m.Builtin {
			file, signer = "(built-in)", "(built-in)"
		}
		state := m.State
		if state == "" { // a server from before module states
			state = "loaded"
			if m.LoadError != "" && m.Name == "" {
				state = "refused: " + m.LoadError
			}
		}
		if m.State == "loaded" && !m.Active {
			state = "loaded (overridden)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", name, dash(m.Version), dash(m.ABIVersion),
			dash(shortSHA(m.SHA256)), dash(signer), file, oneLine(state), m.Calls, m.Errors,
			latency(m.LatencyP50, m.Calls), latency(m.LatencyP99, m.Calls))
		if m.RefusedSHA256 != "" && m.Name != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t%s\t%s\t-\t-\t-\t-\n", name, shortSHA(m.RefusedSHA256), file,
				oneLine("refused: "+m.LoadError+" (previous version serving)"))
		}
	}
	_ = tw.Flush()
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a multi-line error from breaking the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func latency(d time.Duration, calls uint64) string {
	if calls == 0 {
		return "-"
	}
	if d < time.Millisecond {
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	}
	return d.Round(100 * time.Microsecond).String()
}
