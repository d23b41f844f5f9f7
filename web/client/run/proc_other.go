//go:build !unix

package run

import (
	"errors"
	"os"
	"syscall"
)

// Process groups and POSIX signals are needed to supervise the child
// safely; elsewhere only the kill is available.
var forwarded = []os.Signal{os.Interrupt}

func isShutdownSignal(s os.Signal) bool { return s == os.Interrupt }

var sigTerm, sigKill os.Signal = os.Kill, os.Kill

func sysProcAttr() *syscall.SysProcAttr { return nil }

func (c *child) signalGroup(sig os.Signal) error {
	p, err := os.FindProcess(c.pid)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	return ps.ExitCode()
}
