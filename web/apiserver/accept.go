package apiserver

import (
	"sort"
	"strconv"
	"strings"
)

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	typ, sub string
	q        float64
	params   []param
}

type param struct{ key, value string }

// parseAccept splits an Accept header the way github.com/munnerz/goautoneg
// does (which k8s.io/apiserver uses): clauses without a "/" are dropped
// unless they are "*", parameters without exactly one "=" are skipped, and
// the result is ordered by q, then by specificity. goautoneg's sort.Sort is
// an insertion sort for short inputs, hence stable; SliceStable keeps that.
func parseAccept(header string) []acceptClause {
	var out []acceptClause
	for rest := header; len(rest) > 0; {
		var part string
		part, rest = cut(rest, ',')
		part = strings.TrimSpace(part)
		mediaRange, params := cut(part, ';')
		typ, sub := cut(mediaRange, '/')
		c := acceptClause{typ: strings.TrimSpace(typ), q: 1}
		if sub == "" {
			if c.typ != "*" {
				continue
			}
			c.sub = "*"
		} else {
			s1, extra := cut(sub, '/')
			if extra != "" {
				continue
			}
			c.sub = strings.TrimSpace(s1)
		}
		for len(params) > 0 {
			var p string
			p, params = cut(params, ';')
			k, v := cut(p, '=')
			if v == "" {
				continue
			}
			v, extra := cut(v, '=')
			if extra != "" {
				continue
			}
			k = strings.TrimSpace(k)
			if k == "q" {
				q, _ := strconv.ParseFloat(v, 32)
				c.q = q
				continue
			}
			c.params = append(c.params, param{k, strings.TrimSpace(v)})
		}
		out = append(out, c)
	}
	if len(out) > 1 {
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if a.q > b.q {
				return true
			}
			if a.typ != "*" && b.typ == "*" {
				return true
			}
			return a.sub != "*" && b.sub == "*"
		})
	}
	return out
}

// cut splits s at the first sep; the remainder is empty when sep is absent.
func cut(s string, sep byte) (string, string) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}
