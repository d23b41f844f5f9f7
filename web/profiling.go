package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// StartProfiling serves Go's pprof endpoints (/debug/pprof/: CPU and heap
// profiles, goroutine dumps) on their own listener, for serve's
// "--profiling-listen" (kube-apiserver's --profiling, but off by default and
// apart from the API port: the endpoints carry no authentication, so the
// address should be a loopback one). An empty addr serves nothing. The
// listener closes when ctx ends.
func StartProfiling(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("profiling listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Profiling listener failed", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Warn("Serving unauthenticated profiling endpoints", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
