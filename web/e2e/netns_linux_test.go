package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// A private network of Linux network namespaces for fault injection: a hub
// namespace holds a bridge, and every host has its own namespace joined to
// the bridge by a veth pair. Nothing is added to the root namespace, so
// the hosts reach each other only over the bridge, and cutting a host's
// link in the hub is a real partition: its packets go nowhere, its TCP
// connections stall, while processes inside its namespace still reach it
// (they talk over its own loopback routes).

// netnsPrefix starts every namespace these tests create, followed by the
// creating process's id, so that a later run can delete the namespaces of
// a run that was killed before its cleanup. LEASEHOLD_E2E_NETNS_PREFIX
// puts another word first, for runs beside others on a shared machine.
var netnsPrefix = os.Getenv("LEASEHOLD_E2E_NETNS_PREFIX") + "lhe2e-"

// netLab is one private network.
type netLab struct {
	t     testing.TB
	hub   string     // the hub namespace
	hosts []*netHost // in order: host i has address subnet.(i+1)
	// rootNS is the test process's own network namespace, which dialing
	// threads return to.
	rootNS *os.File
}

// netHost is one namespace on the lab's bridge.
type netHost struct {
	lab  *netLab
	name string // e.g. m1
	ns   string
	ip   string
	link string   // its veth end in the hub namespace
	nsFD *os.File // /run/netns/<ns>, for dialing from inside
}

// testNetns is the test process's network namespace, kept open. It is
// read from the current thread, locked: a thread in another namespace is
// always locked by a dialing goroutine, so this one is not (the main
// thread, behind /proc/self, could be).
var testNetns = sync.OnceValues(func() (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return os.Open("/proc/thread-self/ns/net")
})

// requireNetns fails (skips only under -short: CI runs as root with
// iproute2) when network namespaces cannot be made here.
func requireNetns(t testing.TB) {
	t.Helper()
	testneeds.Root(t, "network namespaces and veth pairs")
	testneeds.Tool(t, "ip", "apt-get install -y iproute2")
}

// runIP runs ip with args and returns its error with its output.
func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeStaleNamespaces deletes the namespaces of earlier test processes
// that no longer run (killed before their cleanup).
func removeStaleNamespaces() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = runIP("netns", "del", e.Name())
		}
	}
}

// newNetLab makes a hub and n hosts named m1..mn on the subnet
// 10.213.<random>.0/24. Every namespace is deleted when the test ends,
// failed or not; processes started in them must end first (their
// t.Cleanup, registered later, runs earlier).
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	requireNetns(t)
	removeStaleNamespaces()
	var rnd [3]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%s%d-%s", netnsPrefix, os.Getpid(), hex.EncodeToString(rnd[:2]))
	subnet := fmt.Sprintf("10.213.%d", rnd[2])
	lab := &netLab{t: t, hub: tag + "-hub"}
	root, err := testNetns()
	if err != nil {
		t.Fatalf("open the test's network namespace: %v", err)
	}
	lab.rootNS = root
	addNS := func(ns string) {
		t.Helper()
		if err := runIP("netns", "add", ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := runIP("netns", "del", ns); err != nil {
				t.Errorf("delete network namespace: %v", err)
			}
		})
		if err := runIP("-n", ns, "link", "set", "lo", "up"); err != nil {
			t.Fatal(err)
		}
	}
	must := func(args ...string) {
		t.Helper()
		if err := runIP(args...); err != nil {
			t.Fatal(err)
		}
	}
	addNS(lab.hub)
	must("-n", lab.hub, "link", "add", "br0", "type", "bridge")
	must("-n", lab.hub, "link", "set", "br0", "up")
	for i := range n {
		h := &netHost{lab: lab, name: fmt.Sprintf("m%d", i+1), ip: fmt.Sprintf("%s.%d", subnet, i+1), link: fmt.Sprintf("v-m%d", i+1)}
		h.ns = tag + "-" + h.name
		addNS(h.ns)
		// The pair is created in the hub with its other end moved straight
		// into the host's namespace: no interface ever exists in the root
		// namespace.
		must("-n", lab.hub, "link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		must("-n", lab.hub, "link", "set", h.link, "master", "br0")
		must("-n", lab.hub, "link", "set", h.link, "up")
		must("-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
		must("-n", h.ns, "link", "set", "eth0", "up")
		f, err := os.Open("/run/netns/" + h.ns)
		if err != nil {
			t.Fatalf("open network namespace %s: %v", h.ns, err)
		}
		t.Cleanup(func() { f.Close() })
		h.nsFD = f
		lab.hosts = append(lab.hosts, h)
	}
	return lab
}

// cut takes the host's link on the bridge down: from now on it reaches
// no other host and no other host reaches it.
func (h *netHost) cut() {
	h.lab.t.Helper()
	if err := runIP("-n", h.lab.hub, "link", "set", h.link, "down"); err != nil {
		h.lab.t.Fatal(err)
	}
}

// heal brings the host's link back.
func (h *netHost) heal() {
	h.lab.t.Helper()
	if err := runIP("-n", h.lab.hub, "link", "set", h.link, "up"); err != nil {
		h.lab.t.Fatal(err)
	}
}

// exec is the wrapper that runs a command inside the host's namespace
// (ip execs it: the process id is the command's own).
func (h *netHost) exec() []string { return []string{"ip", "netns", "exec", h.ns} }

// DialContext connects from inside the host's namespace, as a client
// running on that device: a socket belongs to the namespace its creating
// thread was in. The calling goroutine locks its thread, enters the
// namespace, dials and returns to the test's namespace before unlocking.
// The thread must survive: a thread that ends kills the children it
// forked (serverProcess's Pdeathsig follows the forking thread), so the
// goroutine must not simply exit locked in the namespace.
func (h *netHost) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	if err := unix.Setns(int(h.nsFD.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter network namespace %s: %w", h.ns, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err := unix.Setns(int(h.lab.rootNS.Fd()), unix.CLONE_NEWNET); err != nil {
		// Never expected; the thread stays locked, so no other goroutine
		// runs in the wrong namespace, and ends with this goroutine.
		panic(fmt.Sprintf("leave network namespace %s: %v", h.ns, err))
	}
	runtime.UnlockOSThread()
	return conn, err
}
