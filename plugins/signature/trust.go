package signature

import (
	"fmt"
	"log/slog"
	"strings"
)

// LoadTrust loads serve's --plugin-trust-keys (files). Without any, every
// module of the plugins directory dir is loaded, as before signing
// existed; a server exposed beyond loopback (listening on listen) says so
// at start, since whoever can write that directory then decides every
// coordinated election.
func LoadTrust(files []string, dir string, exposed bool, listen string, logger *slog.Logger) (*Keyring, error) {
	if len(files) == 0 {
		if exposed {
			logger.Warn("Strategy modules are not verified: any .wasm in the plugins directory is loaded; sign modules and pass --plugin-trust-keys",
				"plugins_dir", dir, "listen", listen)
		}
		return nil, nil
	}
	trust, err := LoadKeyring(files...)
	if err != nil {
		return nil, fmt.Errorf("--plugin-trust-keys: %w", err)
	}
	logger.Info("Strategy modules must be signed", "plugins_dir", dir, "trusted_key_ids", strings.Join(trust.IDs(), ","))
	return trust, nil
}
