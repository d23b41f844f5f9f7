package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/flowcontrol"
	"github.com/leasehold/leasehold/web/metrics"
	"github.com/leasehold/leasehold/web/ui"
)

// VersionInfo is what /version reports.
type VersionInfo = version.Info

// Options configures a Server.
type Options struct {
	Engine engine.API
	Logger *slog.Logger
	// Version is reported by /version.
	Version VersionInfo
	// Ready reports readiness for /readyz and /healthz as the check
	// named "storage"; nil means ready. ReadyChecks name finer checks.
	Ready func() error
	// ReadyChecks are further named /readyz and /healthz checks
	// (/readyz/<name> runs one), after "ping" and "log".
	ReadyChecks []Check
	// MaxRequestBodyBytes bounds request bodies (413 above); 0 means
	// kube-apiserver's default of 3 MiB.
	MaxRequestBodyBytes int
	// UI feeds the built-in web UI (/ui/) the facts the Kubernetes API
	// does not carry; any field may be nil (its view then says "no data").
	UI ui.Sources

	// TLS, when set, makes Serve speak HTTPS. Client certificates are
	// verified by Auth, so ClientAuth should be tls.RequestClientCert
	// when Auth.ClientCAs is set.
	TLS *tls.Config
	// Auth authenticates requests; nil or empty means every request is
	// anonymous and allowed (the loopback default).
	Auth *auth.Authenticator
	// AllowedHosts are the names (besides IP addresses and localhost) an
	// unauthenticated request's Host header may give for this server;
	// ".example.com" allows its subdomains. See browserGuard.
	AllowedHosts []string
	// Policies authorizes authenticated requests (ABAC); nil allows
	// every authenticated user everything.
	Policies auth.Policies
	// Metrics records what /metrics reports; nil creates a registry.
	// The server adds lease, storage and plugin sources from Engine and UI.
	Metrics *metrics.Registry
	// Election feeds the election counters of /metrics; nil leaves them out.
	Election func() (election.Stats, bool)
	// Backup, when set, serves GET /leasehold/v1/backup: a consistent
	// copy of the database (storage/boltdb's Store.Backup fits).
	Backup func(ctx context.Context, w io.Writer) (int64, error)
	// BackupBarrier, when set, runs before each backup starts (a cluster
	// member's linearizable read through the raft leader): its error
	// refuses the backup with 503, and its revision, which the copy must
	// reach, goes to the client in clusterapi.BarrierRevisionHeader.
	BackupBarrier func(ctx context.Context) (int64, error)
	// Snapshots, when set, serves GET /leasehold/v1/snapshots (the
	// scheduled snapshots: storage/snapshots's Scheduler.Status fits) and
	// feeds the UI's system page and the leasehold_snapshot_* metrics.
	Snapshots func(ctx context.Context) clusterapi.Snapshots
	// Cluster, when set, serves /leasehold/v1/cluster: the members of an
	// embedded etcd cluster, their removal, and the join handshake.
	Cluster Cluster
	// Limits bound what clients may hold; zero fields get defaults.
	Limits Limits
	// ShutdownDelay keeps serving, with /readyz failing, for this long
	// after shutdown begins, so that load balancers stop sending new
	// requests first (kube-apiserver's --shutdown-delay-duration).
	ShutdownDelay time.Duration
	// OnIdle, when set, runs with each of the server's quiet-time memory
	// releases (once traffic falls to a few requests a second, then every
	// minute while it stays there; see releaseIdleMemory), before the
	// server returns its own free memory: the place for the engine and
	// the storage backend to drop what they can (engine's and
	// storage/boltdb's ReleaseMemory fit).
	OnIdle func()
	// Drains, when set, serves the drain endpoints (drains.go) and turns
	// the drain annotation of LeaseCandidates into drain records.
	Drains Drains
}

// Check is one named health check.
type Check struct {
	Name  string
	Check func() error
	// Note, when set, adds a line to ?verbose output under a passing
	// check: what an operator should know that does not make the
	// server unready.
	Note func() string
}

// shutdownGrace bounds how long Serve waits for in-flight requests.
const shutdownGrace = 5 * time.Second

// Server serves the Kubernetes API and the generic endpoints.
type Server struct {
	log   *slog.Logger
	api   *apiserver.Handler
	ui    *ui.Handler
	ready func() error
	extra []Check
	// undecodable reports stored values the engine cannot decode, when
	// the engine can tell (the "stored-objects" check).
	undecodable func() engine.UndecodableStats
	maxBody     int
	tls         *tls.Config
	authn       *auth.Authenticator
	// allowedHosts are Options.AllowedHosts, normalised.
	allowedHosts []string
	authz        auth.Policies
	metrics      *metrics.Registry
	backup       func(ctx context.Context, w io.Writer) (int64, error)
	barrier      func(ctx context.Context) (int64, error)
	snapshots    func(ctx context.Context) clusterapi.Snapshots
	cluster      Cluster
	limits       *limiter
	flow         *flowcontrol.Controller
	bodies       bodyBudget
	// authFailures throttles the access lines of failed authentications.
	authFailures failureThrottle
	delay        time.Duration
	onIdle       func()
	// readTimeout and idleTimeout are the connection timeouts Serve
	// gives fasthttp (readTimeout and idleTimeout of limits.go; tests
	// shorten them).
	readTimeout, idleTimeout time.Duration
	version                  []byte // /version body, rendered once

	// streams is cancelled when shutdown starts, ending watch streams.
	streams     context.Context
	stopStreams context.CancelFunc
	stopping    atomic.Bool

	ids     auditIDs
	handler fasthttp.RequestHandler
	// requests counts requests, for releaseIdleMemory.
	requests atomic.Uint64
	// join guards the join endpoint of a cluster member (clusterjoin.go).
	join *joinGuard
	// eng is Options.Engine; drains Options.Drains (drains.go).
	eng    engine.API
	drains Drains
}

// NewServer builds a Server; it does not listen.
func NewServer(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("web: Options.Engine is required")
	}
	s := &Server{
		log: opts.Logger, ready: opts.Ready, extra: opts.ReadyChecks, maxBody: opts.MaxRequestBodyBytes,
		tls: opts.TLS, authn: opts.Auth, allowedHosts: normalizeAllowedHosts(opts.AllowedHosts), authz: opts.Policies, metrics: opts.Metrics,
		backup: opts.Backup, barrier: opts.BackupBarrier, snapshots: opts.Snapshots, cluster: opts.Cluster, delay: opts.ShutdownDelay, onIdle: opts.OnIdle,
		eng: opts.Engine, drains: opts.Drains, readTimeout: readTimeout, idleTimeout: idleTimeout,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = apiserver.DefaultMaxRequestBodyBytes
	}
	if u, ok := opts.Engine.(interface {
		UndecodableRecords() engine.UndecodableStats
	}); ok {
		s.undecodable = u.UndecodableRecords
	}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	api, err := apiserver.New(apiserver.Options{
		Engine:              opts.Engine,
		Logger:              s.log,
		MaxRequestBodyBytes: s.maxBody,
		Streams:             s.streams,
		Authorizer:          s.authorizer(),
	})
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s.api = api
	if opts.Snapshots != nil && opts.UI.Snapshots == nil {
		opts.UI.Snapshots = opts.Snapshots
	}
	if s.ui, err = ui.New(ui.Options{
		Sources: opts.UI, Version: opts.Version, Logger: s.log, Checks: s.readyChecks, Engine: opts.Engine,
	}); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if s.version, err = renderVersion(opts.Version); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s.ids = newAuditIDs()
	if s.cluster != nil {
		s.join = newJoinGuard()
	}
	if r, isRot := s.cluster.(ClusterRotation); isRot {
		// A warning, not a failure: the member serves, but a device's
		// certificate nears its expiry.
		s.extra = append(slices.Clone(s.extra), Check{Name: "cluster-certificates", Check: ok, Note: r.CertificatesNote})
	}
	s.limits = newLimiter(opts.Limits)
	fc := opts.Limits.FlowControl
	fc.TotalSeats = opts.Limits.MaxRequestsInflight
	s.flow = flowcontrol.New(fc)
	flowcontrol.ReserveProcs(fc.SpareProcs)
	s.bodies.limit = int64(opts.Limits.MaxBodyBytesInFlight)
	if s.bodies.limit <= 0 {
		s.bodies.limit = DefaultMaxBodyBytesInFlight
	}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	s.metrics.SetSources(s.metricSources(opts))
	s.handler = s.serve
	return s, nil
}

// Handler returns the request handler, for callers that run their own
// fasthttp.Server. Such a server should set MaxRequestBodySize and
// ErrorHandler like Serve does to answer oversized bodies with a Status.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Serve serves on ln until ctx is done, then shuts down gracefully: watch
// streams end, in-flight requests get a few seconds to finish. It returns
// nil after a shutdown, or the error that stopped serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	fresh := newFreshConns(s.readTimeout)
	srv := &fasthttp.Server{
		Handler:               fresh.wrap(s.handler),
		ConnState:             fresh.connState,
		ErrorHandler:          s.errorHandler,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// Bodies stream: fasthttp reads only their first preReadBytes
		// before the handler runs, and the handler reads the rest once the
		// request is authenticated and authorized (readBody), within the
		// body limit and the budget of bytes in flight.
		StreamRequestBody:  true,
		MaxRequestBodySize: s.maxBody,
		// Else fasthttp reads a multipart/form-data body whole before the
		// handler runs, whatever its length, keeping 16 MiB in memory and
		// the rest in temporary files: no request here takes a form.
		DisablePreParseMultipartForm: true,
		// Request line and headers must fit the read buffer (fasthttp
		// answers 431 otherwise), which bounds the header size.
		ReadBufferSize: maxHeaderBytes,
		// A client must send a whole request within ReadTimeout and may
		// idle between requests for IdleTimeout: slow or silent clients
		// cannot pin connections. Concurrency caps connections overall.
		// A connection that times out (or fails) before a request has
		// come closes without an answer, as in net/http: see
		// quietClose.
		ReadTimeout:     s.readTimeout,
		IdleTimeout:     s.idleTimeout,
		Concurrency:     s.limits.maxConns,
		CloseOnShutdown: true,
		Logger:          fasthttpLogger{s.log},
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	// Inside TLS: the rewrite reads the plain text of requests.
	ln = crlfListener{ln}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	idleCtx, stopIdle := context.WithCancel(ctx)
	holdersDone := make(chan struct{})
	// Serve returns only after the UI's lease watch did: its last act is
	// saving the lease timelines (bounded by a short timeout), which must
	// happen before the caller closes the store.
	defer func() { stopIdle(); <-holdersDone }()
	go s.releaseIdleMemory(idleCtx)
	go func() {
		defer close(holdersDone)
		if s.waitReady(idleCtx); idleCtx.Err() == nil { // deferred.go
			s.ui.WatchHolders(idleCtx)
		}
	}()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("web: serving on %s: %w", ln.Addr(), err)
		}
		return nil
	case <-ctx.Done():
	}
	// Readiness fails first; then, after the optional delay during which
	// requests are still served, watch streams end so that the drain
	// below does not wait on them.
	s.stopping.Store(true)
	s.log.Info("Shutting down: readiness fails, then watches end and requests drain", slog.Duration("delay", s.delay))
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.stopStreams()
	drained := make(chan struct{})
	defer close(drained)
	fresh.drain(drained)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.ShutdownWithContext(sctx); err != nil {
		s.log.Warn("Shutdown did not complete in time", slog.String("addr", ln.Addr().String()), slog.String("err", err.Error()))
	}
	// fasthttp's shutdown does nothing when srv.Serve has not registered
	// the listener yet (a stop right after start); closing it ourselves
	// ends Serve's accept loop in every case. A second close is harmless.
	_ = ln.Close()
	<-errc
	return nil
}

// errorHandler answers requests fasthttp could not read. Oversized bodies
// get kube-apiserver's 413 Status; other malformed requests a plain 400. A
// connection whose read failed before a request arrived gets no answer
// (quietClose).
func (s *Server) errorHandler(rc *fasthttp.RequestCtx, err error) {
	if quietClose(rc, err) {
		return
	}
	s.begin(rc)
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.api.WriteError(rc, s.api.TooLarge())
		return
	}
	// A request line and headers that do not fit the read buffer: net/http
	// (and so kube-apiserver) answers 431 for headers over its limit.
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		rc.Error("431 Request Header Fields Too Large", fasthttp.StatusRequestHeaderFieldsTooLarge)
		return
	}
	rc.Error("400 Bad Request", fasthttp.StatusBadRequest)
}

// readyChecks runs the /readyz checks for the UI's system view.
func (s *Server) readyChecks() []ui.Check {
	var out []ui.Check
	for _, c := range s.checks("readyz") {
		out = append(out, ui.Check{Name: c.Name, OK: c.Check() == nil})
	}
	return out
}

// fasthttpLogger routes fasthttp's own messages to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	// s.log already names the component (web): one per line.
	l.log.Debug(fmt.Sprintf(format, args...), slog.String("library", "fasthttp"))
}

// authorizer is what the self reviews ask: the policy when requests are
// authenticated and authorized, else everything is allowed, as the
// middleware allows it.
func (s *Server) authorizer() auth.Authorizer {
	if !s.authn.Enabled() || s.authz == nil {
		return auth.AllowAll{}
	}
	return s.authz
}
