package cluster

import (
	"context"
	"net"
	"syscall"
)

// peerCongestionControl is what the public peer port's connections use to
// pace what they send (accepted connections inherit the listener's): a
// loss-based one, CUBIC (Linux's default) or else Reno (which any process
// may pick). The raft streams to the other members run over these
// connections, leader to follower. A host whose default is BBR (v1) paced
// them far above a throttled link's rate: on a 96 kbit link with a shallow
// queue (tc tbf, 500 ms), 2-17% of the bytes the leader's peer
// connections sent were acknowledged (the rest dropped and sent again,
// 28-97% of the packets dropped), and a follower's commit index stood
// still for up to 16 s; with Reno 23-49% (measured in
// TestClusterSlowLeader, web/e2e). On a healthy LAN the choice does not
// show: raft's messages are small and nothing is lost.
var peerCongestionControl = []string{"cubic", "reno"}

// listenPeer binds the public peer port with peerCongestionControl, as
// far as the host allows (a host may allow neither: its default stays).
func listenPeer(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			for _, cc := range peerCongestionControl {
				if syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, cc) == nil {
					return
				}
			}
		})
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
