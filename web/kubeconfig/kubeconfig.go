package kubeconfig

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Spec is what a generated kubeconfig holds. File contents are
// embedded (the *-data fields), so the kubeconfig is self-contained.
type Spec struct {
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

// Render renders spec as YAML or JSON (format "yaml" or "json").
// Empty names default to "leasehold", an empty namespace to "default".
func Render(spec Spec, format string) ([]byte, error) {
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

// Write writes content to path with mode 0600, atomically (a
// reader never sees a half-written file).
func Write(path string, content []byte) error {
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
