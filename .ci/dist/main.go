// Command dist builds leasehold's packages, .deb, .rpm and .apk, with nfpm,
// goreleaser's maintained packager, from nfpm.yaml beside this file: `make
// dist` runs it once per architecture and format after building the static
// binaries.
//
// It is a module of its own so that the packager's dependencies never
// enter the server's go.mod or binary.
//
//	go run . -arch arm64 -version v1.2.3 -binary ../../dist/leasehold-linux-arm64 -out ../../dist/leasehold_1.2.3_arm64.deb
//	go run . -arch arm64 -version v1.2.3 -binary ../../dist/leasehold-linux-arm64 -format rpm -dir ../../dist
//
// The format is -format, else the extension of -out.
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
	_ "github.com/goreleaser/nfpm/v2/apk" // registers the "apk" packager
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the "deb" packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the "rpm" packager
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
	out := fs.String("out", "", "the package to write")
	dir := fs.String("dir", "", "instead of -out: write the package into this directory, named as its format's convention has it (leasehold_0.1.0_arm64.deb, leasehold-0.1.0-1.aarch64.rpm, leasehold_0.1.0_aarch64.apk)")
	format := fs.String("format", "", "deb, rpm or apk (default: the extension of -out)")
	config := fs.String("config", defaultConfig(), "nfpm configuration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *arch == "" || *version == "" || *binary == "" || (*out == "") == (*dir == "") {
		return fmt.Errorf("-arch, -version, -binary and one of -out and -dir are required")
	}
	if *format == "" {
		*format = strings.TrimPrefix(filepath.Ext(*out), ".")
	}
	switch *format {
	case "deb", "rpm", "apk":
	default:
		return fmt.Errorf("format %q: want deb, rpm or apk (-format, or the extension of -out)", *format)
	}
	nfpmArch := *arch
	if nfpmArch == "arm" {
		nfpmArch = "arm7" // nfpm names GOARM in the arch: deb and apk map arm7 to armhf, rpm to armv7hl
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
	dirPath, err := filepath.Abs(*dir)
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
	info, err := cfg.Get(*format)
	if err != nil {
		return err
	}
	// Every file, header and control member gets one time, never the
	// build's clock or the checkout's file times: two runs on one commit
	// write the same bytes (.ci/package passes the commit's time).
	if info.MTime, err = sourceDate(); err != nil {
		return err
	}
	// nfpm's apk writer stamps the maintainer scripts with their files'
	// times (the checkout's): it gets copies dated like everything else.
	scriptDir, err := os.MkdirTemp("", "leasehold-dist-scripts")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scriptDir)
	for _, script := range []*string{
		&info.Scripts.PreInstall, &info.Scripts.PostInstall, &info.Scripts.PreRemove, &info.Scripts.PostRemove,
		&info.APK.Scripts.PreUpgrade, &info.APK.Scripts.PostUpgrade,
	} {
		if *script == "" {
			continue
		}
		if *script, err = datedCopy(*script, scriptDir, info.MTime); err != nil {
			return err
		}
	}
	info = nfpm.WithDefaults(info)
	if *format == "apk" {
		apkVersion(info)
	}
	if err := nfpm.PrepareForPackager(info, *format); err != nil {
		return err
	}
	pkg, err := nfpm.Get(*format)
	if err != nil {
		return err
	}
	if *dir != "" {
		*out = filepath.Join(dirPath, pkg.ConventionalFileName(info))
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
	fmt.Printf("wrote %s (%s %s %s)\n", *out, *format, info.Arch, strings.TrimPrefix(*version, "v"))
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

// apkVersion makes a development version valid for apk, whose version
// grammar (digits, a letter, _suffix[digits], -rN) has no "dev" and no
// "+build": nfpm would write v0.1.0-dev+1a2b3c4 as 0.1.0_dev-p1a2b3c4,
// which apk refuses. A development build is 0.1.0_preYYYYMMDDhhmmss instead,
// the commit's time: apk orders it before 0.1.0 and after earlier commits'
// builds. A release (no pre-release part) is left as it is.
func apkVersion(info *nfpm.Info) {
	if info.Prerelease == "" {
		return
	}
	info.Prerelease = "pre" + info.MTime.UTC().Format("20060102150405")
	info.VersionMetadata = ""
}

// datedCopy copies the file at src into dir with the modification time t,
// and returns the copy's path.
func datedCopy(src, dir string, t time.Time) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
		return "", err
	}
	if err := os.Chtimes(dst, t, t); err != nil {
		return "", err
	}
	return dst, nil
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
