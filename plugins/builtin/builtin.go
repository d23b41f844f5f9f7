package builtin

import _ "embed"

// The committed oldest.wasm is rebuilt by `go generate ./plugins/builtin`
// (clang and lld from Debian, no libc). The tests rebuild it from source and
// hold both the rebuilt and the embedded module to the native oracle
// (behaviour, not bytes: another clang may emit other bytes).
//
//go:generate clang --target=wasm32 -O2 -ffreestanding -nostdlib -msimd128 -mbulk-memory -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -Wl,-z,stack-size=16384 -I../sdk/c -o oldest.wasm oldest/oldest.c

//go:embed oldest.wasm
var oldestWasm []byte

// Module is one embedded strategy module.
type Module struct {
	File string // source file name, for status pages
	Wasm []byte
}

// Modules returns the embedded modules. The slices are shared: do not
// modify them.
func Modules() []Module {
	return []Module{{File: "oldest.wasm", Wasm: oldestWasm}}
}

// BuildCommand is the go:generate command above, split into arguments for
// tests that rebuild the module from source (run in this directory).
var BuildCommand = []string{"clang", "--target=wasm32", "-O2", "-ffreestanding", "-nostdlib", "-msimd128",
	"-mbulk-memory", "-Wall", "-Wextra", "-Werror", "-Wl,--no-entry", "-Wl,--strip-all", "-Wl,-z,stack-size=16384", "-I../sdk/c"}
