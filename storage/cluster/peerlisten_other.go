//go:build !linux

package cluster

import "net"

// listenPeer binds the public peer port (the congestion control is the
// host's: see peerlisten_linux.go).
func listenPeer(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
