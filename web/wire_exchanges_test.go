package web_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/auth"
)

// The differential run against kube-apiserver (docs/wirediff.sh drives it):
// with -wire.ref the requests of testdata/wire/exchanges/requests.json go to
// a live kube-apiserver, its normalised answers are recorded into
// recorded.json (-wire.record) and, with -wire.ours, compared with a live
// leasehold's. Without flags TestWireExchanges compares an in-process
// server's answers with the recorded ones.
var (
	wireRef       = flag.String("wire.ref", "", "base URL of a live kube-apiserver to send the wire exchanges to")
	wireRefToken  = flag.String("wire.ref-token", "", "file holding the bearer token for -wire.ref")
	wireOurs      = flag.String("wire.ours", "", "base URL of a live leasehold to compare with -wire.ref (default: an in-process server)")
	wireOursToken = flag.String("wire.ours-token", "", "file holding the bearer token for -wire.ours (default: -wire.ref-token)")
	wireRecord    = flag.Bool("wire.record", false, "with -wire.ref: write kube-apiserver's answers to testdata/wire/exchanges/recorded.json")
	wireRun       = flag.String("wire.run", "", "suffix added to the names the requests create (\"{run}\"), so that a run can repeat on the same live servers; removed before comparing")
)

// wireRequest is one request of requests.json.
type wireRequest struct {
	Name        string   `json:"name"`
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Body        string   `json:"body,omitempty"`
	ContentType string   `json:"contentType,omitempty"`
	Accept      string   `json:"accept,omitempty"`
	Keep        []string `json:"keep,omitempty"`       // discovery: the resources compared
	KeepGroups  []string `json:"keepGroups,omitempty"` // aggregated discovery: the groups compared
	// Differs is why leasehold's answer differs on purpose (README,
	// "Differences from kube-apiserver"); the comparison is then logged.
	Differs string `json:"differs,omitempty"`
}

// wireExchanges is requests.json: the requests, in order (each may depend
// on the ones before), and the rewrites that remove what differs between
// runs (uids, times, resourceVersions).
type wireExchanges struct {
	Normalize []struct {
		RE   string `json:"re"`
		With string `json:"with"`
	} `json:"normalize"`
	Requests []wireRequest `json:"requests"`
}

// wireAnswer is one normalised answer, as recorded.json holds them.
type wireAnswer struct {
	Name    string            `json:"name"`
	Code    int               `json:"code"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body"`
}

// wireHeaders are the response headers clients read.
var wireHeaders = []string{"Content-Type", "Warning", "Location", "Retry-After"}

// TestWireExchanges: every answer of the recorded differential run against
// kube-apiserver v1.37.1 (namespaces and their status and finalize
// subresources, core and events.k8s.io Events, the self reviews, leases,
// discovery) is the one leasehold gives, byte for byte after normalising.
func TestWireExchanges(t *testing.T) {
	dir := filepath.Join("testdata", "wire", "exchanges")
	var ex wireExchanges
	readJSON(t, filepath.Join(dir, "requests.json"), &ex)
	norm := wireNormalizer(t, ex)
	refToken := "wire-token"
	if *wireRefToken != "" {
		refToken = readToken(t, *wireRefToken)
	}
	var want []wireAnswer
	if *wireRef != "" {
		want = runWire(t, *wireRef, refToken, ex.Requests, norm)
		if *wireRecord {
			b, err := json.MarshalIndent(want, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "recorded.json"), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		readJSON(t, filepath.Join(dir, "recorded.json"), &want)
	}
	var got []wireAnswer
	if *wireOurs != "" {
		tok := refToken
		if *wireOursToken != "" {
			tok = readToken(t, *wireOursToken)
		}
		got = runWire(t, *wireOurs, tok, ex.Requests, norm)
	} else {
		got = runWire(t, startWireServer(t, refToken), refToken, ex.Requests, norm)
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers recorded, %d requests sent: rerun the recording (docs/wirediff.sh)", len(want), len(got))
	}
	differ, listed := 0, 0
	for i := range want {
		w, g := want[i], got[i]
		if w.Name != g.Name {
			t.Fatalf("answer %d is %q in recorded.json, the request is %q: rerun the recording", i, w.Name, g.Name)
		}
		var d []string
		if w.Code != g.Code {
			d = append(d, fmt.Sprintf("status %d, kube-apiserver %d", g.Code, w.Code))
		}
		for _, h := range wireHeaders {
			if w.Headers[h] != g.Headers[h] {
				d = append(d, fmt.Sprintf("header %s %q, kube-apiserver %q", h, g.Headers[h], w.Headers[h]))
			}
		}
		if w.Body != g.Body {
			d = append(d, "body:\n  leasehold:      "+g.Body+"\n  kube-apiserver: "+w.Body)
		}
		if len(d) > 0 && ex.Requests[i].Differs != "" {
			t.Logf("%s differs as listed in the README (%s)", w.Name, ex.Requests[i].Differs)
			listed++
			continue
		}
		if len(d) > 0 {
			differ++
			t.Errorf("%s %s: %s", ex.Requests[i].Method, w.Name, strings.Join(d, "\n  "))
		}
	}
	t.Logf("%d requests compared, %d differ, %d more differ as the README lists", len(want), differ, listed)
}

// startWireServer serves as the reference is started for the recording:
// kube-apiserver's NamespaceLifecycle admission (strict namespaces), and the
// token of ref-admin (group system:masters) that ref-apiserver-start.sh makes.
func startWireServer(t *testing.T, token string) string {
	t.Helper()
	st, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st, NamespaceLifecycle: engine.NamespacesStrict})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.NewServer(web.Options{Engine: eng, Version: testVersion,
		Auth: &auth.Authenticator{Tokens: auth.NewTokens([]auth.TokenEntry{{Token: token,
			User: auth.User{Name: "ref-admin", UID: "ref-admin-uid", Groups: []string{"system:masters"}}}})}})
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, srv)
}

// runWire sends the requests to base in order and normalises the answers.
func runWire(t *testing.T, base, token string, reqs []wireRequest, norm func(string) string) []wireAnswer {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the reference's self-signed certificate; by hand only
	}}
	run := *wireRun
	out := make([]wireAnswer, 0, len(reqs))
	for _, rq := range reqs {
		var body io.Reader
		if rq.Body != "" {
			body = strings.NewReader(strings.ReplaceAll(rq.Body, "{run}", run))
		}
		req, err := http.NewRequest(rq.Method, base+strings.ReplaceAll(rq.Path, "{run}", run), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("User-Agent", "wirediff/1")
		accept := rq.Accept
		if accept == "" {
			accept = "application/json"
		}
		req.Header.Set("Accept", accept)
		if rq.ContentType != "" {
			req.Header.Set("Content-Type", rq.ContentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", rq.Name, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the body: %v", rq.Name, err)
		}
		a := wireAnswer{Name: rq.Name, Code: resp.StatusCode, Headers: map[string]string{}}
		for _, h := range wireHeaders {
			if v := strings.Join(resp.Header.Values(h), ", "); v != "" {
				a.Headers[h] = norm(strings.ReplaceAll(v, run, ""))
			}
		}
		text := string(b)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.kubernetes.protobuf") {
			text = protobufAsJSON(t, rq.Name, b)
		} else if len(rq.Keep) > 0 || len(rq.KeepGroups) > 0 {
			text = filterDiscovery(t, rq, b)
		}
		if run != "" {
			text = strings.ReplaceAll(text, run, "")
		}
		text = sortManagedFields(text)
		a.Body = norm(text)
		out = append(out, a)
	}
	return out
}

// sortManagedFields orders every managedFields list by operation, manager
// and subresource, leaving out the time that upstream sorts by between
// operation and manager: entries written in the same second come in name
// order, and which requests share a second differs between runs. Each line
// (a watch stream has one object a line) that is a JSON object with a list
// to reorder is printed again compactly; the rest is left as sent.
func sortManagedFields(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if !strings.Contains(line, `"managedFields":[{`) {
			continue
		}
		var doc orderedJSON
		if json.Unmarshal([]byte(line), &doc) != nil || !doc.isObj {
			continue
		}
		var walk func(n *orderedJSON) bool
		walk = func(n *orderedJSON) bool {
			changed := false
			for j := range n.fields {
				f := &n.fields[j]
				if f.key == "managedFields" && f.value.isArray {
					key := func(e *orderedJSON) string {
						var b strings.Builder
						for _, k := range []string{"operation", "manager", "subresource"} {
							if v := e.get(k); v != nil {
								b.Write(v.scalar)
							}
							b.WriteByte(0)
						}
						return b.String()
					}
					items := f.value.items
					sort.SliceStable(items, func(a, b int) bool { return key(&items[a]) < key(&items[b]) })
					changed = true
				}
				changed = walk(&f.value) || changed
			}
			for j := range n.items {
				changed = walk(&n.items[j]) || changed
			}
			return changed
		}
		if walk(&doc) {
			if b, err := json.Marshal(&doc); err == nil {
				lines[i] = string(b)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// wireNormalizer compiles the rewrites of requests.json.
func wireNormalizer(t *testing.T, ex wireExchanges) func(string) string {
	t.Helper()
	type rw struct {
		re   *regexp.Regexp
		with string
	}
	var rws []rw
	for _, n := range ex.Normalize {
		re, err := regexp.Compile(n.RE)
		if err != nil {
			t.Fatalf("normalize %q: %v", n.RE, err)
		}
		rws = append(rws, rw{re, n.With})
	}
	return func(s string) string {
		for _, r := range rws {
			s = r.re.ReplaceAllString(s, r.with)
		}
		return s
	}
}

// protobufAsJSON decodes a protobuf answer (the k8s\0 envelope) with
// client-go's scheme and prints it as JSON, so that it normalises as the
// JSON answers do; the envelope's type is kept in front.
func protobufAsJSON(t *testing.T, name string, b []byte) string {
	t.Helper()
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		return fmt.Sprintf("undecodable protobuf (%v): %q", err, b)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	j, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return "protobuf " + gvk.String() + " " + string(j)
}

// filterDiscovery keeps, of a discovery answer listing more than leasehold
// serves, the groups and resources rq names (in kube-apiserver's order), and
// prints it compactly.
func filterDiscovery(t *testing.T, rq wireRequest, b []byte) string {
	t.Helper()
	var doc orderedJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Sprintf("not JSON (%v): %s", err, b)
	}
	keep := func(names []string, n *orderedJSON, key string) bool {
		v := n.get(key)
		if v == nil {
			return false
		}
		var s string
		_ = json.Unmarshal(v.scalar, &s)
		for _, k := range names {
			if k == s {
				return true
			}
		}
		return false
	}
	var walk func(n *orderedJSON)
	walk = func(n *orderedJSON) {
		for i := range n.fields {
			f := &n.fields[i]
			switch f.key {
			case "resources":
				if f.value.isArray && len(rq.Keep) > 0 {
					var kept []orderedJSON
					for _, r := range f.value.items {
						name := "resource"
						if r.get("name") != nil {
							name = "name"
						}
						if keep(rq.Keep, &r, name) {
							kept = append(kept, r)
						}
					}
					f.value.items = kept
				}
			case "items":
				if len(rq.KeepGroups) > 0 {
					var kept []orderedJSON
					for _, g := range f.value.items {
						if md := g.get("metadata"); md != nil && keep(rq.KeepGroups, md, "name") {
							kept = append(kept, g)
						}
					}
					f.value.items = kept
				}
			}
			walk(&f.value)
		}
		for i := range n.items {
			walk(&n.items[i])
		}
	}
	walk(&doc)
	out, err := json.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// orderedJSON is a JSON value that keeps its objects' key order.
type orderedJSON struct {
	fields  []orderedField
	isObj   bool
	isArray bool
	items   []orderedJSON
	scalar  json.RawMessage
}

type orderedField struct {
	key   string
	value orderedJSON
}

func (o *orderedJSON) get(key string) *orderedJSON {
	for i := range o.fields {
		if o.fields[i].key == key {
			return &o.fields[i].value
		}
	}
	return nil
}

func (o *orderedJSON) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '{':
		o.isObj = true
		dec := json.NewDecoder(bytes.NewReader(b))
		if _, err := dec.Token(); err != nil {
			return err
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			var v orderedJSON
			if err := dec.Decode(&v); err != nil {
				return err
			}
			o.fields = append(o.fields, orderedField{k.(string), v})
		}
		return nil
	case len(b) > 0 && b[0] == '[':
		o.isArray = true
		return json.Unmarshal(b, &o.items)
	default:
		o.scalar = append(json.RawMessage(nil), b...)
		return nil
	}
}

func (o *orderedJSON) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	switch {
	case o.isObj:
		buf.WriteByte('{')
		for i, f := range o.fields {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(f.key)
			buf.Write(k)
			buf.WriteByte(':')
			v, err := f.value.MarshalJSON()
			if err != nil {
				return nil, err
			}
			buf.Write(v)
		}
		buf.WriteByte('}')
	case o.isArray:
		buf.WriteByte('[')
		for i := range o.items {
			if i > 0 {
				buf.WriteByte(',')
			}
			v, err := o.items[i].MarshalJSON()
			if err != nil {
				return nil, err
			}
			buf.Write(v)
		}
		buf.WriteByte(']')
	default:
		buf.Write(o.scalar)
	}
	return buf.Bytes(), nil
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
