package lease

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// kubeconfigFile is the subset of a kubeconfig file (clientcmd's v1 Config)
// that a lease client needs. Unknown fields are ignored, so any kubeconfig
// kubectl reads parses here.
type kubeconfigFile struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData string `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
			TLSServerName            string `json:"tls-server-name"`
		} `json:"cluster"`
	} `json:"clusters"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster   string `json:"cluster"`
			User      string `json:"user"`
			Namespace string `json:"namespace"`
		} `json:"context"`
	} `json:"contexts"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData string `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         string `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// LoadKubeconfig reads the kubeconfig at path and returns the Config of
// context contextName (the current context when empty). Relative file
// references are resolved against the kubeconfig's directory, as kubectl
// does. Exec and auth-provider plugins are not supported.
func LoadKubeconfig(path, contextName string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read kubeconfig: %w", err)
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return Config{}, fmt.Errorf("parse kubeconfig %s: %w", path, err)
	}
	if contextName == "" {
		contextName = kc.CurrentContext
	}
	if contextName == "" {
		return Config{}, fmt.Errorf("kubeconfig %s: no current-context and no context given", path)
	}
	var cfg Config
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == contextName {
			clusterName, userName, cfg.Namespace = c.Context.Cluster, c.Context.User, c.Context.Namespace
			found = true
			break
		}
	}
	if !found {
		return Config{}, fmt.Errorf("kubeconfig %s: context %q not found", path, contextName)
	}
	dir := filepath.Dir(path)
	resolve := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		cfg.Server = c.Cluster.Server
		cfg.Insecure = c.Cluster.InsecureSkipTLSVerify
		cfg.TLSServerName = c.Cluster.TLSServerName
		if cfg.CAData, err = fileOrData(resolve(c.Cluster.CertificateAuthority), c.Cluster.CertificateAuthorityData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: cluster %q: certificate authority: %w", path, clusterName, err)
		}
		break
	}
	if !found {
		return Config{}, fmt.Errorf("kubeconfig %s: cluster %q not found", path, clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		cfg.BearerToken = u.User.Token
		if cfg.BearerToken == "" && u.User.TokenFile != "" {
			tok, err := os.ReadFile(resolve(u.User.TokenFile))
			if err != nil {
				return Config{}, fmt.Errorf("kubeconfig %s: user %q: token file: %w", path, userName, err)
			}
			cfg.BearerToken = string(trimSpace(tok))
		}
		if cfg.CertData, err = fileOrData(resolve(u.User.ClientCertificate), u.User.ClientCertificateData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %q: client certificate: %w", path, userName, err)
		}
		if cfg.KeyData, err = fileOrData(resolve(u.User.ClientKey), u.User.ClientKeyData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %q: client key: %w", path, userName, err)
		}
		break
	}
	if cfg.Server == "" {
		return Config{}, fmt.Errorf("kubeconfig %s: cluster %q has no server", path, clusterName)
	}
	return cfg, nil
}

// fileOrData returns the PEM bytes of a kubeconfig "x"/"x-data" pair; the
// data (base64, as kubeconfig stores it) wins, as in clientcmd.
func fileOrData(file, data string) ([]byte, error) {
	if data != "" {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("decode base64 data: %w", err)
		}
		return b, nil
	}
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New(file + " is empty")
	}
	return b, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
