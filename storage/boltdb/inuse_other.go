//go:build !unix

package boltdb

import "time"

// waitUnlocked: without flock, bbolt's own open reports a locked file.
func waitUnlocked(string, time.Duration) error { return nil }
