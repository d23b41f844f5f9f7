//go:build unix

package run

import (
	"errors"
	"os"
	"syscall"
)

// forwarded are the signals leasehold run passes on to the child's group;
// SIGTERM and SIGINT also start a shutdown.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

func isShutdownSignal(s os.Signal) bool { return s == syscall.SIGTERM || s == syscall.SIGINT }

var sigTerm, sigKill os.Signal = syscall.SIGTERM, syscall.SIGKILL

// signalGroup sends sig to every process in the child's group.
func (c *child) signalGroup(sig os.Signal) error {
	err := syscall.Kill(-c.pid, sig.(syscall.Signal))
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
