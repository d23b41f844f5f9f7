package sdnotify

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Notifier sends state changes to the service manager. The zero value, and
// one built outside systemd, sends nothing.
type Notifier struct {
	addr *net.UnixAddr
	// watchdog is the interval systemd expects pings within (WatchdogSec=),
	// zero when the watchdog is off or meant for another process.
	watchdog time.Duration
}

// FromEnv reads $NOTIFY_SOCKET and $WATCHDOG_USEC/$WATCHDOG_PID. It returns
// an error only for a malformed watchdog setting; an absent socket gives an
// inactive Notifier.
func FromEnv() (*Notifier, error) {
	n := &Notifier{}
	socket := os.Getenv("NOTIFY_SOCKET")
	if socket == "" {
		return n, nil
	}
	name := socket
	if name[0] == '@' {
		// An abstract socket: Go spells the leading NUL as '@' itself.
		name = "@" + name[1:]
	}
	n.addr = &net.UnixAddr{Name: name, Net: "unixgram"}
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return n, nil
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return n, nil // the watchdog watches another process (e.g. a wrapper)
	}
	us, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || us <= 0 {
		return n, fmt.Errorf("sdnotify: invalid WATCHDOG_USEC %q", usec)
	}
	n.watchdog = time.Duration(us) * time.Microsecond
	return n, nil
}

// Active reports whether messages reach a service manager.
func (n *Notifier) Active() bool { return n != nil && n.addr != nil }

// WatchdogInterval is the interval the service manager expects pings
// within, zero when no watchdog is set for this process.
func (n *Notifier) WatchdogInterval() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// Send writes one notification, e.g. "READY=1" or "STATUS=serving".
// Inactive notifiers do nothing.
func (n *Notifier) Send(state string) error {
	if !n.Active() {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}

// Ready tells the service manager that start-up is complete.
func (n *Notifier) Ready(status string) error {
	return n.Send("READY=1\nSTATUS=" + status + "\nMAINPID=" + strconv.Itoa(os.Getpid()))
}

// Stopping tells the service manager that a graceful stop has begun, so
// that it does not count the drain against the watchdog or start timeout.
func (n *Notifier) Stopping() error { return n.Send("STOPPING=1\nSTATUS=draining") }

// Watchdog pings the service manager at half the watchdog interval for as
// long as ctx lasts and alive reports no error. While alive fails, pings
// stop, so systemd restarts a server that is wedged (for example whose
// storage no longer answers) rather than one that is merely busy. It
// returns at once when no watchdog is set.
func (n *Notifier) Watchdog(ctx context.Context, alive func() error) {
	interval := n.WatchdogInterval() / 2
	if interval <= 0 || !n.Active() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if alive == nil || alive() == nil {
			_ = n.Send("WATCHDOG=1")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
