package web

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/web/apiserver"
)

// Request bodies are streamed (fasthttp's StreamRequestBody): fasthttp
// reads at most preReadBytes of a body before the handler runs, so a client
// that is not yet authenticated holds no more than that, however large the
// Content-Length it announces. The handler reads the rest only once the
// request is authenticated and authorized (readBody), bounded per request by
// the body limit and across requests by a budget of bytes in flight.

// preReadBytes is what fasthttp buffers of a streamed body before calling
// the handler (readBodyWithStreaming's fixed pre-read).
const preReadBytes = 8 << 10

// DefaultMaxBodyBytesInFlight is the default budget of request body bytes
// held in memory at once, across all requests.
const DefaultMaxBodyBytesInFlight = 64 << 20

// chunkReadBytes is how much of a chunked body is reserved and read at a time.
const chunkReadBytes = 64 << 10

// bodyBudget bounds the request body bytes held in memory at once.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// take reserves n bytes, or reports that the budget cannot hold them.
func (b *bodyBudget) take(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// errBodyBudget is returned when the bytes in flight would exceed the budget.
var errBodyBudget = errors.New("request bodies in flight exceed the server's budget")

// errBodyTooLarge is returned for a body over the per-request limit.
var errBodyTooLarge = errors.New("request body over the limit")

// readBody reads the rest of a streamed request body into memory, for an
// authenticated and authorized request. It returns how many budget bytes it
// holds, to be given back once the request is answered. A body over the
// limit, or one the budget cannot hold, is not read: the caller answers and
// closes the connection.
func (s *Server) readBody(rc *fasthttp.RequestCtx) (held int64, err error) {
	req := &rc.Request
	if !req.IsBodyStream() {
		return 0, nil
	}
	stream := rc.RequestBodyStream()
	limit := int64(s.maxBody)
	if n := int64(req.Header.ContentLength()); n >= 0 {
		if n > limit {
			return 0, errBodyTooLarge
		}
		if !s.bodies.take(n) {
			return 0, errBodyBudget
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(stream, buf); err != nil {
			return n, err
		}
		req.SetBodyRaw(buf)
		apiserver.MarkBodyOwned(rc) // buf is this request's alone
		return n, nil
	}
	// Chunked: the size is known only at the end, so reserve as it grows.
	var buf []byte
	for {
		if int64(len(buf)) > limit {
			return held, errBodyTooLarge
		}
		if !s.bodies.take(chunkReadBytes) {
			return held, errBodyBudget
		}
		held += chunkReadBytes
		buf = append(buf, make([]byte, chunkReadBytes)...)
		n, err := io.ReadFull(stream, buf[len(buf)-chunkReadBytes:])
		buf = buf[:len(buf)-chunkReadBytes+n]
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return held, err
		}
	}
	if int64(len(buf)) > limit {
		return held, errBodyTooLarge
	}
	req.SetBodyRaw(buf)
	apiserver.MarkBodyOwned(rc)
	return held, nil
}

// answerBodyError answers a request whose body readBody refused or could
// not read.
func (s *Server) answerBodyError(rc *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		// Read (and drop) a moderately oversized body so that the client
		// is still reading when the 413 arrives: closing on unread data
		// would reset the connection under it.
		discardBody(rc, 2*int64(s.maxBody))
		s.api.WriteError(rc, s.api.TooLarge())
	case errors.Is(err, errBodyBudget):
		// Dropping the body costs no memory, and lets the client read the
		// 429 instead of a reset connection.
		discardBody(rc, int64(s.maxBody))
		tooManyRequests(rc)
	default:
		// The client stopped sending, or sent a malformed chunk.
		closeAfterResponse(rc)
		rc.Error("400 Bad Request", fasthttp.StatusBadRequest)
	}
}

// drainBytes is how much of an unread body is read and dropped so that the
// connection can serve the next request (net/http's maxPostHandlerReadBytes
// has the same purpose); a longer body closes the connection instead.
const drainBytes = 256 << 10

// discardBody reads and drops up to max bytes of a streamed body that the
// handler answers without using, without holding them in memory. If more
// remains, the connection closes after the response: unread body bytes
// would otherwise be parsed as the next request.
func discardBody(rc *fasthttp.RequestCtx, max int64) {
	if !rc.Request.IsBodyStream() {
		return
	}
	if n := rc.Request.Header.ContentLength(); n > int(max) {
		closeAfterResponse(rc) // not worth reading
		return
	}
	if n, err := io.CopyN(io.Discard, rc.RequestBodyStream(), max+1); n > max || (err != nil && !errors.Is(err, io.EOF)) {
		closeAfterResponse(rc)
	}
}

// conflictingFraming reports a request that carries both Content-Length and
// Transfer-Encoding. RFC 9112 (6.3) lets a server process it only by closing
// the connection afterwards; such requests are what request smuggling
// through a proxy relies on, so leasehold refuses them outright.
func conflictingFraming(rc *fasthttp.RequestCtx) bool {
	h := &rc.Request.Header
	if h.ContentLength() != -1 { // only a chunked request can carry both
		return false
	}
	return hasHeader(h.RawHeaders(), "content-length")
}

// hasHeader reports whether the raw header block holds a field named name,
// matched case-insensitively at the start of a line.
func hasHeader(raw []byte, name string) bool {
	for len(raw) > 0 {
		line, rest, _ := bytes.Cut(raw, []byte("\n"))
		raw = rest
		if len(line) > len(name) && line[len(name)] == ':' && bytes.EqualFold(line[:len(name)], []byte(name)) {
			return true
		}
	}
	return false
}

// closeKey marks a request whose connection must close after the response.
const closeKey = "leasehold.closeConnection"

// closeAfterResponse makes the connection close once the response is
// written. It is applied when serve returns (applyClose), because writing
// an error response resets the response headers.
func closeAfterResponse(rc *fasthttp.RequestCtx) { rc.SetUserValue(closeKey, true) }

// applyClose sets Connection: close on the response of a marked request.
func applyClose(rc *fasthttp.RequestCtx) {
	if rc.UserValue(closeKey) != nil {
		rc.SetConnectionClose()
	}
}
