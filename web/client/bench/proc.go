package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// Linux fixes it at 100 on every architecture Go supports.
const clockTicks = 100

// procCPU returns the user plus system CPU time a process has used, from
// fields 14 and 15 of /proc/<pid>/stat (pid 0 means this process).
func procCPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("read CPU time: malformed %s", path)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("read CPU time: short %s", path)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read CPU time: malformed %s", path)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procStatusBytes returns a kB field of /proc/<pid>/status (VmRSS: the
// resident set size, VmHWM: its peak) in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read RSS: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read RSS: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read RSS: no %s in %s", field, path)
}

// procThreads returns a process's thread count, a cheap proxy for leaks
// when goroutines are not exposed.
func procThreads(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
