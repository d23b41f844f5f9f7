package etcd

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLeaderTermsEndWritesAfterAChange: a write's context, taken under one
// leadership, ends with errLeaderChanged once the leader changed and the
// grace passed, and its error becomes one of unknown outcome (a 504); a
// write taken after the change is not touched.
func TestLeaderTermsEndWritesAfterAChange(t *testing.T) {
	var change = make(chan struct{})
	next := make(chan chan struct{}, 1)
	changed := func() <-chan struct{} {
		select {
		case ch := <-next:
			change = ch
		default:
		}
		return change
	}
	done := make(chan struct{})
	defer close(done)
	s := &Store{terms: &leaderTerms{}}
	go s.terms.watch(changed, done)
	for s.terms.current() == nil {
		time.Sleep(time.Millisecond)
	}
	before, stopBefore := s.endOnLeaderChange(context.Background())
	defer stopBefore()

	next <- make(chan struct{})
	close(change) // the leader changes
	changedAt := time.Now()
	for s.terms.current() == nil || s.terms.current().Err() != nil {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-before.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a write sent under the old leader was not ended after the change")
	}
	if waited := time.Since(changedAt); waited < leaderChangeGrace/2 {
		t.Errorf("the write was ended %v after the change, before the grace of %v", waited, leaderChangeGrace)
	}
	err := leaderChangedErr(before, context.Canceled)
	if !errors.Is(err, errOutcomeUnknown) || !timedOut(err) {
		t.Errorf("the ended write's error = %v, want one of unknown outcome (storage.ErrTimeout)", err)
	}

	after, stopAfter := s.endOnLeaderChange(context.Background())
	defer stopAfter()
	time.Sleep(2 * leaderChangeGrace)
	if after.Err() != nil {
		t.Errorf("a write sent under the new leader was ended: %v", context.Cause(after))
	}
	if err := leaderChangedErr(after, errors.New("other")); errors.Is(err, errOutcomeUnknown) {
		t.Errorf("an error of a write the change did not end became %v", err)
	}
}
