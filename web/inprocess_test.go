package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/url"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/web"
)

// serveInProcess runs one request through the handler without a network.
func serveInProcess(h fasthttp.RequestHandler, rc *fasthttp.RequestCtx, req *fasthttp.Request) {
	rc.Response.Reset()
	rc.Init(req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	h(rc)
}

// panicCounter is a slog handler counting logged panics.
type panicCounter struct{ n atomic.Int64 }

func (p *panicCounter) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		p.n.Add(1)
	}
	return nil
}
func (p *panicCounter) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicCounter) WithGroup(string) slog.Handler      { return p }

// FuzzDecodeRequest sends arbitrary bodies and content types to the
// create, update and patch handlers: the server must never panic and must
// answer every failure with a Status.
func FuzzDecodeRequest(f *testing.F) {
	panics := &panicCounter{}
	srv := newServer(f, func(o *web.Options) {
		o.Logger = slog.New(panics)
		o.MaxRequestBodyBytes = 64 << 10
	})
	h := srv.Handler()
	for _, seed := range []struct {
		verb      uint8
		ct, query string
		body      []byte
	}{
		{0, "application/json", "", []byte(leaseBody)},
		{0, "", "fieldValidation=Strict", []byte(`{"metadata":{"name":"x"},"spec":{"foo":1,"foo":2}}`)},
		{0, "application/yaml", "", []byte("metadata:\n  name: y1\n")},
		{0, "application/vnd.kubernetes.protobuf", "", []byte("k8s\x00\n\x02\x12\x00")},
		{1, "application/json", "", []byte(`{"metadata":{"name":"f"},"spec":{"renewTime":"2024"}}`)},
		{1, "application/json;charset=utf-8", "dryRun=All", []byte(`{"apiVersion":"v1","kind":"Status"}`)},
		{2, "application/json-patch+json", "", []byte(`[{"op":"add","path":"/spec/x","value":1}]`)},
		{2, "application/merge-patch+json", "", []byte(`{"spec":null}`)},
		{2, "application/strategic-merge-patch+json", "", []byte(`{"metadata":{"$patch":"delete"}}`)},
		{2, "application/apply-patch+yaml", "fieldManager=f&force=true", []byte("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: f\n")},
		{2, "text/plain", "", []byte("x")},
		{0, "application/json", "", bytes.Repeat([]byte("["), 100000)},
	} {
		f.Add(seed.verb, seed.ct, seed.query, seed.body)
	}
	f.Fuzz(func(t *testing.T, verb uint8, ct, query string, body []byte) {
		// The target is body decoding; a query that is not a valid URL
		// part would only change the path.
		query = url.PathEscape(query)
		var req fasthttp.Request
		switch verb % 3 {
		case 0:
			req.Header.SetMethod("POST")
			req.SetRequestURI(leasesPath + "?" + query)
		case 1:
			req.Header.SetMethod("PUT")
			req.SetRequestURI(leasesPath + "/f?" + query)
		default:
			req.Header.SetMethod("PATCH")
			req.SetRequestURI(leasesPath + "/f?" + query)
		}
		if ct != "" {
			req.Header.SetContentType(ct)
		}
		req.Header.Set("Accept", "application/json")
		req.SetBody(body)
		var rc fasthttp.RequestCtx
		done := make(chan struct{})
		go func() {
			defer close(done)
			serveInProcess(h, &rc, &req)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("request hung: %s %q %q\n%s", req.Header.Method(), ct, body, buf[:goruntime.Stack(buf, true)])
		}
		if n := panics.n.Load(); n > 0 {
			t.Fatalf("%d panics logged", n)
		}
		code := rc.Response.StatusCode()
		if code < 400 {
			return
		}
		var st struct {
			Kind string `json:"kind"`
			Code int    `json:"code"`
		}
		if err := json.Unmarshal(rc.Response.Body(), &st); err != nil || st.Kind != "Status" || st.Code != code {
			t.Fatalf("%d answer is not a Status: %q (%v)", code, rc.Response.Body(), err)
		}
	})
}

// Benchmarks of the hot path, through the handler without a network:
// GET and PUT of one Lease, as leader election does every few seconds.
func BenchmarkGetLease(b *testing.B)         { benchLease(b, "GET", "application/json", "") }
func BenchmarkGetLeaseProtobuf(b *testing.B) { benchLease(b, "GET", protobufType, "") }
func BenchmarkPutLease(b *testing.B)         { benchLease(b, "PUT", "application/json", "application/json") }
func BenchmarkPutLeaseProtobuf(b *testing.B) {
	benchLease(b, "PUT", protobufType, protobufType)
}

func benchLease(b *testing.B, method, accept, contentType string) {
	srv := newServer(b, nil)
	h := srv.Handler()
	var rc fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(leasesPath)
	req.SetBodyString(`{"metadata":{"name":"bench"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"renewTime":"2026-01-01T00:00:00.000000Z"}}`)
	serveInProcess(h, &rc, &req)
	if rc.Response.StatusCode() != 201 {
		b.Fatalf("create: %s", rc.Response.Body())
	}
	// The PUT body: the object as the client last saw it, in the client's
	// encoding, with a changing renewTime so every PUT writes.
	var get fasthttp.Request
	get.Header.SetMethod("GET")
	get.SetRequestURI(leasesPath + "/bench")
	get.Header.Set("Accept", accept)
	get.Header.Set("User-Agent", "bench/v0.0.0")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if method == "GET" {
			serveInProcess(h, &rc, &get)
			if rc.Response.StatusCode() != 200 {
				b.Fatalf("get: %s", rc.Response.Body())
			}
			continue
		}
		b.StopTimer()
		serveInProcess(h, &rc, &get)
		body := append([]byte(nil), rc.Response.Body()...)
		body = bumpRenewTime(b, body, contentType, i)
		var put fasthttp.Request
		put.Header.SetMethod("PUT")
		put.SetRequestURI(leasesPath + "/bench")
		put.Header.SetContentType(contentType)
		put.Header.Set("Accept", accept)
		put.Header.Set("User-Agent", "bench/v0.0.0")
		put.SetBody(body)
		b.StartTimer()
		serveInProcess(h, &rc, &put)
		if rc.Response.StatusCode() != 200 {
			b.Fatalf("put: %s", rc.Response.Body())
		}
	}
}

// bumpRenewTime returns body with spec.renewTime moved on, so that the
// PUT is a real write rather than a no-op.
func bumpRenewTime(tb testing.TB, body []byte, contentType string, i int) []byte {
	info, ok := runtime.SerializerInfoForMediaType(engine.Codecs.SupportedMediaTypes(), contentType)
	if !ok {
		tb.Fatalf("no serializer for %s", contentType)
	}
	obj, _, err := info.Serializer.Decode(body, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	l := obj.(*coordinationv1.Lease)
	t := metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i+1) * time.Microsecond))
	l.Spec.RenewTime = &t
	var out bytes.Buffer
	if err := engine.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion).Encode(l, &out); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}
