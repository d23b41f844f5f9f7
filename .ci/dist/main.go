// Command dist builds leasehold's Debian packages with nfpm, goreleaser's
// maintained packager, from nfpm.yaml beside this file: `make dist` runs it
// once per architecture after building the static binaries.
//
// It is a module of its own so that the packager's dependencies never
// enter the server's go.mod or binary.
//
//	go run . -arch arm64 -version v1.2.3 -binary ../../dist/leasehold-linux-arm64 -out ../../dist/leasehold_1.2.3_arm64.deb
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the "deb" packager
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "dist: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	arch := fs.String("arch", "", "Go architecture: amd64, arm64 or arm (GOARM=7, Debian's armhf)")
	version := fs.String("version", "", "release version, e.g. v1.2.3 (from git describe)")
	binary := fs.String("binary", "", "the static leasehold binary for -arch")
	out := fs.String("out", "", "the .deb to write")
	config := fs.String("config", defaultConfig(), "nfpm configuration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *arch == "" || *version == "" || *binary == "" || *out == "" {
		return fmt.Errorf("-arch, -version, -binary and -out are required")
	}
	nfpmArch := *arch
	if nfpmArch == "arm" {
		nfpmArch = "arm7" // nfpm names GOARM in the arch; deb maps arm7 to armhf
	}
	root, err := filepath.Abs(filepath.Join(filepath.Dir(*config), "..", ".."))
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*binary)
	if err != nil {
		return err
	}
	outPath, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	configPath, err := filepath.Abs(*config)
	if err != nil {
		return err
	}
	// nfpm resolves relative sources against the working directory.
	if err := os.Chdir(root); err != nil {
		return err
	}
	*out = outPath
	env := map[string]string{"ARCH": nfpmArch, "VERSION": *version, "BINARY": bin}
	cfg, err := nfpm.ParseFileWithEnvMapping(configPath, func(k string) string { return env[k] })
	if err != nil {
		return fmt.Errorf("parse %s: %w", *config, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return err
	}
	// Every file, header and control member gets one time, never the
	// build's clock or the checkout's file times: two runs on one commit
	// write the same bytes (.ci/package passes the commit's time).
	if info.MTime, err = sourceDate(); err != nil {
		return err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return err
	}
	f, err := os.Create(*out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		return fmt.Errorf("package %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), *out); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s %s)\n", *out, info.Arch, strings.TrimPrefix(*version, "v"))
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH (reproducible-builds.org), or 2000-01-01
// when it is unset.
func sourceDate() (time.Time, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// defaultConfig is nfpm.yaml beside this source file when run with
// `go run` from the repository.
func defaultConfig() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		if p := filepath.Join(filepath.Dir(file), "nfpm.yaml"); fileExists(p) {
			return p
		}
	}
	return "nfpm.yaml"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
