package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/web/apiserver"
)

func ok() error { return nil }

var errShuttingDown = errors.New("process is shutting down")

// checks lists the checks of /healthz, /livez and /readyz, like
// kube-apiserver's: ping and log always pass; livez depends on nothing
// else (a failing livez gets the process restarted, which a storage
// outage does not warrant); healthz and readyz add Options.Ready (as
// "storage") and Options.ReadyChecks, and readyz fails once shutdown has
// begun.
func (s *Server) checks(endpoint string) []Check {
	list := []Check{{Name: "ping", Check: ok}, {Name: "log", Check: ok}}
	if endpoint == "livez" {
		return list
	}
	if s.ready != nil || len(s.extra) == 0 {
		ready := s.ready
		if ready == nil {
			ready = ok
		}
		list = append(list, Check{Name: "storage", Check: ready})
	}
	list = append(list, s.extra...)
	if s.undecodable != nil {
		list = append(list, Check{Name: "stored-objects", Check: ok, Note: s.undecodableNote})
	}
	if endpoint == "readyz" {
		list = append(list, Check{Name: "shutdown", Check: func() error {
			if s.stopping.Load() {
				return errShuttingDown
			}
			return nil
		}})
	}
	return list
}

// undecodableNote is the stored-objects check's note. One damaged record
// does not make the server unready (lists and watches skip it), but it
// must be seen. The keys stay in the log, like failure reasons: health
// endpoints are public and reveal no names.
func (s *Server) undecodableNote() string {
	st := s.undecodable()
	if st.Records == 0 {
		return ""
	}
	return fmt.Sprintf("%d stored object(s) cannot be decoded and are skipped by lists and watches; the server log names them", st.Records)
}

// splitCheckPath splits /healthz/<check> into its parts.
func splitCheckPath(p string) (endpoint, check string, ok bool) {
	endpoint, check, ok = strings.Cut(p[1:], "/")
	return endpoint, check, ok && check != "" && (endpoint == "healthz" || endpoint == "livez" || endpoint == "readyz")
}

// serveHealth answers /<endpoint> (all checks; ?verbose lists them,
// ?exclude=name skips one) or /<endpoint>/<check> (one check), with the
// bodies of k8s.io/apiserver/pkg/server/healthz.
func (s *Server) serveHealth(rc *fasthttp.RequestCtx, endpoint, only string) {
	checks := s.checks(endpoint)
	if only != "" {
		i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == only })
		if i < 0 {
			notFound(rc)
			return
		}
		if err := checks[i].Check(); err != nil {
			httpError(rc, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		rc.SetContentType("text/plain; charset=utf-8")
		rc.SetBodyString("ok")
		return
	}
	excluded := map[string]bool{}
	for _, v := range rc.QueryArgs().PeekMulti("exclude") {
		excluded[string(v)] = true
	}
	var out strings.Builder
	var failed []string
	for _, c := range checks {
		if excluded[c.Name] {
			delete(excluded, c.Name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		if err := c.Check(); err != nil {
			// The reason stays in the log: the endpoint is public.
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			failed = append(failed, c.Name)
			s.log.Info("Health check failed", "endpoint", endpoint, "check", c.Name, "err", err.Error())
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		if c.Note != nil {
			if note := c.Note(); note != "" {
				fmt.Fprintf(&out, "warn: %s\n", note)
			}
		}
	}
	if len(excluded) > 0 {
		names := make([]string, 0, len(excluded))
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		slices.Sort(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if len(failed) > 0 {
		httpError(rc, fmt.Sprintf("%s%s check failed", out.String(), endpoint), http.StatusInternalServerError)
		return
	}
	rc.Response.Header.Set("X-Content-Type-Options", "nosniff")
	rc.SetContentType("text/plain; charset=utf-8")
	if !rc.QueryArgs().Has("verbose") {
		rc.SetBodyString("ok")
		return
	}
	rc.SetBodyString(out.String() + endpoint + " check passed\n")
}

// httpError is Go's http.Error.
func httpError(rc *fasthttp.RequestCtx, msg string, code int) {
	rc.Response.Header.Set("X-Content-Type-Options", "nosniff")
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetStatusCode(code)
	rc.SetBodyString(msg + "\n")
}

// renderVersion renders /version once: always indented JSON, without a
// trailing newline (responsewriters.WriteRawJSON).
func renderVersion(v VersionInfo) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering version: %w", err)
	}
	return b, nil
}

func (s *Server) serveVersion(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() {
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
		return
	}
	rc.SetContentType("application/json")
	rc.SetBody(s.version)
}
