// Command sbom writes the SPDX 2.3 JSON software bill of materials of one
// leasehold release binary: every Go module linked into it, with its
// version and go.sum checksum, read from the binary's own build
// information (what `go version -m` prints), the Go standard library, the
// patches .ci/build applies, and the built-in strategy module embedded in
// the binary (plugins/builtin/oldest.wasm) with the C sources it is built
// from. `make dist` (.ci/package) writes one per architecture beside the
// tarball.
//
// It uses the standard library only, and is a module of its own like
// .ci/dist, so that it adds nothing to leasehold's go.mod. The output
// depends only on the binary and the commit: the creation time is
// SOURCE_DATE_EPOCH, and modules are sorted by path.
//
//	go run . -root ../.. -binary leasehold -name leasehold-v0.1.0-linux-amd64 -version v0.1.0 -out leasehold.spdx.json
package main

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The built-in strategy module, and the sources `go generate
// ./plugins/builtin` builds it from (plugins/builtin/builtin.go).
const (
	builtinWasm    = "plugins/builtin/oldest.wasm"
	builtinBuildBy = "go generate ./plugins/builtin (plugins/builtin/builtin.go): clang --target=wasm32 -O2 -ffreestanding -nostdlib, from oldest/oldest.c and the C SDK header"
)

var builtinSources = []string{"plugins/builtin/oldest/oldest.c", "plugins/sdk/c/lease_strategy.h"}

// The patches .ci/build applies, by module path.
var patches = map[string]string{
	"go.etcd.io/etcd/server/v3": ".ci/patches/etcd-server.patch",
	"github.com/google/go-cmp":  ".ci/patches/go-cmp.patch",
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	root := fs.String("root", "../..", "the repository's root (go.sum, the patches, the strategy module and its sources)")
	binary := fs.String("binary", "", "the release binary")
	name := fs.String("name", "", "the document's name: the release artifact's, e.g. leasehold-v0.1.0-linux-amd64")
	version := fs.String("version", "", "leasehold's version, e.g. v0.1.0")
	out := fs.String("out", "", "the SPDX JSON file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *name == "" || *version == "" || *out == "" {
		return fmt.Errorf("-binary, -name, -version and -out are required")
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	doc, err := build(*root, *binary, *name, *version, created)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

// SPDX 2.3 (https://spdx.github.io/spdx-spec/v2.3/), the fields used here.
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Files             []file         `json:"files"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
	Comment  string   `json:"comment,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type pkg struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	Supplier         string        `json:"supplier,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	SourceInfo       string        `json:"sourceInfo,omitempty"`
	Comment          string        `json:"comment,omitempty"`
	Purpose          string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
}

type file struct {
	SPDXID           string     `json:"SPDXID"`
	FileName         string     `json:"fileName"`
	Checksums        []checksum `json:"checksums"`
	LicenseConcluded string     `json:"licenseConcluded"`
	CopyrightText    string     `json:"copyrightText"`
	Comment          string     `json:"comment,omitempty"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

func build(root, binary, name, version string, created time.Time) (*document, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %w", binary, err)
	}
	sums, err := readGoSum(filepath.Join(root, "go.sum"))
	if err != nil {
		return nil, err
	}
	binSum := sha256.Sum256(bin)
	doc := &document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name,
		DocumentNamespace: "https://github.com/leasehold/leasehold/spdx/" + name + "-" + hex.EncodeToString(binSum[:8]),
		CreationInfo: creationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: leasehold developers", "Tool: leasehold .ci/sbom (debug/buildinfo)"},
			Comment:  "Go modules from the binary's build information (go version -m); checksums are go.sum's h1: hashes, hex-decoded SHA-256 (https://go.dev/ref/mod#go-sum-files).",
		},
	}
	const mainID = "SPDXRef-Package-leasehold"
	doc.Packages = append(doc.Packages, pkg{
		SPDXID:           mainID,
		Name:             "leasehold",
		VersionInfo:      version,
		Supplier:         "Organization: leasehold developers",
		DownloadLocation: "https://github.com/leasehold/leasehold",
		Checksums:        []checksum{{"SHA256", hex.EncodeToString(binSum[:])}},
		LicenseConcluded: "Apache-2.0",
		LicenseDeclared:  "Apache-2.0",
		CopyrightText:    "NOASSERTION",
		SourceInfo:       "built by .ci/build (go build -trimpath, CGO_ENABLED=0, " + setting(info, "GOOS") + "/" + setting(info, "GOARCH") + ")",
		Purpose:          "APPLICATION",
		ExternalRefs:     []externalRef{purl(info.Main.Path, version)},
	})
	doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID})

	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	doc.Packages = append(doc.Packages, pkg{
		SPDXID:           "SPDXRef-Package-go-stdlib",
		Name:             "stdlib",
		VersionInfo:      info.GoVersion,
		Supplier:         "Organization: The Go Authors",
		DownloadLocation: "https://go.dev/dl/go" + goVersion + ".src.tar.gz",
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  "BSD-3-Clause",
		CopyrightText:    "NOASSERTION",
		Purpose:          "LIBRARY",
		ExternalRefs:     []externalRef{purl("stdlib", info.GoVersion)},
	})
	doc.Relationships = append(doc.Relationships, relationship{mainID, "CONTAINS", "SPDXRef-Package-go-stdlib"})

	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for i, dep := range deps {
		sum := dep.Sum
		var comment string
		inRepo := false
		if dep.Replace != nil {
			patch, patched := patches[dep.Path]
			switch {
			case (dep.Replace.Version != "" && dep.Replace.Version != "(devel)") || !strings.HasPrefix(dep.Replace.Path, "./"):
				return nil, fmt.Errorf("%s is replaced by %s %s, which this SBOM does not know how to name", dep.Path, dep.Replace.Path, dep.Replace.Version)
			case patched:
				// A module .ci/build patched: the checksum of the version it
				// started from (go.sum), and the patch, named in files.
				sum = sums[dep.Path+" "+dep.Version]
				comment = "built from this version with " + patch + " applied by .ci/build (see the file of that name in this document)"
			default:
				// A nested module of this repository (go.mod's replace):
				// its files at this commit, hashed as go.sum's h1: does.
				inRepo = true
				if sum, err = dirHash(root, strings.TrimPrefix(dep.Replace.Path, "./"), dep.Path+"@"+dep.Version); err != nil {
					return nil, err
				}
				comment = "a nested module of this repository, built from " + dep.Replace.Path + " at this commit (go.mod replace)"
			}
		}
		if sum == "" {
			return nil, fmt.Errorf("module %s %s has no checksum in the binary or go.sum", dep.Path, dep.Version)
		}
		hexSum, err := h1Hex(sum)
		if err != nil {
			return nil, fmt.Errorf("module %s %s: %w", dep.Path, dep.Version, err)
		}
		id := "SPDXRef-Package-go-module-" + strconv.Itoa(i+1)
		download := "https://proxy.golang.org/" + escapePath(dep.Path) + "/@v/" + escapePath(dep.Version) + ".zip"
		if inRepo {
			download = "https://github.com/leasehold/leasehold/tree/" + version + "/" + strings.TrimPrefix(dep.Replace.Path, "./")
		}
		if comment == "" {
			comment = "go.sum " + sum
		} else {
			comment = "go.sum " + sum + "; " + comment
		}
		doc.Packages = append(doc.Packages, pkg{
			SPDXID:           id,
			Name:             dep.Path,
			VersionInfo:      dep.Version,
			DownloadLocation: download,
			Checksums:        []checksum{{"SHA256", hexSum}},
			LicenseConcluded: "NOASSERTION",
			LicenseDeclared:  "NOASSERTION",
			CopyrightText:    "NOASSERTION",
			Comment:          comment,
			Purpose:          "LIBRARY",
			ExternalRefs:     []externalRef{purl(dep.Path, dep.Version)},
		})
		doc.Relationships = append(doc.Relationships, relationship{mainID, "CONTAINS", id})
		if patch, ok := patches[dep.Path]; ok && dep.Replace != nil {
			f, err := newFile(root, patch, "SPDXRef-File-patch-"+strconv.Itoa(i+1), "applied by .ci/build before linking")
			if err != nil {
				return nil, err
			}
			doc.Files = append(doc.Files, f)
			doc.Relationships = append(doc.Relationships, relationship{f.SPDXID, "PATCH_APPLIED", id})
		}
	}

	// The built-in strategy module: the committed file, which must be the
	// one embedded in this binary, and its sources.
	wasm, err := os.ReadFile(filepath.Join(root, builtinWasm))
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(bin, wasm) {
		return nil, fmt.Errorf("%s does not hold %s byte for byte: the binary was built from another commit", binary, builtinWasm)
	}
	wasm256, wasm1 := sha256.Sum256(wasm), sha1.Sum(wasm)
	const wasmID = "SPDXRef-Package-builtin-strategy-oldest"
	doc.Packages = append(doc.Packages, pkg{
		SPDXID:           wasmID,
		Name:             "oldest.wasm",
		VersionInfo:      version,
		Supplier:         "Organization: leasehold developers",
		DownloadLocation: "https://github.com/leasehold/leasehold/tree/" + version + "/" + builtinWasm,
		Checksums:        []checksum{{"SHA1", hex.EncodeToString(wasm1[:])}, {"SHA256", hex.EncodeToString(wasm256[:])}},
		LicenseConcluded: "Apache-2.0",
		LicenseDeclared:  "Apache-2.0",
		CopyrightText:    "NOASSERTION",
		SourceInfo:       builtinBuildBy,
		Comment:          "the built-in lease strategy, a WebAssembly module committed as " + builtinWasm + " and embedded in the binary (go:embed)",
		Purpose:          "LIBRARY",
	})
	doc.Relationships = append(doc.Relationships, relationship{mainID, "CONTAINS", wasmID})
	for i, src := range builtinSources {
		f, err := newFile(root, src, "SPDXRef-File-builtin-source-"+strconv.Itoa(i+1), "a source of "+builtinWasm)
		if err != nil {
			return nil, err
		}
		doc.Files = append(doc.Files, f)
		doc.Relationships = append(doc.Relationships, relationship{wasmID, "GENERATED_FROM", f.SPDXID})
	}
	return doc, nil
}

func newFile(root, rel, id, comment string) (file, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return file{}, err
	}
	s1, s256 := sha1.Sum(data), sha256.Sum256(data)
	return file{
		SPDXID:           id,
		FileName:         "./" + rel,
		Checksums:        []checksum{{"SHA1", hex.EncodeToString(s1[:])}, {"SHA256", hex.EncodeToString(s256[:])}},
		LicenseConcluded: "NOASSERTION",
		CopyrightText:    "NOASSERTION",
		Comment:          comment,
	}, nil
}

// dirHash is go.sum's h1: hash (golang.org/x/mod/sumdb/dirhash.Hash1) of
// the files git tracks under dir, named modVersion/relative-path as in a
// module zip: the SHA-256 of the lines "sha256-hex  name\n", sorted by name.
func dirHash(root, dir, modVersion string) (string, error) {
	cmd := exec.Command("git", "-C", root, "ls-files", "-z", "--", dir)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files %s: %w", dir, err)
	}
	var names []string
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("git tracks no files under %s", dir)
	}
	zipNames := map[string]string{} // name in the module zip -> path in root
	keys := make([]string, 0, len(names))
	for _, name := range names {
		z := modVersion + "/" + strings.TrimPrefix(name, dir+"/")
		zipNames[z] = name
		keys = append(keys, z)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, z := range keys {
		data, err := os.ReadFile(filepath.Join(root, zipNames[z]))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%x  %s\n", sha256.Sum256(data), z)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// readGoSum maps "path version" to the h1: hash of the module's content.
func readGoSum(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && !strings.HasSuffix(fields[1], "/go.mod") {
			sums[fields[0]+" "+fields[1]] = fields[2]
		}
	}
	return sums, sc.Err()
}

// h1Hex is the SHA-256 of a go.sum h1: hash, in hex.
func h1Hex(sum string) (string, error) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", fmt.Errorf("checksum %q is not an h1: hash", sum)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("checksum %q is not a base64 SHA-256", sum)
	}
	return hex.EncodeToString(raw), nil
}

func purl(path, version string) externalRef {
	return externalRef{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}
}

var upper = regexp.MustCompile(`[A-Z]`)

// escapePath is the module proxy's case encoding: an upper-case letter is
// "!" and its lower case (golang.org/x/mod/module.EscapePath).
func escapePath(s string) string {
	return upper.ReplaceAllStringFunc(s, func(c string) string { return "!" + strings.ToLower(c) })
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return "?"
}

// sourceDate is SOURCE_DATE_EPOCH (reproducible-builds.org), or 2000-01-01
// when it is unset, as .ci/dist's.
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
