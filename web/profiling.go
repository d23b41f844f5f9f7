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
// profiles, goroutine dumps, the command line) on their own listener, for
// serve's "--profiling-listen" (kube-apiserver's --profiling, but off by
// default and apart from the API port). The endpoints carry no
// authentication, so they follow the API's off-loopback rule: an address
// that is not loopback is refused unless allowNetwork (serve's
// --insecure-allow-unauthenticated-network) accepts the risk. An empty addr
// serves nothing. The listener closes when ctx ends.
func StartProfiling(ctx context.Context, addr string, allowNetwork bool, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("profiling listener on %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		if !allowNetwork {
			ln.Close()
			return fmt.Errorf("refusing to serve unauthenticated profiling endpoints on %s, which is not a loopback address: "+
				"anyone who can connect could read goroutine dumps and the command line; use 127.0.0.1:PORT, "+
				"or pass --insecure-allow-unauthenticated-network to accept the risk", ln.Addr())
		}
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
