// Command size prints where the bytes of a leasehold binary go: the size of
// each ELF section that is stored in the file, then the symbols' sizes summed
// by module and by package (text, read-only data and initialised data; BSS is
// left out since it takes no bytes in the file: crypto/internal/fips140/drbg's
// 32 MiB buffer is BSS, for example).
//
// It reads the symbol table, so give it an unstripped build (no -s -w); the
// stripped binary is that file without .symtab, .strtab and the DWARF
// sections, so the sizes here are the stripped binary's. docs/size.sh builds
// both and runs this.
//
//	go run ./.ci/size [-packages N] [-modules N] unstripped-binary
//
// Not every byte belongs to a package: the pcln table (function names, line
// tables, stack maps: about 0.75 bytes per byte of code), type descriptors,
// itabs and string data are listed under their section. The pcln table grows
// with the code, so a package's cost in the stripped binary is roughly
// 1.7 times its text.
package main

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

func main() {
	nPkgs := flag.Int("packages", 40, "how many packages to list (0: all)")
	nMods := flag.Int("modules", 0, "how many modules to list (0: all)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go run ./.ci/size [-packages N] [-modules N] unstripped-binary")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *nPkgs, *nMods); err != nil {
		fmt.Fprintln(os.Stderr, "size:", err)
		os.Exit(1)
	}
}

type sizes struct{ text, rodata, data uint64 }

func (s sizes) total() uint64 { return s.text + s.rodata + s.data }

func run(path string, nPkgs, nMods int) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s has no symbol table (build it without -ldflags=-s): %w", path, err)
	}
	var modules []string
	if bi, err := buildinfo.ReadFile(path); err == nil {
		modules = append(modules, bi.Main.Path)
		for _, d := range bi.Deps {
			modules = append(modules, d.Path)
		}
	}
	// Longest module path first, so that a nested module wins over its parent.
	slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(len(b), len(a)) })

	// The sections the stripped binary keeps.
	var fileBytes uint64
	fmt.Printf("%-22s %12s\n", "section", "bytes")
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		fileBytes += s.Size
		fmt.Printf("%-22s %12d %6.2f MiB\n", s.Name, s.Size, mib(s.Size))
	}
	fmt.Printf("%-22s %12d %6.2f MiB (stripped binary: this plus headers and alignment)\n\n", "loaded sections", fileBytes, mib(fileBytes))

	byPkg := map[string]*sizes{}
	byMod := map[string]*sizes{}
	var attributed uint64
	for _, sym := range syms {
		if sym.Size == 0 || int(sym.Section) <= 0 || int(sym.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[sym.Section]
		if sec.Type == elf.SHT_NOBITS || sec.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		pkg := packageOf(sym.Name)
		if pkg == "" {
			continue
		}
		// The linker escapes a dot in a path's last element: gopkg.in/inf%2ev0.
		if p, err := url.PathUnescape(pkg); err == nil {
			pkg = p
		}
		add := func(m map[string]*sizes, k string) {
			s := m[k]
			if s == nil {
				s = &sizes{}
				m[k] = s
			}
			switch {
			case sec.Flags&elf.SHF_EXECINSTR != 0:
				s.text += sym.Size
			case sec.Flags&elf.SHF_WRITE == 0:
				s.rodata += sym.Size
			default:
				s.data += sym.Size
			}
		}
		add(byPkg, pkg)
		add(byMod, moduleOf(pkg, modules))
		attributed += sym.Size
	}
	fmt.Printf("by module (text + rodata + data of named symbols; %.2f MiB of %.2f MiB attributed):\n", mib(attributed), mib(fileBytes))
	printTable(byMod, nMods)
	fmt.Printf("\nby package:\n")
	printTable(byPkg, nPkgs)
	return nil
}

func printTable(m map[string]*sizes, n int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b].total(), m[a].total()), cmp.Compare(a, b))
	})
	if n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	fmt.Printf("%10s %10s %10s %10s  %s\n", "KiB", "text", "rodata", "data", "name")
	for _, k := range keys {
		s := m[k]
		fmt.Printf("%10.0f %10d %10d %10d  %s\n", float64(s.total())/1024, s.text, s.rodata, s.data, k)
	}
}

// packageOf returns the import path a symbol belongs to, or "" for linker
// bookkeeping (runtime.* tables are runtime's).
func packageOf(name string) string {
	switch {
	case strings.HasPrefix(name, "go:itab."), strings.HasPrefix(name, "go:string."),
		strings.HasPrefix(name, "go:func."), strings.HasPrefix(name, "go:"):
		return "(go: " + strings.SplitN(strings.TrimPrefix(name, "go:"), ".", 2)[0] + ")"
	case strings.HasPrefix(name, "type:"):
		// type:.eq.k8s.io/api/core/v1.PodSpec, type:*, type:.namedata.*
		rest := strings.TrimPrefix(name, "type:")
		for _, p := range []string{".eq.", ".hash.", "*"} {
			rest = strings.TrimPrefix(rest, p)
		}
		if p := pathPrefix(rest); p != "" {
			return p
		}
		return "(type descriptors)"
	}
	if p := pathPrefix(name); p != "" {
		return p
	}
	return "(other)"
}

// pathPrefix cuts "k8s.io/api/core/v1.(*Pod).Marshal" to "k8s.io/api/core/v1".
func pathPrefix(name string) string {
	if name == "" || strings.HasPrefix(name, "struct") || strings.HasPrefix(name, "[") ||
		strings.HasPrefix(name, "go.shape") || strings.HasPrefix(name, "func(") {
		return ""
	}
	slash := strings.LastIndexByte(name, '/')
	if i := strings.IndexAny(name, "[("); i >= 0 && i < slash {
		// A generic instantiation or method value whose arguments hold slashes.
		slash = strings.LastIndexByte(name[:i], '/')
	}
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	return name[:slash+1+dot]
}

func moduleOf(pkg string, modules []string) string {
	if strings.HasPrefix(pkg, "(") {
		return pkg
	}
	for _, m := range modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	first, _, _ := strings.Cut(pkg, "/")
	if !strings.Contains(first, ".") {
		return "std"
	}
	return "(unknown module) " + pkg
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
