// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) with the standard library only, so that a unit with
// Type=notify learns when leasehold is ready to serve, when it is stopping,
// and, with WatchdogSec=, that it is still alive.
//
// The protocol is one datagram per message on the unix socket named by
// $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@').
// Without that variable every function does nothing, so the server behaves
// the same outside systemd.
package sdnotify
