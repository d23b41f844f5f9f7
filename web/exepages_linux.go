package web

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"sync"
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
// again is mapped back by minor faults, without disk reads.
//
// Private copy-on-write pages would be lost, so they are excluded twice:
// a position-independent or dynamically linked build (whose read-only
// segments may hold relocated data, PT_GNU_RELRO) releases only its code
// mappings, and any mapping with anonymous or swapped-out pages is left
// alone. The static build of the Dockerfile releases code and constant
// data.
func releaseExecutablePages() {
	self := executable()
	if !self.ok {
		return
	}
	exe, codeOnly := self.path, self.codeOnly
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
			if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") ||
				codeOnly && !strings.Contains(fields[1], "x") {
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
		if cur >= 0 && len(fields) >= 2 && (fields[0] == "Anonymous:" || fields[0] == "Swap:") && fields[1] != "0" {
			maps[cur].ok = false
		}
	}
	for _, m := range maps {
		if m.ok {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, m.lo, m.hi-m.lo, syscall.MADV_DONTNEED)
		}
	}
}

// exeInfo is what releaseExecutablePages needs to know of the binary.
type exeInfo struct {
	path         string
	codeOnly, ok bool // see exeLayout
}

// executable is the running binary's path and layout (exeLayout), read
// once: neither changes while the process runs.
var executable = sync.OnceValue(func() (x exeInfo) {
	path, err := os.Executable()
	if err != nil {
		return x
	}
	x.path = path
	x.codeOnly, x.ok = exeLayout(path)
	return x
})

// ELF constants exeLayout reads (elf.h); debug/elf would add a package to
// the binary for three fields.
const (
	elfTypeDyn     = 3          // ET_DYN: position-independent
	elfProgRelro   = 0x6474e552 // PT_GNU_RELRO
	elfHeaderBytes = 64
)

// exeLayout reads the executable's ELF header: codeOnly is true when it is
// position-independent or has a RELRO segment (read-only data relocated at
// start-up), ok false when it is not a 64-bit little-endian ELF file.
func exeLayout(path string) (codeOnly, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return false, false
	}
	defer f.Close()
	var h [elfHeaderBytes]byte
	if _, err := f.ReadAt(h[:], 0); err != nil ||
		string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 { // ELFCLASS64, ELFDATA2LSB
		return false, false
	}
	le := binary.LittleEndian
	if le.Uint16(h[16:]) == elfTypeDyn {
		return true, true
	}
	phoff, phentsize, phnum := le.Uint64(h[32:]), int64(le.Uint16(h[54:])), int64(le.Uint16(h[56:]))
	if phentsize < 4 || phnum > 256 {
		return false, false
	}
	ph := make([]byte, phentsize*phnum)
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return false, false
	}
	for i := int64(0); i < phnum; i++ {
		if le.Uint32(ph[i*phentsize:]) == elfProgRelro {
			return true, true
		}
	}
	return false, true
}
