package web

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// routablePath reports whether the request's path, exactly as sent, is the
// path the server routes and authorizes on.
//
// fasthttp's Path() is the sent path percent-decoded, with "//" collapsed
// and "." and ".." segments resolved. kube-apiserver decodes but resolves
// nothing, so `leases/a%2F..` there names the subresource ".." of lease
// "a" (a 404), while resolving it would turn a single-object DELETE into a
// DELETE of the whole collection, and let authorization and routing see a
// path other than the one a proxy in front authorized. A path that fasthttp
// would have to resolve therefore names no route here.
func routablePath(rc *fasthttp.RequestCtx) bool {
	raw := rc.URI().PathOriginal()
	if len(raw) == 0 {
		return true // fasthttp routes it as "/"
	}
	decoded := raw
	if bytes.IndexByte(raw, '%') >= 0 {
		decoded = percentDecode(raw)
	}
	return bytes.Equal(decoded, rc.Path())
}

// percentDecode decodes %XX escapes as fasthttp does for paths: '+' stays,
// and a malformed escape is kept as sent.
func percentDecode(src []byte) []byte {
	dst := make([]byte, 0, len(src))
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '%' && i+2 < len(src) {
			hi, ok1 := unhex(src[i+1])
			lo, ok2 := unhex(src[i+2])
			if ok1 && ok2 {
				dst = append(dst, hi<<4|lo)
				i += 2
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
