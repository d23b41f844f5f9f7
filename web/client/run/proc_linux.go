package run

import "syscall"

// sysProcAttr puts the child in its own process group (so that signals
// reach its whole tree, and a terminal's Ctrl-C reaches only us) and has
// the kernel SIGKILL it if leasehold run dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
