package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/engine/schema"
)

// The media types of /openapi/v2's protobuf form. kubectl and client-go's
// discovery ask for the @ spelling; kube-openapi answers both with the
// dotted one.
const (
	openAPIV2ProtoDeprecated = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
	openAPIV2Proto           = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// openAPI serves /openapi/v2 and /openapi/v3 the way kube-openapi's
// handler and handler3 do: documents with ETags (sha512), the v3 index
// pointing at ?hash= URLs, immutable caching for hashed requests.
// Documents are rendered on first use and kept.
type openAPI struct {
	mu    sync.Mutex
	docs  map[string]openAPIDoc // v3 by path ("apis/coordination.k8s.io/v1")
	index *openAPIDoc
	v2    *openAPIDoc
	// v2Proto is v2 as gnostic's protobuf message, with v2's ETag: the
	// response varies on Accept, so one tag serves both (kube-openapi's
	// choice).
	v2Proto *openAPIDoc
	started time.Time
}

type openAPIDoc struct {
	data []byte
	etag string
}

func newOpenAPI() *openAPI {
	return &openAPI{docs: map[string]openAPIDoc{}, started: time.Now()}
}

func newDoc(data []byte) openAPIDoc {
	return openAPIDoc{data: data, etag: fmt.Sprintf("%X", sha512.Sum512(data))}
}

// v2Doc returns /openapi/v2 as JSON or as protobuf. Each form is
// rendered once, on its first request: the protobuf costs a parse of the
// JSON (tens of milliseconds), which most servers never need to pay.
func (o *openAPI) v2Doc(protobuf bool) (openAPIDoc, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.v2 == nil {
		data, err := schema.V2Document()
		if err != nil {
			return openAPIDoc{}, err
		}
		d := newDoc(data)
		o.v2 = &d
	}
	if !protobuf {
		return *o.v2, nil
	}
	if o.v2Proto == nil {
		doc, err := openapi_v2.ParseDocument(o.v2.data)
		if err != nil {
			return openAPIDoc{}, fmt.Errorf("parsing the openapi v2 document: %w", err)
		}
		data, err := proto.Marshal(doc)
		if err != nil {
			return openAPIDoc{}, fmt.Errorf("encoding the openapi v2 document as protobuf: %w", err)
		}
		o.v2Proto = &openAPIDoc{data: data, etag: o.v2.etag}
	}
	return *o.v2Proto, nil
}

// negotiateOpenAPIV2 picks /openapi/v2's form as kube-openapi's handler
// does: the first Accept clause, best first, that matches JSON or one of
// the protobuf types, JSON winning a wildcard. ok is false when none
// matches (406).
func negotiateOpenAPIV2(rc *fasthttp.RequestCtx) (protobuf, ok bool) {
	accept := b2s(rc.Request.Header.Peek("Accept"))
	if accept == "" {
		return false, true
	}
	for _, c := range parseAccept(accept) {
		if c.typ != "*" && c.typ != "application" {
			continue
		}
		switch c.sub {
		case "*", "json":
			return false, true
		case openAPIV2ProtoDeprecated, openAPIV2Proto:
			return true, true
		}
	}
	return false, false
}

// v3Doc returns the document of path, rendering it once.
func (o *openAPI) v3Doc(path string) (openAPIDoc, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d, ok := o.docs[path]; ok {
		return d, nil
	}
	data, err := schema.V3DocumentForPath(path)
	if err != nil {
		return openAPIDoc{}, err
	}
	d := newDoc(data)
	o.docs[path] = d
	return d, nil
}

// v3Index returns the /openapi/v3 discovery document.
func (o *openAPI) v3Index() (openAPIDoc, error) {
	o.mu.Lock()
	if o.index != nil {
		defer o.mu.Unlock()
		return *o.index, nil
	}
	o.mu.Unlock()
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	paths := map[string]entry{}
	for _, p := range schema.V3Paths() {
		d, err := o.v3Doc(p)
		if err != nil {
			return openAPIDoc{}, err
		}
		paths[p] = entry{hashedURL(p, d.etag)}
	}
	data, err := json.Marshal(struct {
		Paths map[string]entry `json:"paths"`
	}{paths})
	if err != nil {
		return openAPIDoc{}, fmt.Errorf("encoding openapi index: %w", err)
	}
	d := newDoc(data)
	o.mu.Lock()
	o.index = &d
	o.mu.Unlock()
	return d, nil
}

func hashedURL(path, etag string) string {
	return (&url.URL{Path: "/openapi/v3/" + path, RawQuery: url.Values{"hash": {etag}}.Encode()}).String()
}

// serveOpenAPI handles /openapi/...; unknown paths are left to the caller.
func (h *Handler) serveOpenAPI(rc *fasthttp.RequestCtx, path string) bool {
	o := h.openapi
	switch {
	case path == "/openapi/v2":
		rc.Response.Header.Set("Vary", "Accept")
		protobuf, ok := negotiateOpenAPIV2(rc)
		if !ok {
			rc.SetStatusCode(http.StatusNotAcceptable)
			return true
		}
		d, err := o.v2Doc(protobuf)
		if err != nil {
			h.openAPIError(rc, err)
			return true
		}
		contentType := "application/json"
		if protobuf {
			contentType = "application/" + openAPIV2Proto
		}
		o.serveDoc(rc, d, contentType, false)
		return true
	case path == "/openapi/v3" || path == "/openapi/v3/":
		d, err := o.v3Index()
		if err != nil {
			h.openAPIError(rc, err)
			return true
		}
		// kube-apiserver sends the index as text/plain.
		o.serveDoc(rc, d, "text/plain; charset=utf-8", false)
		return true
	case strings.HasPrefix(path, "/openapi/v3/"):
		p := strings.Trim(path[len("/openapi/v3/"):], "/")
		d, err := o.v3Doc(p)
		if err != nil {
			return false
		}
		rc.Response.Header.Set("Vary", "Accept")
		if !acceptsJSON(rc) {
			rc.SetStatusCode(http.StatusNotAcceptable)
			return true
		}
		if hash := rc.QueryArgs().Peek("hash"); len(hash) > 0 {
			if string(hash) != d.etag {
				// http.Redirect's relative Location, not fasthttp's
				// absolute one.
				u := hashedURL(p, d.etag)
				rc.Response.Header.Set("Location", u)
				rc.SetContentType("text/html; charset=utf-8")
				rc.SetStatusCode(http.StatusMovedPermanently)
				rc.SetBodyString("<a href=\"" + html.EscapeString(u) + "\">Moved Permanently</a>.\n\n")
				return true
			}
			o.serveDoc(rc, d, "application/json", true)
			return true
		}
		o.serveDoc(rc, d, "application/json", false)
		return true
	}
	return false
}

// serveDoc writes a document with its ETag, answering 304 to a matching
// If-None-Match (http.ServeContent's behaviour upstream).
func (o *openAPI) serveDoc(rc *fasthttp.RequestCtx, d openAPIDoc, contentType string, immutable bool) {
	quoted := strconv.Quote(d.etag)
	hdr := &rc.Response.Header
	hdr.Set("Etag", quoted)
	hdr.Set("Last-Modified", o.started.UTC().Format(http.TimeFormat))
	if immutable {
		hdr.Set("Cache-Control", "public, immutable")
		hdr.Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC1123))
	}
	if inm := string(rc.Request.Header.Peek("If-None-Match")); inm != "" && (inm == quoted || inm == "*") {
		rc.SetStatusCode(http.StatusNotModified)
		return
	}
	rc.SetContentType(contentType)
	rc.SetStatusCode(http.StatusOK)
	if !rc.IsHead() {
		rc.SetBody(d.data)
	}
}

// acceptsJSON reports whether the first Accept clause that names a type
// kube-openapi knows is JSON (or a wildcard).
func acceptsJSON(rc *fasthttp.RequestCtx) bool {
	accept := b2s(rc.Request.Header.Peek("Accept"))
	if accept == "" {
		return true
	}
	for _, c := range parseAccept(accept) {
		if c.typ != "*" && c.typ != "application" {
			continue
		}
		switch c.sub {
		case "*", "json":
			return true
		case "com.github.proto-openapi.spec.v2@v1.0+protobuf", "com.github.proto-openapi.spec.v2.v1.0+protobuf",
			"com.github.proto-openapi.spec.v3@v1.0+protobuf", "com.github.proto-openapi.spec.v3.v1.0+protobuf":
			return false
		}
	}
	return false
}

// openAPIError reports a document that could not be rendered.
func (h *Handler) openAPIError(rc *fasthttp.RequestCtx, err error) {
	h.writeError(rc, fmt.Errorf("rendering openapi: %w", err))
}
