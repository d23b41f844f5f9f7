package sdnotify

import (
	"fmt"
	"os"
)

// WriteReadyFile writes url and a newline to path (serve --ready-file: the
// same signal as READY=1 for a parent process that is not systemd) atomically (through a
// temporary file and a rename), so that a parent polling for the file never
// reads it half-written.
func WriteReadyFile(path, url string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}
