package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkPatchLarge merge-patches a lease with a 200 KB annotation over
// real HTTP (the noisy neighbour's request), so the body is streamed and
// read as the server reads it; allocations are the whole process's, the
// client's included.
func BenchmarkPatchLarge(b *testing.B) {
	base := startServer(b, nil)
	hc := &fasthttp.HostClient{Addr: strings.TrimPrefix(base, "http://"), MaxResponseBodySize: 8 << 20}
	const create = `{"metadata":{"name":"big"},"spec":{"holderIdentity":"a"}}`
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI(base + leasesPath)
	req.Header.SetContentType("application/json")
	req.SetBodyString(create)
	if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 201 {
		b.Fatalf("create: %v %d %s", err, resp.StatusCode(), resp.Body())
	}
	value := strings.Repeat("x", 200_000)
	bodies := [2][]byte{
		fmt.Appendf(nil, `{"metadata":{"annotations":{"noise":"a%s"}}}`, value),
		fmt.Appendf(nil, `{"metadata":{"annotations":{"noise":"b%s"}}}`, value),
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(bodies[0])))
	for i := 0; b.Loop(); i++ {
		req.Reset()
		req.Header.SetMethod("PATCH")
		req.SetRequestURI(base + leasesPath + "/big")
		req.Header.SetContentType("application/merge-patch+json")
		req.SetBodyRaw(bodies[i%2])
		if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("patch: %v %d %.300s", err, resp.StatusCode(), resp.Body())
		}
	}
}
