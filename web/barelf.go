package web

import (
	"bytes"
	"crypto/tls"
	"net"
)

// Bare LF line endings. Go's net/http, and so kube-apiserver, reads request
// headers whose lines end in a bare "\n" instead of "\r\n". fasthttp reads
// such lines too, but finds the end of the header block only as
// "\r\n\r\n": a request whose headers end in "\n\n" waits, unanswered, for
// bytes that never come, until the read timeout (or, pipelined, takes the
// next request's lines for its own). crlfConn closes the gap:
// it inserts the missing "\r" before every bare "\n" of a request's header
// block, so that fasthttp reads the request net/http would have read.
// Nothing else changes: the lines are the same, and so are the headers.
//
// To rewrite only header blocks it must know where each one starts. The
// first starts the connection; a request that declares no body (no
// Content-Length, no Transfer-Encoding: fasthttp reads no body then) ends
// with its header block, so the next request starts right after it. Once
// a request declares a body the connection is passed through untouched
// for good: delimiting bodies stays fasthttp's job alone, never done twice
// in two ways. A later bare-LF request on such a connection meets the read
// timeout as before; the clients that send bare LF, hand-written requests
// and scripts, seldom send one after a body on the same connection.
//
// Cost: 128 bytes per connection, a scan of the header bytes (no
// allocation) on CRLF requests, and on a read holding a bare LF one copy
// of that read's tail, freed once delivered.

// crlfListener wraps accepted connections in crlfConn.
type crlfListener struct{ net.Listener }

func (l crlfListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &crlfConn{Conn: c}
	if tc, ok := c.(*tls.Conn); ok {
		// fasthttp finds TLS (handshake, client certificates) through
		// these two methods.
		return &crlfTLSConn{crlfConn: cc, tls: tc}, nil
	}
	return cc, nil
}

// crlfTLSConn is a crlfConn over TLS.
type crlfTLSConn struct {
	*crlfConn
	tls *tls.Conn
}

// Handshake is in plainonhttps.go.
func (c *crlfTLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

// crlfConn reads a connection with every bare LF of its request header
// blocks turned into CRLF.
type crlfConn struct {
	net.Conn
	lines headerLines
	// pending holds bytes read from Conn but not returned yet, from the
	// first bare LF of a read on. It is a copy of that read's tail (at
	// most one read, fasthttp's read buffer), made only on a read that
	// needs a CR and dropped once delivered.
	pending []byte
	// readErr is an error Conn returned with bytes still pending.
	readErr error
}

func (c *crlfConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		return c.drain(p), nil
	}
	if c.readErr != nil {
		err := c.readErr
		c.readErr = nil
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if c.lines.passThrough || n == 0 {
		return n, err
	}
	i := c.lines.feed(p[:n])
	if i < 0 {
		return n, err
	}
	// p[i] is a bare LF: the bytes from it on are delivered from a copy,
	// with the CRs they need, as far as p has room.
	c.pending, c.readErr = append([]byte(nil), p[i:n]...), err
	return i + c.drain(p[i:]), nil
}

// drain moves pending bytes into p, a CR before each bare LF of a header
// block, until p is full or nothing is pending. Every byte is scanned
// once, and p is filled, so that a header of many bare LFs costs neither
// quadratic copying here nor a read (and a re-parse by fasthttp) per line.
func (c *crlfConn) drain(p []byte) int {
	w := 0
	for w < len(p) && len(c.pending) > 0 {
		room := min(len(p)-w, len(c.pending))
		i := -1
		if !c.lines.passThrough {
			i = c.lines.feed(c.pending[:room])
		}
		if i < 0 {
			copy(p[w:], c.pending[:room])
			c.pending = c.pending[room:]
			w += room
			continue
		}
		// i < room, so p has room for the CR; the LF stays pending and
		// is fed again, now after a CR.
		w += copy(p[w:], c.pending[:i])
		p[w] = '\r'
		w++
		c.lines.sawCR()
		c.pending = c.pending[i:]
	}
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return w
}

// headerLines follows the lines of a connection's request header blocks
// (see the comment at the top of this file).
type headerLines struct {
	// passThrough is set once a request declared a body.
	passThrough bool
	// inBlock is set past the request line of the current request; empty
	// lines before a request line are skipped, as fasthttp skips them.
	inBlock bool
	// hasBody records a Content-Length or Transfer-Encoding header in the
	// current block.
	hasBody bool
	// lineLen and lastCR describe the current line so far.
	lineLen int
	lastCR  bool
	// name holds the current line's first bytes, enough to recognise the
	// headers that declare a body.
	name    [len("transfer-encoding")]byte
	nameLen int
}

// feed follows b, which continues what feed saw before, and returns the
// index of the first bare LF in it, or -1. It stops there: the caller
// inserts a CR (sawCR) and feeds the LF again.
func (s *headerLines) feed(b []byte) int {
	for i := 0; i < len(b) && !s.passThrough; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			s.add(b[i:])
			return -1
		}
		s.add(b[i : i+j])
		if !s.lastCR {
			return i + j
		}
		s.endLine()
		i += j + 1
	}
	return -1
}

// add appends part of a line without its LF.
func (s *headerLines) add(part []byte) {
	if len(part) == 0 {
		return
	}
	s.lineLen += len(part)
	s.lastCR = part[len(part)-1] == '\r'
	s.nameLen += copy(s.name[s.nameLen:], part)
}

// inRequestLine reports a request line begun and not ended: part of a
// line, not an empty one, outside a header block.
func (s *headerLines) inRequestLine() bool {
	return !s.passThrough && !s.inBlock && s.lineLen > 0 && !(s.lineLen == 1 && s.lastCR)
}

// sawCR appends the CR the reader inserted.
func (s *headerLines) sawCR() {
	s.lineLen++
	s.lastCR = true
	if s.nameLen < len(s.name) {
		s.name[s.nameLen] = '\r'
		s.nameLen++
	}
}

// endLine closes the current line at its LF.
func (s *headerLines) endLine() {
	empty := s.lineLen == 0 || (s.lineLen == 1 && s.lastCR)
	switch {
	case !s.inBlock:
		s.inBlock = !empty
	case empty: // the end of the header block
		s.inBlock = false
		s.passThrough = s.hasBody
		s.hasBody = false
	case declaresBody(s.name[:s.nameLen]):
		s.hasBody = true
	}
	s.lineLen, s.lastCR, s.nameLen = 0, false, 0
}

// declaresBody reports a header line that starts like Content-Length or
// Transfer-Encoding, in any case. Any such prefix counts: a false match
// only ends the rewriting early, which is safe.
func declaresBody(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	switch line[0] | 0x20 {
	case 'c':
		return hasPrefixFold(line, "content-length")
	case 't':
		return hasPrefixFold(line, "transfer-encoding")
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}
