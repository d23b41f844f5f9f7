package lease

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/kubeconfig"
)

// KubeconfigCommand is "leasehold kubeconfig": print a kubeconfig for a
// server, for clients on other machines.
var KubeconfigCommand = cli.Command{
	Name:     "kubeconfig",
	Synopsis: kubeconfigSynopsis,
	Summary:  "print a kubeconfig for a server (-o yaml|json)",
	Run:      kubeconfigCommand,
}

// HealthcheckCommand is "leasehold healthcheck": exit 0 when the local
// server is ready.
var HealthcheckCommand = cli.Command{
	Name:     "healthcheck",
	Synopsis: healthcheckSynopsis,
	Summary:  "exit 0 when the local server is ready (for Docker HEALTHCHECK)",
	Run:      healthcheckCommand,
}

const kubeconfigSynopsis = "kubeconfig --server URL [--token-file F | --client-certificate F --client-key F]"

const kubeconfigAbout = `Prints a kubeconfig (YAML, or JSON with -o json) for kubectl and client-go
on other machines: the server's URL, the CA that verifies it, and a bearer
token or a client certificate. The server writes one for local clients
itself (<data-dir>/kubeconfig).`

func kubeconfigCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(kubeconfigSynopsis, kubeconfigAbout, stderr)
	var spec kubeconfig.Spec
	var caFile, certFile, keyFile, tokenFile, output string
	fs.StringVar(&spec.Server, "server", "", "server `URL`, e.g. https://lease-server:8443 (required)")
	fs.StringVar(&spec.Token, "token", "", "bearer `token` (prefer --token-file: command lines are visible to other users)")
	fs.StringVar(&tokenFile, "token-file", "", "`file` holding the bearer token")
	fs.StringVar(&certFile, "client-certificate", "", "PEM client certificate `file` (with --client-key)")
	fs.StringVar(&keyFile, "client-key", "", "PEM client key `file`")
	fs.StringVar(&caFile, "certificate-authority", "", "PEM CA `file` that verifies the server (e.g. <data-dir>/pki/ca.crt)")
	fs.BoolVar(&spec.Insecure, "insecure-skip-tls-verify", false, "do not verify the server's certificate (testing only)")
	fs.StringVar(&spec.Namespace, "namespace", "default", "the context's `namespace`")
	fs.StringVar(&spec.User, "user", "leasehold", "the kubeconfig's user entry `name`")
	fs.StringVar(&output, "output", "yaml", "output `format`: yaml or json")
	fs.Alias("n", "namespace")
	fs.Alias("o", "output")
	err := fs.ParseNoArgs(args)
	switch {
	case err != nil:
	case spec.Server == "":
		err = fmt.Errorf("--server is required")
	case output != "yaml" && output != "json":
		err = fmt.Errorf("invalid -o %q: use yaml or json", output)
	case spec.Token != "" && tokenFile != "":
		err = fmt.Errorf("--token and --token-file exclude each other")
	case (certFile == "") != (keyFile == ""):
		err = fmt.Errorf("--client-certificate and --client-key go together")
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	read := func(path string) []byte {
		if path == "" || err != nil {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(path)
		return b
	}
	if tokenFile != "" {
		spec.Token = strings.TrimRight(string(read(tokenFile)), "\r\n ")
	}
	spec.CAPEM = read(caFile)
	spec.CertPEM, spec.KeyPEM = read(certFile), read(keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return cli.ExitFailure
	}
	out, err := kubeconfig.Render(spec, output)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return cli.ExitFailure
	}
	_, _ = stdout.Write(out)
	return cli.ExitOK
}

const healthcheckSynopsis = "healthcheck [--url URL]"

const healthcheckAbout = `GETs /readyz on the local server and exits 0 when it answers 200, 1 otherwise.
Distroless images have no curl, so the Docker HEALTHCHECK runs this. Without
--url the address comes from --listen (LEASEHOLD_LISTEN, as serve reads it;
without either, where the last serve on --data-dir listened);
HTTPS is tried first, then plain HTTP. The server is verified with
<data-dir>/pki/ca.crt when it exists.`

func healthcheckCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(healthcheckSynopsis, healthcheckAbout, stderr)
	dir := fs.String("data-dir", datadir.Default, "the server's data `directory`")
	listen := fs.String("listen", "127.0.0.1:8080", "the server's `address`")
	url := fs.String("url", "", "full `URL` to probe instead, e.g. https://127.0.0.1:8443/readyz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if code, stop := fs.Stop(fs.ParseNoArgs(args)); stop {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if !flagGiven(fs, "listen") {
		// Where serve listens without --listen: the data directory's record.
		if rec, err := datadir.At(*dir).LoadAddresses(); err == nil && rec.Listen != "" && !strings.HasSuffix(rec.Listen, ":0") {
			*listen = rec.Listen
		}
	}
	urls := []string{*url}
	if *url == "" {
		var err error
		if urls, err = ReadyzURLs(*listen); err != nil {
			fmt.Fprintf(stderr, "leasehold healthcheck: invalid --listen %q: %v\n", *listen, err)
			return cli.ExitUsage
		}
	}
	if err := ProbeReady(ctx, urls, datadir.At(*dir).TLSCA()); err != nil {
		fmt.Fprintf(stderr, "leasehold healthcheck: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintln(stdout, "ok")
	return cli.ExitOK
}

// flagGiven reports whether the flag called name was given on the command
// line or by its environment twin.
func flagGiven(fs *cli.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	_, env := os.LookupEnv(cli.EnvName(name))
	return given || env
}

// DownloadBackup streams a consistent copy of the database from the
// server the kubeconfig at path names (GET /leasehold/v1/backup) to w. It
// returns the bytes written, the server's URL, and the revision a cluster
// member's snapshot must reach (clusterapi.BarrierRevisionHeader; 0 from
// a single device).
func DownloadBackup(ctx context.Context, path string, w io.Writer) (n int64, server string, barrier int64, err error) {
	cfg, err := LoadKubeconfig(path, "")
	if err != nil {
		return 0, "", 0, err
	}
	c, err := New(cfg)
	if err != nil {
		return 0, "", 0, err
	}
	n, h, err := c.DownloadWithHeader(ctx, "/leasehold/v1/backup", w)
	if err != nil {
		return n, c.Server(), 0, err
	}
	if v := h.Get(clusterapi.BarrierRevisionHeader); v != "" {
		if barrier, err = strconv.ParseInt(v, 10, 64); err != nil || barrier < 0 {
			return n, c.Server(), 0, fmt.Errorf("the server's %s header %q is not a revision", clusterapi.BarrierRevisionHeader, v)
		}
	}
	return n, c.Server(), barrier, nil
}

// ListSnapshots asks the server the kubeconfig file at path names for its
// scheduled snapshots ("leasehold backup list --kubeconfig").
func ListSnapshots(ctx context.Context, path string) (clusterapi.Snapshots, string, error) {
	var st clusterapi.Snapshots
	cfg, err := LoadKubeconfig(path, "")
	if err != nil {
		return st, "", err
	}
	c, err := New(cfg)
	if err != nil {
		return st, "", err
	}
	if err := c.GetJSON(ctx, clusterapi.SnapshotsPath, &st); err != nil {
		if IsNotFound(err) {
			return st, c.Server(), fmt.Errorf("the server at %s takes no scheduled snapshots (--snapshot-interval 0, or it is a replica)", c.Server())
		}
		return st, c.Server(), err
	}
	return st, c.Server(), nil
}
