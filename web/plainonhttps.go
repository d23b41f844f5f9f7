package web

import (
	"crypto/tls"
	"errors"
	"io"
)

// A plain HTTP request sent to the TLS port (http:// in a URL that should
// say https://) fails the TLS handshake at its first bytes. net/http, and
// so kube-apiserver, then answers in plain text on the bare connection,
// so that the client shows why instead of an empty reply; its message is
// what kubectl prints (Error from server (BadRequest): ...).
const plainOnTLSAnswer = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

// Handshake runs the TLS handshake (fasthttp calls it first thing) and
// answers a plain HTTP request as net/http does.
func (c *crlfTLSConn) Handshake() error {
	err := c.tls.Handshake()
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		_, _ = io.WriteString(re.Conn, plainOnTLSAnswer)
		_ = re.Conn.Close()
	}
	return err
}

// looksLikeHTTP is net/http's tlsRecordHeaderLooksLikeHTTP: the first five
// bytes of the requests a client would send first.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
