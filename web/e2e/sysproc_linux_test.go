package e2e

import "syscall"

// childSysProcAttr kills a server child with SIGKILL if the test process
// dies first (a test timeout, a crash), so that no server outlives it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
