package web

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/metrics"
)

// backupPath serves a consistent copy of the database to authorized
// clients (leasehold backup --server); ABAC names it as a non-resource path.
const backupPath = "/leasehold/v1/backup"

// snapshotsPath lists the scheduled snapshots; an admin path, as the
// backup is.
const snapshotsPath = clusterapi.SnapshotsPath

// backupBarrierTimeout bounds the backup's barrier: a member waits out an
// election within it (cluster.Member.Barrier), and refuses at its end.
const backupBarrierTimeout = 10 * time.Second

// serveMetrics answers /metrics in the Prometheus text format.
func (s *Server) serveMetrics(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() {
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	s.metrics.WritePrometheus(ctx, rc)
	s.flow.WritePrometheus(rc)
}

// serveBackup streams the database. The copy is taken in one read
// transaction, so it is consistent while writes go on; an error midway
// can only cut the stream short, which restore's format check catches.
func (s *Server) serveBackup(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() {
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
		return
	}
	backup, log, streams, reg := s.backup, s.log, s.streams, s.metrics
	if s.barrier != nil {
		// Before the answer starts: once the body streams, an error can
		// only cut it short.
		ctx, cancel := context.WithTimeout(streams, backupBarrierTimeout)
		rev, err := s.barrier(ctx)
		cancel()
		if err != nil {
			log.Warn("Refused a backup", slog.String("err", err.Error()))
			s.api.WriteError(rc, apierrors.NewServiceUnavailable(err.Error()))
			return
		}
		rc.Response.Header.Set(clusterapi.BarrierRevisionHeader, strconv.FormatInt(rev, 10))
	}
	rc.SetContentType("application/octet-stream")
	rc.Response.Header.Set("Content-Disposition", `attachment; filename="leasehold.db"`)
	rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		n, err := backup(streams, w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			log.Error("Backup stream failed", slog.Int64("bytes", n), slog.String("err", err.Error()))
			return
		}
		reg.ObserveBackup(time.Now())
		log.Info("Served a backup", slog.Int64("bytes", n))
	})
}

// serveSnapshots lists the scheduled snapshots (leasehold backup list).
func (s *Server) serveSnapshots(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() {
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writeJSON(rc, s.snapshots(ctx))
}

// metricSources wires the scrape-time sources the server can provide:
// leases from the engine, storage and plugins from the UI's sources.
func (s *Server) metricSources(opts Options) metrics.Sources {
	src := metrics.Sources{Election: opts.Election, Undecodable: s.undecodable, Watches: opts.Engine.WatchStats, Snapshots: opts.Snapshots}
	if res, ok := opts.Engine.ResourceFor(coordinationv1.GroupName, "v1", "leases"); ok {
		eng := opts.Engine
		src.Leases = func(ctx context.Context) ([]metrics.Lease, error) {
			return listLeases(ctx, eng, res)
		}
	}
	if st := opts.UI.Storage; st != nil {
		src.Storage = st
	}
	if l, ok := opts.Cluster.(interface{ HasLeader() bool }); ok {
		src.RaftLeader = l.HasLeader
	}
	if l, ok := opts.Cluster.(interface {
		LeaderSlow() (bool, time.Duration)
	}); ok {
		src.LeaderSlow = l.LeaderSlow
	}
	certs := presentedCertificates(opts.TLS)
	if r, ok := opts.Cluster.(ClusterRotation); ok {
		src.Certificates = func() []metrics.Certificate {
			out := slices.Clone(certs)
			for _, c := range r.Certificates() {
				if !c.NotAfter.IsZero() {
					out = append(out, metrics.Certificate{Use: "cluster-" + c.Kind, Subject: c.Name, Serial: c.Serial, NotAfter: c.NotAfter})
				}
			}
			return out
		}
	} else if len(certs) > 0 {
		src.Certificates = func() []metrics.Certificate { return certs }
	}
	if mods := opts.UI.Modules; mods != nil {
		src.Plugins = func() []metrics.Plugin {
			list := mods()
			out := make([]metrics.Plugin, len(list))
			for i, m := range list {
				out[i] = metrics.Plugin{Name: m.Name, Builtin: m.Builtin, Calls: m.Calls, Errors: m.Errors,
					LatencyP50: m.LatencyP50, LatencyP99: m.LatencyP99, LatencySum: m.LatencySum}
			}
			return out
		}
	}
	return src
}

// presentedCertificates lists the certificates of the TLS configuration:
// each serving certificate and the chain sent with it. The configuration
// is fixed at start, so the list is read once.
func presentedCertificates(cfg *tls.Config) []metrics.Certificate {
	if cfg == nil {
		return nil
	}
	var out []metrics.Certificate
	for _, c := range cfg.Certificates {
		for i, der := range c.Certificate {
			x, err := x509.ParseCertificate(der)
			if err != nil {
				continue // tls.LoadX509KeyPair parsed it already
			}
			use := "serving"
			if i > 0 {
				use = "serving-chain"
			}
			out = append(out, metrics.Certificate{Use: use, Subject: x.Subject.CommonName, Serial: x.SerialNumber.Text(16), NotAfter: x.NotAfter})
		}
	}
	return out
}

// listLeases reads every Lease from the engine's in-memory state.
func listLeases(ctx context.Context, eng engine.API, res *engine.Resource) ([]metrics.Lease, error) {
	obj, err := eng.List(ctx, engine.Scope{Resource: res, Version: "v1"}, &metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	list, _ := obj.(*coordinationv1.LeaseList)
	if list == nil {
		return nil, nil
	}
	out := make([]metrics.Lease, 0, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		m := metrics.Lease{Namespace: l.Namespace, Name: l.Name}
		if l.Spec.HolderIdentity != nil {
			m.Holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			m.RenewTime = l.Spec.RenewTime.Time
		}
		if l.Spec.LeaseDurationSeconds != nil {
			m.LeaseDurationSeconds = *l.Spec.LeaseDurationSeconds
		}
		if l.Spec.LeaseTransitions != nil {
			m.Transitions = *l.Spec.LeaseTransitions
		}
		out = append(out, m)
	}
	return out, nil
}
