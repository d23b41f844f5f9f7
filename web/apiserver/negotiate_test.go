package apiserver

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/engine"
)

func TestParseAccept(t *testing.T) {
	got := parseAccept(" text/html;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io , */*;q=0.1,application/, bad, a/b/c, */*,application/*;x=1=2;pretty=1")
	var s []string
	for _, c := range got {
		one := c.typ + "/" + c.sub
		for _, p := range c.params {
			one += ";" + p.key + "=" + p.value
		}
		s = append(s, one)
	}
	// goautoneg's order: q first, then specific before wildcards; invalid
	// clauses dropped; a parameter with two "=" is skipped.
	want := "application/json;as=Table;v=v1;g=meta.k8s.io application/*;pretty=1 */* text/html */*"
	if strings.Join(s, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(s, " "), want)
	}
}

func TestNegotiateMediaType(t *testing.T) {
	infos := engine.Codecs.SupportedMediaTypes()
	for _, tc := range []struct {
		accept  string
		r       restriction
		stream  bool
		want    string // media type, "" = not acceptable
		convert string
	}{
		{"", restrictResource, false, "application/json", ""},
		{"application/vnd.kubernetes.protobuf, application/json", restrictResource, false, "application/vnd.kubernetes.protobuf", ""},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", restrictResource, false, "application/json", "Table"},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", restrictDefault, false, "application/json", ""},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", restrictDefault, false, "", ""},
		{"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", restrictResource, false, "", ""},
		{"application/json;as=Table;v=v2;g=meta.k8s.io", restrictResource, false, "", ""},
		{"application/yaml;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io", restrictResource, false, "application/yaml", "PartialObjectMetadata"},
		{"application/*", restrictResource, false, "application/json", ""},
		{"text/html", restrictResource, false, "", ""},
		{"application/json;stream=watch", restrictResource, true, "application/json", ""},
		{"application/yaml", restrictResource, true, "", ""},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", restrictDiscovery, false, "application/json", "APIGroupDiscoveryList"},
		{"application/json", restrictDiscovery, false, "", ""},
	} {
		mo, ok := negotiateMediaType(tc.accept, infos, tc.r, tc.stream)
		got, conv := "", ""
		if ok {
			got = mo.info.MediaType
			if mo.convert != nil {
				conv = mo.convert.Kind
			}
		}
		if got != tc.want || conv != tc.convert {
			t.Errorf("%q (%d): got %q %q, want %q %q", tc.accept, tc.r, got, conv, tc.want, tc.convert)
		}
	}
}

func TestRouteAccepts(t *testing.T) {
	produces := "application/json, application/yaml, application/vnd.kubernetes.protobuf"
	for accept, want := range map[string]bool{
		"application/json":                true,
		"text/html, application/yaml;q=1": true,
		"*/*":                             true,
		"application/*":                   false, // go-restful wants an exact type
		"text/html":                       false,
		"application/json;stream=watch":   true,
	} {
		if got := routeAccepts(accept, produces); got != want {
			t.Errorf("%q: got %v", accept, got)
		}
	}
	if !patchContentTypeOK("application/merge-patch+json; charset=utf-8") || patchContentTypeOK("application/json") || patchContentTypeOK("") {
		t.Error("patch content types")
	}
}

func TestWarnings(t *testing.T) {
	var h fasthttp.ResponseHeader
	writeWarnings(&h, []string{`a "quoted" \ text`, "b"})
	got := h.PeekAll("Warning")
	if len(got) != 2 || string(got[0]) != `299 - "a \"quoted\" \\ text"` || string(got[1]) != `299 - "b"` {
		t.Errorf("got %q", got)
	}
	// Past 4 KiB of text, items are cut to 256 runes and the budget ends
	// the list.
	var long []string
	for i := range 40 {
		long = append(long, strings.Repeat(string(rune('a'+i%26)), 300))
	}
	h.Reset()
	writeWarnings(&h, long)
	got = h.PeekAll("Warning")
	if len(got) != 16 || len(got[0]) != len(`299 - ""`)+256 {
		t.Errorf("truncation: %d headers, first %d bytes", len(got), len(got[0]))
	}
}
