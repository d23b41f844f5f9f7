package web

import (
	"bytes"
	"errors"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/flowcontrol"
)

// flowRequest is what flow control sees of a request.
func flowRequest(rc *fasthttp.RequestCtx, info *auth.RequestInfo, user *auth.User) flowcontrol.Request {
	r := flowcontrol.Request{
		Path: info.Path, Verb: info.Verb, IsResourceRequest: info.IsResourceRequest,
		Resource: info.Resource, Subresource: info.Subresource,
		BodyBytes: rc.Request.Header.ContentLength(),
		Addr:      rc.RemoteIP().String(),
	}
	if r.BodyBytes == -2 { // fasthttp: neither Content-Length nor chunked, so no body
		r.BodyBytes = 0
	}
	if user.Name != "" && user.Name != auth.AnonymousUser {
		r.User = user.Name
	}
	if info.IsResourceRequest && (info.Verb == "list" || info.Verb == "watch") {
		q := rc.QueryArgs()
		r.Limit = int64(max(q.GetUintOrZero("limit"), 0))
		rv := string(q.Peek("resourceVersion"))
		initial := rv == "" || rv == "0" || string(q.Peek("sendInitialEvents")) == "true"
		// A LIST at resourceVersion 0 ignores limit, as upstream's watch
		// cache does.
		r.FullList = !q.Has("continue") && (info.Verb == "list" && (r.Limit == 0 || rv == "0") ||
			info.Verb == "watch" && initial)
		if r.FullList {
			r.Limit = 0
		}
		r.Selective = q.Has("labelSelector") || q.Has("fieldSelector") || info.Name != ""
	}
	return r
}

// tooManyRequests answers a request flow control turned away: 429 with
// Retry-After and a Status of reason TooManyRequests.
func (s *Server) tooManyRequests(rc *fasthttp.RequestCtx, err error) {
	retry := 1
	var rej *flowcontrol.Rejected
	if errors.As(err, &rej) {
		retry = rej.RetryAfter
	}
	s.api.WriteError(rc, apierrors.NewTooManyRequests("Too many requests, please try again later.", retry))
}

// holdListBytes keeps a LIST's share of the byte budget until its
// response has been written: the body becomes a stream whose Close
// (fasthttp closes a body stream once it is written, or when the
// connection fails) gives the budget back. It reports whether the ticket
// passed its budget on to the stream.
func holdListBytes(rc *fasthttp.RequestCtx, t *flowcontrol.Ticket) bool {
	resp := &rc.Response
	if resp.IsBodyStream() || rc.IsHead() {
		return false
	}
	if resp.StatusCode() == fasthttp.StatusOK {
		t.Observe(len(resp.Body()))
	}
	// The body is either the handler's own slice (SetBodyRaw) or
	// fasthttp's pooled buffer; SwapBody takes the latter out of the
	// pool's reach, so the stream can read it after the handler returns.
	body := resp.Body()
	if pooled := resp.SwapBody(nil); len(pooled) > 0 {
		body = pooled
	}
	resp.SetBodyStream(&listBody{Reader: bytes.NewReader(body), t: t}, len(body))
	return true
}

// listBody is a LIST response being written.
type listBody struct {
	*bytes.Reader
	t *flowcontrol.Ticket
}

func (b *listBody) Close() error {
	b.t.ReleaseBytes()
	return nil
}
