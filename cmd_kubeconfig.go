package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// kubeconfigSpec is what a generated kubeconfig holds. File contents are
// embedded (the *-data fields), so the kubeconfig is self-contained.
type kubeconfigSpec struct {
	Server             string
	CAPEM              []byte
	Insecure           bool
	Token              string
	CertPEM, KeyPEM    []byte
	Namespace          string
	Cluster, User, Ctx string
}

// The clientcmd v1 Config fields a generated kubeconfig uses.
type (
	kcFile struct {
		APIVersion     string      `json:"apiVersion"`
		Kind           string      `json:"kind"`
		Clusters       []kcCluster `json:"clusters"`
		Contexts       []kcContext `json:"contexts"`
		CurrentContext string      `json:"current-context"`
		Users          []kcUser    `json:"users"`
		Preferences    struct{}    `json:"preferences"`
	}
	kcCluster struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthorityData string `json:"certificate-authority-data,omitempty"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
		} `json:"cluster"`
	}
	kcContext struct {
		Name    string `json:"name"`
		Context struct {
			Cluster   string `json:"cluster"`
			User      string `json:"user"`
			Namespace string `json:"namespace,omitempty"`
		} `json:"context"`
	}
	kcUser struct {
		Name string `json:"name"`
		User struct {
			Token                 string `json:"token,omitempty"`
			ClientCertificateData string `json:"client-certificate-data,omitempty"`
			ClientKeyData         string `json:"client-key-data,omitempty"`
		} `json:"user"`
	}
)

// renderKubeconfig renders spec as YAML or JSON (format "yaml" or "json").
func renderKubeconfig(spec kubeconfigSpec, format string) ([]byte, error) {
	name := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	f := kcFile{APIVersion: "v1", Kind: "Config"}
	var c kcCluster
	c.Name = name(spec.Cluster, "leasehold")
	c.Cluster.Server = spec.Server
	c.Cluster.InsecureSkipTLSVerify = spec.Insecure
	if len(spec.CAPEM) > 0 {
		c.Cluster.CertificateAuthorityData = base64.StdEncoding.EncodeToString(spec.CAPEM)
	}
	var u kcUser
	u.Name = name(spec.User, "leasehold")
	u.User.Token = spec.Token
	if len(spec.CertPEM) > 0 {
		u.User.ClientCertificateData = base64.StdEncoding.EncodeToString(spec.CertPEM)
		u.User.ClientKeyData = base64.StdEncoding.EncodeToString(spec.KeyPEM)
	}
	var x kcContext
	x.Name = name(spec.Ctx, "leasehold")
	x.Context.Cluster, x.Context.User, x.Context.Namespace = c.Name, u.Name, name(spec.Namespace, "default")
	f.Clusters, f.Users, f.Contexts, f.CurrentContext = []kcCluster{c}, []kcUser{u}, []kcContext{x}, x.Name
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	if format == "json" {
		return append(out, '\n'), nil
	}
	y, err := yaml.JSONToYAML(out)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return y, nil
}

// writeKubeconfig writes content to path with mode 0600, atomically (a
// reader never sees a half-written file).
func writeKubeconfig(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// runKubeconfig implements "leasehold kubeconfig": print a kubeconfig for
// a server, for clients on other machines.
func runKubeconfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("leasehold kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec kubeconfigSpec
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
	fs.StringVar(&output, "o", "yaml", "output `format`: yaml or json")
	fs.StringVar(&output, "output", "yaml", "output `format`: yaml or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "leasehold kubeconfig: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected arguments: %q", fs.Args())
	case spec.Server == "":
		return fail("--server is required")
	case output != "yaml" && output != "json":
		return fail("invalid -o %q: use yaml or json", output)
	case spec.Token != "" && tokenFile != "":
		return fail("--token and --token-file exclude each other")
	case (certFile == "") != (keyFile == ""):
		return fail("--client-certificate and --client-key go together")
	}
	var err error
	read := func(path string) []byte {
		if path == "" || err != nil {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(path)
		return b
	}
	if tokenFile != "" {
		spec.Token = string(trimNewline(read(tokenFile)))
	}
	spec.CAPEM = read(caFile)
	spec.CertPEM, spec.KeyPEM = read(certFile), read(keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return 1
	}
	out, err := renderKubeconfig(spec, output)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
