package web

import (
	"errors"
	"net"

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
// cut short is the handler's to answer, there and here (answerBodyError).

// quietClose reports whether err, which ended the reading of a request,
// is one net/http answers with nothing, and if so closes the connection,
// so that fasthttp's write of the error response goes nowhere (it writes
// whatever the ErrorHandler did, and ignores the write's failure). It
// costs nothing outside the error path.
func quietClose(rc *fasthttp.RequestCtx, err error) bool {
	if !isConnReadError(err) || !inHeader(rc) || requestLineCut(rc.Conn()) {
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

// inHeader reports whether the request's header was still being read: a
// header fasthttp failed to read is reset, and one that was read and has a
// body to read declares its length (or -1, chunked). A body read that
// fails is answered like readBody's failures: 400.
func inHeader(rc *fasthttp.RequestCtx) bool {
	return rc.Request.Header.ContentLength() == 0
}

// requestLineCut reports whether c's bytes since its last request end in
// part of a request line (see above). crlfConn follows the lines; on a
// connection it no longer follows (after a request with a body) or does
// not wrap (a caller's own fasthttp.Server), this reports false, and the
// connection closes quietly as for a header cut short.
func requestLineCut(c net.Conn) bool {
	switch c := c.(type) {
	case *crlfConn:
		return c.lines.inRequestLine()
	case *crlfTLSConn:
		return c.lines.inRequestLine()
	}
	return false
}
