//go:build unix && !linux

package run

import "syscall"

// sysProcAttr puts the child in its own process group. There is no
// parent-death signal outside Linux: a leasehold run killed with SIGKILL
// leaves its child running, so supervise it with a service manager.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
