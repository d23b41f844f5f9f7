package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// controllerElectionKeys is where the members' campaigns for the election
// controller keep their keys (storage/etcd's ElectionPrefix under the
// members' default --etcd-prefix): the oldest key leads.
const controllerElectionKeys = "/leasehold/_leasehold/elections/election-controller/"

// handoffTrace times, from the survivors, each step of the election
// controller's hand-off after its member was killed: the raft leader the
// survivors elect, the holder's lease as the new leader counts it down,
// the holder's key deleted (its lease revoked), the controller running on
// a survivor. Each step is logged (TRACE) as seconds after the kill, so
// that where the seconds go is read from the test's output.
type handoffTrace struct {
	t      *testing.T
	killed time.Time
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	steps []string
	seen  map[string]bool
}

// traceHandoff starts watching the survivors before dead's member is
// killed; kill marks the kill, done ends the watch and logs the steps.
func traceHandoff(t *testing.T, dead *clusterMember, survivors []*clusterMember) *handoffTrace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &handoffTrace{t: t, stop: cancel, seen: map[string]bool{}}
	clients := make([]*clientv3.Client, len(survivors))
	for i, s := range survivors {
		pki := filepath.Join(s.dataDir, "cluster", "pki")
		clients[i] = etcdClientWith(t, memberClientURL(t, s), filepath.Join(pki, "ca.crt"), filepath.Join(pki, "member.crt"), filepath.Join(pki, "member.key"))
	}
	names := map[uint64]string{}
	var deadID uint64
	var holderKey string
	var holderLease clientv3.LeaseID
	eventually(t, 30*time.Second, "the members and the controller's key, read through a survivor", func() (bool, string) {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		defer rcancel()
		ml, err := clients[0].MemberList(rctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ml.Members {
			names[m.ID] = m.Name
			if m.Name == dead.name {
				deadID = m.ID
			}
		}
		resp, err := clients[0].Get(rctx, controllerElectionKeys, clientv3.WithFirstCreate()...)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Kvs) == 0 {
			return false, "no key under " + controllerElectionKeys
		}
		holderKey, holderLease = string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
		if !strings.HasPrefix(string(resp.Kvs[0].Value), dead.name+"/") {
			return false, fmt.Sprintf("the leading key is %s's (%s), not %s's", resp.Kvs[0].Value, holderKey, dead.name)
		}
		return true, ""
	})
	// The raft leader, as each survivor sees it.
	for i, c := range clients {
		url := memberClientURL(t, survivors[i])
		tr.wg.Go(func() {
			for ctx.Err() == nil {
				sctx, scancel := context.WithTimeout(ctx, time.Second)
				st, err := c.Status(sctx, url)
				scancel()
				if err == nil && st.Leader != 0 && st.Leader != deadID && tr.afterKill() {
					tr.mark(fmt.Sprintf("%s sees a new raft leader, %s (term %d)", survivors[i].name, names[st.Leader], st.RaftTerm))
				}
				sleepCtx(ctx, 20*time.Millisecond)
			}
		})
	}
	// The holder's key deleted: its lease revoked (expired) by the leader.
	watch := clients[0].Watch(ctx, holderKey)
	tr.wg.Go(func() {
		for resp := range watch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					tr.mark("the holder's key deleted (its lease revoked), seen on a watch through " + survivors[0].name)
				}
			}
		}
	})
	// The holder's lease as the leader counts it (whole seconds, rounded
	// down).
	tr.wg.Go(func() {
		for ctx.Err() == nil {
			for _, c := range clients {
				lctx, lcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				resp, err := c.TimeToLive(lctx, holderLease)
				lcancel()
				if err == nil && tr.afterKill() {
					if resp.TTL < 0 {
						tr.mark("the holder's lease is gone")
					} else {
						tr.mark(fmt.Sprintf("the holder's lease has %ds left (of %ds)", resp.TTL, resp.GrantedTTL))
					}
					break
				}
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
	})
	// The controller running on a survivor.
	tr.wg.Go(func() {
		for ctx.Err() == nil {
			for _, s := range survivors {
				if on, _ := controllerRunning(s); on && tr.afterKill() {
					tr.mark("the election controller runs on " + s.name)
				}
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
	})
	return tr
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// kill marks when the member was killed.
func (tr *handoffTrace) kill() {
	tr.mu.Lock()
	tr.killed = time.Now()
	tr.mu.Unlock()
}

func (tr *handoffTrace) afterKill() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return !tr.killed.IsZero()
}

// mark notes step the first time it is seen.
func (tr *handoffTrace) mark(step string) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.killed.IsZero() || tr.seen[step] {
		return
	}
	tr.seen[step] = true
	tr.steps = append(tr.steps, fmt.Sprintf("+%.3fs %s", now.Sub(tr.killed).Seconds(), step))
}

// done ends the watch and logs the steps as what happened after the kill.
func (tr *handoffTrace) done(what string) {
	tr.stop()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.t.Logf("TRACE: %s:\n  %s", what, strings.Join(tr.steps, "\n  "))
}
