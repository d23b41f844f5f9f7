package apiserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/web/auth"
)

// DefaultMaxRequestBodyBytes is kube-apiserver's --max-request-body-bytes
// default (3 MiB).
const DefaultMaxRequestBodyBytes = 3 * 1024 * 1024

// Options configures a Handler.
type Options struct {
	Engine engine.API
	Logger *slog.Logger
	// MaxRequestBodyBytes bounds request bodies; 0 means the default.
	MaxRequestBodyBytes int
	// Streams ends every watch stream when it is cancelled (server
	// shutdown); nil means streams end only on their own.
	Streams context.Context
	// Authorizer answers SelfSubjectAccessReviews and
	// SelfSubjectRulesReviews; nil allows everything, as a server without
	// a policy does.
	Authorizer auth.Authorizer
}

// Handler serves the Kubernetes API paths (/api, /apis/..., /openapi/...).
type Handler struct {
	eng     engine.API
	log     *slog.Logger
	maxBody int
	streams context.Context
	authz   auth.Authorizer

	infos       []runtime.SerializerInfo
	mediaTypes  []string // json, yaml, protobuf
	streamTypes []string // the ";stream=watch" forms that exist
	// produces and producesAll are the go-restful route Produces lists,
	// joined for the router's 406 message.
	produces, producesAll string

	encoders map[encoderKey]runtime.Encoder
	// frames shares encoded JSON watch events between watchers.
	frames *frameCache
	// watchStreams counts the open batched watch streams, which set the
	// flush interval (watchFlushInterval).
	watchStreams atomic.Int64
	groups       map[string]*group
	disc         *discovery
	openapi      *openAPI
}

// group is one served API group with its versions, most preferred first.
type group struct {
	name     string
	versions []string
}

// New builds a Handler for the resources opts.Engine serves.
func New(opts Options) (*Handler, error) {
	if opts.Engine == nil {
		return nil, errors.New("apiserver: Options.Engine is required")
	}
	h := &Handler{
		eng:     opts.Engine,
		log:     opts.Logger,
		maxBody: opts.MaxRequestBodyBytes,
		streams: opts.Streams,
		authz:   opts.Authorizer,
		infos:   engine.Codecs.SupportedMediaTypes(),
	}
	if h.authz == nil {
		h.authz = auth.AllowAll{}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxRequestBodyBytes
	}
	if h.streams == nil {
		h.streams = context.Background()
	}
	h.mediaTypes = mediaTypeNames(h.infos, false)
	h.streamTypes = mediaTypeNames(h.infos, true)
	h.produces = strings.Join(h.mediaTypes, ", ")
	h.producesAll = strings.Join(append(append([]string(nil), h.mediaTypes...), h.streamTypes...), ", ")
	served := append(opts.Engine.Resources(), reviewResources()...)
	h.groups = groupsOf(served)
	h.encoders = h.buildEncoders()
	h.frames = newFrameCache(4096, frameCacheBytes)
	var err error
	if h.disc, err = newDiscovery(served, h.groups); err != nil {
		return nil, err
	}
	h.openapi = newOpenAPI()
	return h, nil
}

// Serve handles rc if its path belongs to the Kubernetes API and reports
// whether it did; other paths are left to the caller (kube-apiserver's
// plain-text 404 for unknown paths lives outside this package). Every
// path under /api and /apis belongs to the API: an unknown one is a 404
// Status.
func (h *Handler) Serve(rc *fasthttp.RequestCtx) bool {
	p := string(rc.Path())
	switch {
	case p == "/apis" || p == "/apis/":
		h.serveAPIs(rc)
	case strings.HasPrefix(p, "/apis/"):
		h.serveGroupPath(rc, p)
	case p == "/api" || p == "/api/":
		h.serveLegacyRoot(rc)
	case strings.HasPrefix(p, "/api/"):
		h.serveLegacyPath(rc, p)
	case strings.HasPrefix(p, "/openapi"):
		return h.serveOpenAPI(rc, p)
	default:
		return false
	}
	return true
}

// IsAPIPath reports the paths Serve answers with a Status when nothing
// is found there: /api and /apis and everything below them.
func IsAPIPath(p string) bool {
	for _, root := range [...]string{"/api", "/apis"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// NotFound writes the 404 Status kube-apiserver answers for an unknown
// path under /api or /apis.
func (h *Handler) NotFound(rc *fasthttp.RequestCtx) { h.writeError(rc, errNotFound) }

// serveGroupPath handles /apis/<group>[/...] as go-restful's group web
// service does upstream.
func (h *Handler) serveGroupPath(rc *fasthttp.RequestCtx, path string) {
	rest := path[len("/apis/"):]
	name, rest := cut(rest, '/')
	g, ok := h.groups[name]
	if !ok || name == "" { // the core group lives under /api
		h.writeError(rc, errNotFound)
		return
	}
	if rest == "" {
		h.serveGroup(rc, g)
		return
	}
	h.serveVersionPath(rc, g, rest)
}

// serveLegacyPath handles /api/<version>[/...], the core group.
func (h *Handler) serveLegacyPath(rc *fasthttp.RequestCtx, path string) {
	h.serveVersionPath(rc, h.groups[""], path[len("/api/"):])
}

// serveVersionPath handles <version>[/...] below a group's root.
func (h *Handler) serveVersionPath(rc *fasthttp.RequestCtx, g *group, rest string) {
	version, rest := cut(rest, '/')
	if !contains(g.versions, version) {
		h.writeError(rc, errNotFound)
		return
	}
	if rest == "" {
		h.serveResourceList(rc, g, version)
		return
	}
	if rv, ok := reviewAt(g.name, version, rest); ok {
		h.serveReview(rc, rv, version)
		return
	}
	rt, ok := h.parseResourcePath(g.name, version, rest)
	if !ok {
		h.writeError(rc, errNotFound)
		return
	}
	h.serveResource(rc, rt)
}

// route is a parsed resource path.
type route struct {
	res         *engine.Resource
	version     string
	deprecation string
	namespace   string
	name        string
	// allNamespaces is the cluster-wide collection path of a namespaced
	// resource.
	allNamespaces bool
	// watchPath marks the deprecated /watch/ paths.
	watchPath bool
	// cluster marks a cluster-scoped resource's path.
	cluster bool
	// subresource is the served subresource the path names after the
	// object's name (namespaces/<name>/status), empty for the object.
	subresource string
}

// parseResourcePath parses what follows /apis/<group>/<version>/ (or
// /api/v1/): [watch/](namespaces/<ns>/<plural>[/<name>] | <plural>[/<name>]),
// the second form for cluster-scoped resources (and the cluster-wide
// collection of namespaced ones).
func (h *Handler) parseResourcePath(groupName, version, rest string) (route, bool) {
	var rt route
	rest = strings.TrimSuffix(rest, "/")
	seg := strings.Split(rest, "/")
	if seg[0] == "watch" {
		rt.watchPath = true
		seg = seg[1:]
	}
	var plural string
	// <plural>/<name>/<subresource> of a cluster-scoped resource, where
	// the third segment names no resource (namespaces/<ns>/<plural>).
	thirdIsResource := false
	if len(seg) == 3 {
		_, thirdIsResource = h.eng.ResourceFor(groupName, version, seg[2])
	}
	switch {
	case len(seg) == 3 && !thirdIsResource && !rt.watchPath:
		plural, rt.name, rt.subresource = seg[0], seg[1], seg[2]
	case len(seg) >= 3 && seg[0] == "namespaces" && len(seg) <= 4:
		rt.namespace, plural = seg[1], seg[2]
		if len(seg) == 4 {
			rt.name = seg[3]
		}
	case len(seg) == 1:
		plural, rt.allNamespaces = seg[0], true
	case len(seg) == 2:
		plural, rt.name = seg[0], seg[1]
	default:
		return rt, false
	}
	res, ok := h.eng.ResourceFor(groupName, version, plural)
	if !ok || plural == "" {
		return rt, false
	}
	if rt.subresource != "" {
		// Only cluster-scoped resources have subresources here.
		if _, ok := res.Subresource(rt.subresource); !ok || res.Namespaced || rt.name == "" {
			return rt, false
		}
	}
	if res.Namespaced {
		if (len(seg) == 4 && rt.name == "") || (rt.namespace == "" && !rt.allNamespaces) {
			return rt, false
		}
	} else {
		// Cluster-scoped: /<plural> and /<plural>/<name> only.
		if rt.namespace != "" || (len(seg) >= 2 && rt.name == "") {
			return rt, false
		}
		rt.allNamespaces, rt.cluster = false, true
	}
	sv, _ := res.ServedVersion(version)
	rt.res, rt.version, rt.deprecation = res, version, sv.Deprecation
	return rt, true
}

// verb is one resource handler. The error it returns is the response,
// written as a Status; nil means the verb wrote the response itself.
type verb func(r *request) error

// serveResource applies go-restful's route selection (method 405, PATCH
// Content-Type 415, Accept 406) and runs the matching handler.
func (h *Handler) serveResource(rc *fasthttp.RequestCtx, rt route) {
	method := b2s(rc.Method())
	var fn verb
	produces := h.produces
	switch {
	case rt.subresource != "":
		sub, _ := rt.res.Subresource(rt.subresource)
		switch {
		case method == http.MethodGet && contains(sub.Verbs, "get"):
			fn = (*request).get
		case method == http.MethodPut && contains(sub.Verbs, "update"):
			fn = (*request).update
		case method == http.MethodPatch && contains(sub.Verbs, "patch"):
			fn = (*request).patch
		}
	case rt.watchPath:
		if method == http.MethodGet {
			fn, produces = (*request).watchForced, h.producesAll
		}
	case rt.name != "":
		switch method {
		case http.MethodGet:
			fn = (*request).get
		case http.MethodPut:
			fn = (*request).update
		case http.MethodPatch:
			fn = (*request).patch
		case http.MethodDelete:
			fn = (*request).delete
		}
	case rt.allNamespaces:
		if method == http.MethodGet {
			fn, produces = (*request).list, h.producesAll
		}
	default:
		switch method {
		case http.MethodGet:
			fn, produces = (*request).list, h.producesAll
		case http.MethodPost:
			fn = (*request).create
		case http.MethodDelete:
			if contains(rt.res.Verbs, "deletecollection") {
				fn = (*request).deleteCollection
			}
		}
	}
	if fn == nil {
		h.writeError(rc, errMethodNotAllowed)
		return
	}
	if method == http.MethodPatch && !patchContentTypeOK(b2s(rc.Request.Header.ContentType())) {
		h.writeError(rc, errPatchMediaType)
		return
	}
	if accept := b2s(rc.Request.Header.Peek("Accept")); accept != "" && !routeAccepts(accept, produces) {
		h.writeError(rc, routerStatus(http.StatusNotAcceptable, "NotAcceptable",
			"406: Not Acceptable\n\nAvailable representations: "+produces))
		return
	}
	r := newRequest(h, rc, rt)
	defer r.finish()
	if err := fn(r); err != nil {
		r.fail(err)
	}
}

// routeAccepts is go-restful's Route.matchesAccept: any comma-separated
// entry, parameters stripped, equal to */* or to a produced type.
func routeAccepts(accept, produces string) bool {
	for rest := accept; ; {
		var mt string
		mt, rest = cut(rest, ',')
		mt, _ = cut(mt, ';')
		mt = strings.TrimSpace(mt)
		if mt == "*/*" {
			return true
		}
		for p := produces; p != ""; {
			var one string
			one, p, _ = strings.Cut(p, ", ")
			if one == mt {
				return true
			}
		}
		if rest == "" {
			return false
		}
	}
}

// patchContentTypeOK is go-restful's matchesContentType for the PATCH
// route: the type before any ";" must be a patch type; an empty type
// counts as application/octet-stream.
func patchContentTypeOK(ct string) bool {
	for rest := ct; ; {
		var mt string
		mt, rest = cut(rest, ',')
		mt, _ = cut(mt, ';')
		switch strings.TrimSpace(mt) {
		case "application/json-patch+json", "application/merge-patch+json",
			"application/strategic-merge-patch+json", "application/apply-patch+yaml":
			return true
		}
		if rest == "" {
			return false
		}
	}
}

// groupsOf collects the served groups and their versions. The core group
// ("") always serves v1, as /api lists it, even while it holds no
// resource.
func groupsOf(resources []*engine.Resource) map[string]*group {
	out := map[string]*group{"": {name: "", versions: []string{"v1"}}}
	for _, r := range resources {
		g := out[r.Group]
		if g == nil {
			g = &group{name: r.Group}
			out[r.Group] = g
		}
		for _, v := range r.Versions {
			if !contains(g.versions, v.Version) {
				g.versions = append(g.versions, v.Version)
			}
		}
	}
	for _, g := range out {
		sortVersions(g.versions)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// encoderKey names a cached encoder.
type encoderKey struct {
	mediaType string
	pretty    bool
	gv        schema.GroupVersion
}

// buildEncoders prepares the encoders for every served group version plus
// meta.k8s.io and core v1, so that the request path does no allocation to
// find one.
func (h *Handler) buildEncoders() map[encoderKey]runtime.Encoder {
	gvs := []schema.GroupVersion{statusGV, {Group: "meta.k8s.io", Version: "v1"}, {Group: "meta.k8s.io", Version: "v1beta1"}}
	for _, g := range h.groups {
		for _, v := range g.versions {
			gvs = append(gvs, schema.GroupVersion{Group: g.name, Version: v})
		}
	}
	out := map[encoderKey]runtime.Encoder{}
	for i := range h.infos {
		info := &h.infos[i]
		for _, gv := range gvs {
			out[encoderKey{info.MediaType, false, gv}] = engine.Codecs.EncoderForVersion(info.Serializer, gv)
			if info.PrettySerializer != nil {
				out[encoderKey{info.MediaType, true, gv}] = engine.Codecs.EncoderForVersion(info.PrettySerializer, gv)
			}
		}
	}
	return out
}

// encoder returns the encoder writing info's media type in gv.
func (h *Handler) encoder(info *runtime.SerializerInfo, pretty bool, gv schema.GroupVersion) runtime.Encoder {
	pretty = pretty && info.PrettySerializer != nil
	if e, ok := h.encoders[encoderKey{info.MediaType, pretty, gv}]; ok {
		return e
	}
	s := info.Serializer
	if pretty {
		s = info.PrettySerializer
	}
	return engine.Codecs.EncoderForVersion(s, gv)
}
