package election

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
)

// leaseEvents lists the controller's events on a lease, oldest first, as
// "Type Reason: message".
func (env *testEnv) leaseEvents(lease string) []string {
	env.t.Helper()
	r, _ := env.e.ResourceFor("", "v1", "events")
	out, err := env.e.List(context.Background(), engine.Scope{Resource: r, Version: "v1", Namespace: testNS},
		&metav1.ListOptions{FieldSelector: "involvedObject.kind=Lease,involvedObject.name=" + lease + ",source=leasehold"})
	if err != nil {
		env.t.Fatal(err)
	}
	evs := out.(*corev1.EventList).Items
	var lines []string
	for _, ev := range evs {
		if ev.InvolvedObject.UID == "" {
			env.t.Errorf("event %s names no uid: kubectl describe would not find it", ev.Name)
		}
		lines = append(lines, ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	return lines
}

func hasEvent(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestEventsTellElectedAndHandedOver: a grant, then a hand-over to a
// better candidate and its grant, each leave an Event on the lease.
func TestEventsTellElectedAndHandedOver(t *testing.T) {
	t.Parallel()
	// a is awaited when b steps down, as in TestPreemptionAndHandover.
	env := newPatientEnv(t, fastOptions())
	b := env.join("b", "kcm", "1.31.0", "1.31.0")
	b.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "b leads", b.leading.Load)
	a := env.join("a", "kcm", "1.30.0", "1.31.0")
	a.elect.Store(true)
	env.eventually(5*time.Second, "a leads after b stepped down", a.leading.Load)
	var evs []string
	env.eventually(5*time.Second, "the events", func() bool {
		evs = env.leaseEvents("kcm")
		return hasEvent(evs, "Normal Elected: Granted to b by strategy OldestEmulationVersion") &&
			hasEvent(evs, "Normal HandedOver: Handing over from b to a (preferredHolder)") &&
			hasEvent(evs, "Normal Elected: Granted to a by strategy OldestEmulationVersion")
	})
	t.Logf("events: %q", evs)
}

// TestEventsTellStrategyFailure: a failing module leaves one Warning per
// incident, and the fallback's grant says it was one.
func TestEventsTellStrategyFailure(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.DecideTimeout = 250 * time.Millisecond
	opts.Registry = NewStaticRegistry(NativeOldest, broken{mode: "error"})
	env := newEnv(t, opts)
	b := env.joinWith("b", "kcm", "1.31.0", "1.31.0", "example.com/broken")
	b.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "b leads by fallback", b.leading.Load)
	var evs []string
	env.eventually(5*time.Second, "the events", func() bool {
		evs = env.leaseEvents("kcm")
		return hasEvent(evs, "Warning StrategyFailed: Strategy example.com/broken failed, the built-in strategy decides without preemption") &&
			hasEvent(evs, "Normal Elected: Granted to b by strategy example.com/broken") &&
			strings.Contains(strings.Join(evs, "\n"), ", the fallback after the lease's strategy failed")
	})
	t.Logf("events: %q", evs)
}
