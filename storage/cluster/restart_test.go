package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRestartState: a restart keeps the recorded addresses unless a flag
// is given; moved listeners and a moved client port are applied and
// recorded, while a new peer URL or name is refused with the reason and
// leaves the record as it was.
func TestRestartState(t *testing.T) {
	rec := State{Name: "m1", ListenPeer: "127.0.0.1:2380", ListenClient: "127.0.0.1:2379",
		AdvertisePeer: "https://127.0.0.1:2380", AdvertiseClient: "https://127.0.0.1:2379"}
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name  string
		flags Flags
		given []string
		want  State  // zero: refused
		err   string // what the refusal says
	}{
		{name: "no flag", flags: Flags{PeerListen: "127.0.0.1:9999", Name: "other"}, want: rec},
		{name: "the same values", flags: Flags{PeerListen: "127.0.0.1:2380", Name: "m1"}, given: []string{"peer-listen", "member-name"}, want: rec},
		{name: "peer listener on every address", flags: Flags{PeerListen: "0.0.0.0:2380"}, given: []string{"peer-listen"},
			want: State{Name: "m1", ListenPeer: "0.0.0.0:2380", ListenClient: "127.0.0.1:2379",
				AdvertisePeer: "https://127.0.0.1:2380", AdvertiseClient: "https://127.0.0.1:2379"}},
		{name: "client port", flags: Flags{ClientListen: "127.0.0.1:3379"}, given: []string{"cluster-client-listen"},
			want: State{Name: "m1", ListenPeer: "127.0.0.1:2380", ListenClient: "127.0.0.1:3379",
				AdvertisePeer: "https://127.0.0.1:2380", AdvertiseClient: "https://127.0.0.1:3379"}},
		{name: "peer port", flags: Flags{PeerListen: "127.0.0.1:2480"}, given: []string{"peer-listen"},
			err: "would move its peer URL from https://127.0.0.1:2380 to https://127.0.0.1:2480"},
		{name: "peer host", flags: Flags{PeerListen: "127.0.0.2:2380"}, given: []string{"peer-listen"},
			err: "member update"},
		{name: "advertised host", flags: Flags{AdvertiseHost: "10.0.0.7"}, given: []string{"advertise-host"},
			err: "to https://10.0.0.7:2380"},
		{name: "name", flags: Flags{Name: "m9"}, given: []string{"member-name"},
			err: "a member keeps its name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths := PathsIn(t.TempDir())
			if err := SaveState(paths, rec); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(paths.State)
			given := map[string]bool{}
			for _, g := range c.given {
				given[g] = true
			}
			c.flags.Given = NewGivenFlags(given)
			got, err := restartState(rec, c.flags, paths, log)
			after, _ := os.ReadFile(paths.State)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want a refusal saying %q", err, c.err)
				}
				if string(after) != string(before) {
					t.Errorf("a refused restart rewrote the record:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("state %+v, want %+v", got, c.want)
			}
			if got != rec {
				if !strings.Contains(string(after), c.want.ListenClient) || !strings.Contains(string(after), c.want.ListenPeer) {
					t.Errorf("the applied change is not recorded:\n%s", after)
				}
			} else if string(after) != string(before) {
				t.Errorf("an unchanged restart rewrote the record:\n%s", after)
			}
		})
	}
}

// TestLearnerWatch: a learner is unreachable from the first look that
// finds it so, until one finds it answering; a member that is no longer a
// learner is forgotten.
func TestLearnerWatch(t *testing.T) {
	w := &learnerWatch{after: time.Minute, since: map[uint64]time.Time{}}
	t0 := time.Now()
	w.observe(map[uint64]bool{1: false, 2: true}, t0)
	w.observe(map[uint64]bool{1: false, 2: true}, t0.Add(10*time.Second))
	if d, ok := w.unreachableFor(1, t0.Add(30*time.Second)); !ok || d != 30*time.Second {
		t.Errorf("learner 1: unreachable for %v (%t), want 30s since the first look", d, ok)
	}
	if _, ok := w.unreachableFor(2, t0); ok {
		t.Error("learner 2 answers, yet counts as unreachable")
	}
	w.observe(map[uint64]bool{1: true}, t0.Add(40*time.Second))
	if _, ok := w.unreachableFor(1, t0.Add(40*time.Second)); ok {
		t.Error("learner 1 answered, yet still counts as unreachable")
	}
	w.observe(map[uint64]bool{3: false}, t0)
	w.observe(map[uint64]bool{}, t0)
	if len(w.since) != 0 {
		t.Errorf("members no longer learners are remembered: %v", w.since)
	}
}

// TestStartInterruptedSaysWhy: a start that the server's stop (a signal)
// interrupts before the member is ready says so, with the signal, and not
// that the member was not ready within its start timeout, which sent the
// reader looking for a missing quorum.
func TestStartInterruptedSaysWhy(t *testing.T) {
	cfg := memberConfig(t, newTestCA(t, "test-ca"), t.TempDir(), "m1", nil)
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancelCause(context.Background())
	// Cancelled already: etcd needs an election before it is ready, which
	// Start's wait cannot see before the cancellation.
	cancel(fmt.Errorf("received signal terminated: %w", context.Canceled))
	m, err := Start(ctx, cfg)
	if err == nil {
		m.Close()
		t.Fatal("Start with a cancelled context succeeded")
	}
	for _, want := range []string{"member m1: its start was interrupted before it was ready", "received signal terminated"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start interrupted: %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "not ready within") || !errors.Is(err, context.Canceled) {
		t.Errorf("Start interrupted: %q blames the start timeout, or is not context.Canceled", err)
	}
}
