package abi

import (
	"strconv"
	"strings"
)

// ParseVersion parses a LeaseCandidate version the way upstream's
// OldestEmulationVersion does (blang/semver ParseTolerant): surrounding
// spaces and a leading "v" are ignored, "1.31" means "1.31.0", leading
// zeros in the numeric parts are dropped and build metadata is ignored.
// A version that does not parse comes back with Valid=false, so that every
// strategy skips the same candidates.
func ParseVersion(raw string) Version {
	v := Version{Raw: raw}
	s := strings.TrimPrefix(strings.TrimSpace(raw), "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		if !validIdents(s[i+1:], false) {
			return v
		}
		s = s[:i]
	}
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 3 || core == "" {
		return v
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	nums := [3]uint64{}
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return v
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v
		}
		nums[i] = n
	}
	if hasPre {
		if !validIdents(pre, true) {
			return v
		}
		v.Prerelease = strings.Split(pre, ".")
	}
	v.Valid, v.Major, v.Minor, v.Patch = true, nums[0], nums[1], nums[2]
	return v
}

// validIdents checks dot-separated semver identifiers; pre-release numeric
// identifiers must not have leading zeros.
func validIdents(s string, pre bool) bool {
	if s == "" {
		return false
	}
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// CompareVersion orders two valid versions by semver precedence: -1 when
// a < b, 0 when equal, +1 when a > b. A pre-release sorts before its
// release; numeric identifiers compare numerically and before alphanumeric
// ones. Raw and Valid are not looked at.
func CompareVersion(a, b Version) int {
	switch {
	case a.Major != b.Major:
		return cmpU(a.Major, b.Major)
	case a.Minor != b.Minor:
		return cmpU(a.Minor, b.Minor)
	case a.Patch != b.Patch:
		return cmpU(a.Patch, b.Patch)
	}
	switch {
	case len(a.Prerelease) == 0 && len(b.Prerelease) == 0:
		return 0
	case len(a.Prerelease) == 0:
		return 1
	case len(b.Prerelease) == 0:
		return -1
	}
	for i := 0; i < len(a.Prerelease) && i < len(b.Prerelease); i++ {
		if c := compareIdent(a.Prerelease[i], b.Prerelease[i]); c != 0 {
			return c
		}
	}
	return cmpU(uint64(len(a.Prerelease)), uint64(len(b.Prerelease)))
}

func compareIdent(a, b string) int {
	an, bn := isNumeric(a), isNumeric(b)
	switch {
	case an && bn:
		// Numeric identifiers have no leading zeros, so the longer is larger.
		if len(a) != len(b) {
			return cmpU(uint64(len(a)), uint64(len(b)))
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}
