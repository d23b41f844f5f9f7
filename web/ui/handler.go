package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/status"
)

// Options configures a Handler.
type Options struct {
	Sources Sources
	// Version is what /version reports; the system view shows it.
	Version version.Info
	// Checks runs the readiness checks of /readyz; nil shows none.
	Checks func() []Check
	// StartTime is when the process started (uptime); zero means now.
	StartTime time.Time
	Logger    *slog.Logger
	// Engine, when set, lets WatchHolders keep each Lease's recent holder
	// changes, which the decisions endpoint returns, and operator actions
	// check the lease.
	Engine engine.API
}

// Handler serves the UI's pages, assets and JSON endpoints.
type Handler struct {
	opts    Options
	log     *slog.Logger
	assets  *assets
	holders *holderTracker
	// writes are the operator actions the server recorded as it performed
	// them (leasewrites.go), for the page that did one to claim.
	writes writeLog
	// watching makes WatchHolders run once, however often it is called.
	watching atomic.Bool
}

// New builds a Handler; it hashes and indexes the embedded assets once.
func New(opts Options) (*Handler, error) {
	a, err := loadAssets()
	if err != nil {
		return nil, err
	}
	if opts.StartTime.IsZero() {
		opts.StartTime = time.Now()
	}
	h := &Handler{opts: opts, log: opts.Logger, assets: a, holders: newHolderTracker()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// WatchHolders watches Leases through Options.Engine until ctx is done,
// keeping the recent holder changes of each (bounded: see holders.go).
// Without an engine, or when already running, it returns at once.
func (h *Handler) WatchHolders(ctx context.Context) {
	if h.opts.Engine == nil || !h.watching.CompareAndSwap(false, true) {
		return
	}
	h.holders.run(ctx, h.opts.Engine, h.opts.Sources.Timelines, h.log)
}

// The headers every UI response carries. The policy allows nothing
// inline and nothing from elsewhere: the page is fully self-contained.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

func secure(rc *fasthttp.RequestCtx) {
	h := &rc.Response.Header
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// Serve answers rc if it is a UI request and reports whether it did: any
// path under /ui, and GET or HEAD of /. Everything else is left to the
// caller.
func (h *Handler) Serve(rc *fasthttp.RequestCtx) bool {
	p := string(rc.Path())
	switch {
	case p == "/":
		// Every GET of / goes to the UI: it is the address people type,
		// and API clients never ask for / (they start at /api, /apis or
		// /version).
		if !(rc.IsGet() || rc.IsHead()) {
			return false
		}
		secure(rc)
		rc.Response.Header.Set("Location", "/ui/")
		rc.SetStatusCode(fasthttp.StatusFound)
		return true
	case p == "/ui":
		secure(rc)
		rc.Response.Header.Set("Location", "/ui/")
		rc.SetStatusCode(fasthttp.StatusMovedPermanently)
		return true
	case !strings.HasPrefix(p, "/ui/"):
		return false
	}
	secure(rc)
	if ns, name, action, ok := ActionPath(p); ok {
		if !rc.IsPost() {
			rc.Response.Header.Set("Allow", "POST")
			plain(rc, fasthttp.StatusMethodNotAllowed, "method not allowed")
			return true
		}
		h.serveAction(rc, ns, name, action)
		return true
	}
	if ns, name, ok := PreviewPath(p); ok {
		if !rc.IsPost() {
			rc.Response.Header.Set("Allow", "POST")
			plain(rc, fasthttp.StatusMethodNotAllowed, "method not allowed")
			return true
		}
		h.servePreview(rc, ns, name)
		return true
	}
	if !(rc.IsGet() || rc.IsHead()) {
		rc.Response.Header.Set("Allow", "GET, HEAD")
		plain(rc, fasthttp.StatusMethodNotAllowed, "method not allowed")
		return true
	}
	rest := p[len("/ui/"):]
	switch {
	case rest == "" || rest == "index.html":
		h.assets.serveIndex(rc)
	case strings.HasPrefix(rest, "a/"):
		h.assets.serve(rc, rest[len("a/"):])
	case strings.HasPrefix(rest, "api/v1/"):
		h.serveAPI(rc, rest[len("api/v1/"):])
	default:
		plain(rc, fasthttp.StatusNotFound, "404 page not found")
	}
	return true
}

// Public reports whether rc is a UI request that carries no data: the
// page and its assets (and the redirects to them), which a browser must
// load before it can ask for a token. The UI's JSON endpoints under
// /ui/api/ are not public: they are authenticated like the API.
func Public(rc *fasthttp.RequestCtx) bool {
	p := string(rc.Path())
	switch {
	case p == "/":
		return rc.IsGet() || rc.IsHead()
	case p == "/ui":
		return true
	case strings.HasPrefix(p, "/ui/"):
		return !strings.HasPrefix(p, "/ui/api/")
	}
	return false
}

func plain(rc *fasthttp.RequestCtx, code int, msg string) {
	rc.SetStatusCode(code)
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetBodyString(msg + "\n")
}

// serveAPI answers the UI's own JSON endpoints.
func (h *Handler) serveAPI(rc *fasthttp.RequestCtx, rest string) {
	if rest == "system" {
		h.writeJSON(rc, h.system(rc))
		return
	}
	if "/ui/api/v1/"+rest == TransitionsPath {
		h.writeJSON(rc, h.holders.transitions())
		return
	}
	if ns, name, ok := DecisionsPath("/ui/api/v1/" + rest); ok {
		h.serveDecisions(rc, ns, name)
		return
	}
	plain(rc, fasthttp.StatusNotFound, "404 page not found")
}

func (h *Handler) system(ctx context.Context) SystemStatus {
	st := SystemStatus{
		ServerTime:  time.Now(),
		StartTime:   h.opts.StartTime,
		Version:     h.opts.Version,
		StoragePath: h.opts.Sources.StoragePath,
		Checks:      []Check{},
		Ready:       true,
		Goroutines:  runtime.NumGoroutine(),
	}
	if src := h.opts.Sources.Storage; src != nil {
		s, err := src(ctx)
		if err != nil {
			st.StorageError = err.Error()
		} else {
			st.Storage = &s
		}
	}
	if src := h.opts.Sources.Cluster; src != nil {
		// Each member's status is asked within a second: bounded.
		c, err := src(ctx)
		if err != nil {
			st.ClusterError = err.Error()
		} else {
			st.Cluster = c
		}
	}
	if src := h.opts.Sources.Snapshots; src != nil {
		snaps := src(ctx)
		st.Snapshots = &snaps
	}
	if src := h.opts.Sources.Modules; src != nil {
		st.Modules = src()
		if st.Modules == nil {
			st.Modules = []status.Module{}
		}
	}
	if h.opts.Checks != nil {
		st.Checks = h.opts.Checks()
		for _, c := range st.Checks {
			st.Ready = st.Ready && c.OK
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.HeapBytes = ms.HeapAlloc
	return st
}

func (h *Handler) serveDecisions(rc *fasthttp.RequestCtx, ns, name string) {
	if err := leaseNameError(ns, name); err != nil {
		// No lease can have this name, so it has no history: a 404 like
		// kube-apiserver's GET of such a lease, before any storage read.
		h.writeError(rc, fasthttp.StatusNotFound, err)
		return
	}
	out := Decisions{Items: []history.DecisionRecord{}}
	if src := h.opts.Sources.Decisions; src != nil {
		items, err := src.Decisions(rc, ns, name)
		if err != nil {
			h.log.Warn("Reading the decision history failed", "namespace", ns, "lease", name, "err", err)
			h.writeError(rc, fasthttp.StatusInternalServerError, err)
			return
		}
		out.Available = true
		if items != nil {
			out.Items = items
		}
	}
	if hist, ok := h.holders.history(ns, name); ok {
		out.Holders = &hist
	}
	if tl, ok := h.holders.view(ns, name); ok {
		out.Timeline = &tl
	}
	h.writeJSON(rc, out)
}

func (h *Handler) writeJSON(rc *fasthttp.RequestCtx, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.writeError(rc, fasthttp.StatusInternalServerError, err)
		return
	}
	rc.SetContentType("application/json")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetBody(b)
}

func (h *Handler) writeError(rc *fasthttp.RequestCtx, code int, err error) {
	if err == nil {
		err = errors.New(fasthttp.StatusMessage(code))
	}
	b, _ := json.Marshal(map[string]string{"message": err.Error()})
	rc.SetStatusCode(code)
	rc.SetContentType("application/json")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetBody(b)
}

// leaseNameError reports why no Lease can live in namespace ns under
// name: the namespace must be a DNS-1123 label and the name a DNS-1123
// subdomain, as the API validates them on create.
func leaseNameError(ns, name string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("no lease can be in namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("no lease can be named %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// TransitionsPath is the endpoint of every lease's changes of hands over
// the last day (the overview's sparklines). It reveals who held which
// lease, so the server authorizes it as listing leases (with their
// subresource "decisions") in all namespaces.
const TransitionsPath = "/ui/api/v1/transitions"

// DecisionsPath parses the path of a lease's decision history,
// /ui/api/v1/namespaces/<ns>/leases/<name>/decisions. The server authorizes
// it as the subresource "decisions" of that lease, in its namespace, so a
// user sees the history only of leases it may read.
func DecisionsPath(p string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(p, "/ui/api/v1/")
	if !found {
		return "", "", false
	}
	seg := strings.Split(rest, "/")
	if len(seg) == 5 && seg[0] == "namespaces" && seg[2] == "leases" && seg[4] == "decisions" && seg[1] != "" && seg[3] != "" {
		return seg[1], seg[3], true
	}
	return "", "", false
}
