package run

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// child is one run of COMMAND in its own process group.
type child struct {
	pid  int
	done chan int // the exit code (128+N for signal N), once
}

// childSpec is what every start of COMMAND shares.
type childSpec struct {
	argv           []string
	env            []string
	stdout, stderr io.Writer
}

// start runs COMMAND. The goroutine that forks stays locked to its OS
// thread until the child is reaped: PR_SET_PDEATHSIG fires when the forking
// thread exits, and the Go runtime may retire unlocked threads.
func (s childSpec) start() (*child, error) {
	c := &child{done: make(chan int, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with the goroutine, after Wait.
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Env = s.env
		cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
		cmd.Stdin = childStdin()
		cmd.SysProcAttr = sysProcAttr()
		// A grandchild holding our output pipe must not keep Wait from
		// reporting the child's exit.
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pid = cmd.Process.Pid
		started <- nil
		err := cmd.Wait()
		code := exitCode(cmd.ProcessState)
		if cmd.ProcessState == nil && err != nil {
			code = 1
		}
		c.done <- code
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// startErrorCode maps a failure to start COMMAND to the shell's codes.
func startErrorCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}

// childStdin passes our stdin through unless it is a terminal: the child
// runs in a background process group and would be stopped (SIGTTIN) by
// reading from the terminal.
func childStdin() *os.File {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return os.Stdin
}
