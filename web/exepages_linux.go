package web

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseExecutablePages drops this process's mappings of its own
// executable's read-only pages (code and constant data), as the kernel's
// page reclaim would under memory pressure. A Go binary with the
// Kubernetes machinery maps about 27 MB of them at start-up, most touched
// only once by package initialisation and the kernel's 64 KiB fault-around;
// they counted as resident for as long as the process lived. The pages stay
// in the page cache (this is MADV_DONTNEED on a clean private file
// mapping: nothing is lost, nothing is written), and the code that runs
// again is mapped back by minor faults, without disk reads. Only mappings
// with no private anonymous (copy-on-write) pages are touched, so a
// relocated read-only segment of a dynamically linked build is left alone.
func releaseExecutablePages() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	type mapping struct {
		lo, hi uintptr
		ok     bool
	}
	var maps []mapping
	cur := -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = -1
			if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
				continue
			}
			lo, hi, _ := strings.Cut(fields[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			maps = append(maps, mapping{lo: uintptr(l), hi: uintptr(h), ok: true})
			cur = len(maps) - 1
			continue
		}
		if cur >= 0 && len(fields) >= 2 && fields[0] == "Anonymous:" && fields[1] != "0" {
			maps[cur].ok = false
		}
	}
	for _, m := range maps {
		if m.ok {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, m.lo, m.hi-m.lo, syscall.MADV_DONTNEED)
		}
	}
}
