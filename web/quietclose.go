package web

import (
	"errors"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
)

// Quiet connections. A client may open a connection and send nothing (a
// browser's or a load balancer's spare connection, a port probe), or keep
// one alive after a response and send nothing more, until the server's
// timeout ends it. net/http, and so kube-apiserver, closes such a
// connection without a word: its conn.serve answers no read error that
// isCommonNetReadError names (EOF, a timeout, a failed read such as a
// reset), and its bufio reader returns the timeout, not a request, when no
// byte of one came. fasthttp v1.74 does so only between requests on a
// kept-alive connection: for a connection's first request it hands the
// timeout to the ErrorHandler and writes what that answers, which was a
// 400. A Go client (client-go, kubectl) that opened a connection and
// found it idle then read that 400 as "Unsolicited response received on
// idle HTTP channel".
//
// The same holds for a request whose header was cut short by the timeout:
// net/http reads its header lines until the read fails and answers
// nothing. The one answer it gives is to a request line cut short: its
// line reader returns a partial line without the error, which it then
// refuses as a malformed request line, 400 (a fragment that happens to be
// a whole request line goes on to the headers and ends silently). A body
// cut short is still answered, 400, as readBody's failures are: its
// client awaits a response, so the answer is not unsolicited
// (kube-apiserver sets no body timeout and holds such a request).
//
// fasthttp's ErrorHandler is told neither which part of a request failed
// (a body that fails to read resets the request, header and all) nor
// whether any of it came; crlfConn, which follows the header lines of
// every connection Serve accepts, tells: a request declaring a body puts
// it into passThrough, so before that every failure is within a header,
// and from then on fasthttp's own wrapping of header errors tells them
// from body ones. Where a request line ends it no longer follows, so a
// request line cut short after a request with a body closes quietly
// (net/http: 400), the one case here that differs.

// quietClose reports whether err, which ended the reading of a request,
// is one net/http answers with nothing, and if so closes the connection,
// so that fasthttp's write of the error response goes nowhere (it writes
// whatever the ErrorHandler did, and ignores the write's failure). It
// costs nothing outside the error path.
func quietClose(rc *fasthttp.RequestCtx, err error) bool {
	if !isConnReadError(err) {
		return false
	}
	lines := connLines(rc.Conn())
	switch {
	case lines == nil: // not a connection Serve accepted: no telling
		return false
	case lines.inRequestLine(): // net/http's 400
		return false
	case lines.passThrough && !isHeaderError(err): // a body cut short
		return false
	}
	_ = rc.Conn().Close()
	return true
}

// isConnReadError is net/http's isCommonNetReadError, through the wrapping
// fasthttp adds to errors within a header: a timeout, or a read that
// failed. EOF does not get here: fasthttp closes quietly on it itself.
func isConnReadError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// isHeaderError reports fasthttp's wrapping of an error met within a
// request's header (its headerErrorMsg, in every fasthttp version so far).
// A connection's first request that failed before its first byte gets
// the bare error, but then crlfConn is not in passThrough.
func isHeaderError(err error) bool {
	return strings.HasPrefix(err.Error(), "error when reading request headers")
}

// connLines is the header line state of c, a connection Serve accepted, or
// nil. Only the connection's own goroutine reads it, as it does c.
func connLines(c net.Conn) *headerLines {
	switch c := c.(type) {
	case *crlfConn:
		return &c.lines
	case *crlfTLSConn:
		return &c.lines
	}
	return nil
}
