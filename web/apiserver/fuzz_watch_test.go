package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// panicLog counts log records that report a recovered panic.
type panicLog struct{ n atomic.Int64 }

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		p.n.Add(1)
	}
	return nil
}
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

// FuzzWatchParameters sends arbitrary watch parameters (resourceVersion,
// resourceVersionMatch, timeoutSeconds, allowWatchBookmarks,
// sendInitialEvents, label and field selectors) to the watch of a
// namespace holding a few Leases. The handler must never panic, and must
// answer with either a Status or a watch stream whose first batch (the
// initial events, when asked for) is a sequence of well-formed events.
func FuzzWatchParameters(f *testing.F) {
	panics := &panicLog{}
	st, err := boltdb.Open(context.Background(), filepath.Join(f.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st, Logger: slog.New(panics)})
	if err != nil {
		f.Fatal(err)
	}
	res, _ := eng.ResourceFor("coordination.k8s.io", "v1", "leases")
	scope := engine.Scope{Resource: res, Version: "v1", Namespace: "default"}
	for i := range 5 {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("l", i), Labels: map[string]string{"i": fmt.Sprint(i)}}}
		if _, err := eng.Create(context.Background(), scope, l, &metav1.CreateOptions{}); err != nil {
			f.Fatal(err)
		}
	}
	h, err := New(Options{Engine: eng, Logger: slog.New(panics)})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct{ rv, match, timeout, bookmarks, initial, labels, fields string }{
		{"", "", "", "", "", "", ""},
		{"0", "", "30", "true", "", "", ""},
		{"1", "NotOlderThan", "", "true", "true", "i=1", ""},
		{"", "NotOlderThan", "1", "1", "true", "i in (1,2)", "metadata.name=l2"},
		{"2", "Exact", "-5", "false", "false", "", "metadata.namespace!=x"},
		{"99999999999", "", "9223372036854775807", "", "", "", ""},
		{"-1", "Bogus", "x", "maybe", "1", "!!!", "spec.holderIdentity=a"},
		{"18446744073709551616", "", "0", "", "true", "", ""},
	} {
		f.Add(s.rv, s.match, s.timeout, s.bookmarks, s.initial, s.labels, s.fields)
	}
	f.Fuzz(func(t *testing.T, rv, match, timeout, bookmarks, initial, labels, fields string) {
		q := url.Values{"watch": {"true"}}
		for k, v := range map[string]string{"resourceVersion": rv, "resourceVersionMatch": match, "timeoutSeconds": timeout,
			"allowWatchBookmarks": bookmarks, "sendInitialEvents": initial, "labelSelector": labels, "fieldSelector": fields} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var req fasthttp.Request
		req.Header.SetMethod("GET")
		req.SetRequestURI("/apis/coordination.k8s.io/v1/namespaces/default/leases?" + q.Encode())
		req.Header.Set("Accept", "application/json")
		var rc fasthttp.RequestCtx
		rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
		if !h.Serve(&rc) {
			t.Fatal("not served")
		}
		code := rc.Response.StatusCode()
		var body []byte
		if rc.Response.IsBodyStream() {
			if code != 200 {
				t.Fatalf("a stream with code %d", code)
			}
			// Take the first batch of the stream (initial events, an
			// ERROR event), then end it.
			if wb, ok := rc.Response.BodyStream().(*watchBody); ok {
				wb.cancel()
				var out bytes.Buffer
				done := make(chan struct{})
				go func() { defer close(done); _, _ = wb.WriteTo(&out) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("stream did not end after its context did: %s", q.Encode())
				}
				_ = wb.Close()
				body = out.Bytes()
			} else {
				body, _ = io.ReadAll(rc.Response.BodyStream())
				_ = rc.Response.CloseBodyStream()
			}
			sc := bufio.NewScanner(bytes.NewReader(body))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var ev metav1.WatchEvent
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type == "" || len(ev.Object.Raw) == 0 {
					t.Fatalf("not a watch event: %q (%v)", sc.Bytes(), err)
				}
			}
		} else {
			body = rc.Response.Body()
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || int(st.Code) != code || code < 400 {
				t.Fatalf("%d answer is neither a stream nor a Status: %q (%v)", code, body, err)
			}
		}
		if n := panics.n.Load(); n > 0 {
			t.Fatalf("%d panics logged for %s", n, q.Encode())
		}
	})
}
