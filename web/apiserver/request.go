package apiserver

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/engine"
)

// requestTimeout is kube-apiserver's default --request-timeout, the upper
// bound for every request that is not a watch.
const requestTimeout = 60 * time.Second

// request is the state of one resource request.
type request struct {
	h        *Handler
	rc       *fasthttp.RequestCtx
	rt       route
	scope    engine.Scope
	gv       schema.GroupVersion
	warnings engine.Warnings
	query    url.Values
	queried  bool
	cancel   context.CancelFunc
	c        context.Context
}

func newRequest(h *Handler, rc *fasthttp.RequestCtx, rt route) *request {
	r := &request{h: h, rc: rc, rt: rt}
	r.scope = engine.Scope{
		Resource:  rt.res,
		Version:   rt.version,
		Namespace: rt.namespace,
		UserAgent: string(rc.Request.Header.UserAgent()),
		User:      userOf(rc),

		Subresource: rt.subresource,
	}
	r.gv = schema.GroupVersion{Group: rt.res.Group, Version: rt.version}
	// The deprecation warning comes first, as upstream adds it before the
	// handler runs.
	r.warnings.Add(rt.deprecation)
	return r
}

// ctx returns the context for a unary engine call: bounded by ?timeout=
// (capped at one minute, as WithRequestDeadline does) and collecting
// warnings. Shutdown does not cancel it: in-flight requests may finish.
func (r *request) ctx() (context.Context, error) {
	if r.c != nil {
		return r.c, nil
	}
	timeout := requestTimeout
	if v := r.rc.QueryArgs().Peek("timeout"); len(v) > 0 {
		d, err := time.ParseDuration(string(v))
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid timeout specified in the request URL - " + err.Error())
		}
		if d > 0 && d < requestTimeout {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	r.cancel = cancel
	r.c = engine.WithWarnings(ctx, &r.warnings)
	return r.c, nil
}

// finish writes the Warning headers and releases the request context.
func (r *request) finish() {
	if r.cancel != nil {
		r.cancel()
	}
	writeWarnings(&r.rc.Response.Header, r.warnings.List())
}

// Limits of the warning recorder (endpoints/filters/warning.go).
const (
	warningsMaxRunes     = 4 * 1024
	warningItemTruncated = 256
)

// writeWarnings adds one "299 - \"text\"" header per warning. Past 4 KiB
// of text every item is cut to 256 runes and items stop once the budget
// is spent, like upstream's recorder.
func writeWarnings(h *fasthttp.ResponseHeader, list []string) {
	total := 0
	for _, w := range list {
		total += utf8.RuneCountInString(w)
	}
	truncating := total > warningsMaxRunes
	written := 0
	for _, w := range list {
		if truncating && written >= warningsMaxRunes {
			return
		}
		if truncating && utf8.RuneCountInString(w) > warningItemTruncated {
			w = string([]rune(w)[:warningItemTruncated])
		}
		if !utf8.ValidString(w) {
			continue
		}
		written += utf8.RuneCountInString(w)
		h.Add("Warning", warningHeader(w))
	}
}

// warningHeader formats an RFC 7234 warning with code 299 and agent "-"
// (net.NewWarningHeader).
func warningHeader(text string) string {
	var b strings.Builder
	b.Grow(len(text) + 8)
	b.WriteString(`299 - "`)
	for i := 0; i < len(text); i++ {
		if c := text[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(text[i])
	}
	b.WriteByte('"')
	return b.String()
}

// values returns the query as url.Values, nil when there is none.
func (r *request) values() url.Values {
	if r.queried {
		return r.query
	}
	r.queried = true
	args := r.rc.QueryArgs()
	if args.Len() == 0 {
		return nil
	}
	r.query = make(url.Values, args.Len())
	for k, v := range args.All() {
		key := string(k)
		r.query[key] = append(r.query[key], string(v))
	}
	return r.query
}

// coreV1 is the version the option types are registered under in
// engine.Scheme; metaV1 is where TableOptions lives.
var (
	coreV1 = schema.GroupVersion{Version: "v1"}
	metaV1 = schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"}
)

// decodeOptions fills an option struct from the query; malformed values
// are a 400 with the conversion's text, as upstream.
func (r *request) decodeOptions(into runtime.Object, from schema.GroupVersion) error {
	values := r.values()
	if len(values) == 0 {
		return nil
	}
	if err := engine.ParameterCodec.DecodeParameters(values, from, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// body returns the request body, or a 413 beyond the limit. The slice is
// valid until the handler returns.
func (r *request) body() ([]byte, error) {
	b := r.rc.PostBody()
	if len(b) > r.h.maxBody {
		return nil, tooLarge(r.h.maxBody)
	}
	return b, nil
}

// tooLarge is the 413 for a body over limit bytes.
func tooLarge(limit int) error {
	return apierrors.NewRequestEntityTooLargeError("limit is " + strconv.Itoa(limit))
}

// fail writes err as a Status: the answer to a verb that returned an
// error.
func (r *request) fail(err error) {
	r.h.writeError(r.rc, err)
}

// negotiate picks the response media type for a resource endpoint, or
// returns the 406.
func (r *request) negotiate() (mediaOptions, error) {
	mo, ok := negotiateMediaType(b2s(r.rc.Request.Header.Peek("Accept")), r.h.infos, restrictResource, false)
	if !ok {
		return mediaOptions{}, notAcceptable(r.h.mediaTypes)
	}
	return mo, nil
}

// badRequestf builds a BadRequest.
func badRequestf(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
