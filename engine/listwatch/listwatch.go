package listwatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine"
)

// The retry backoff: doubling from initialBackoff up to maxBackoff, back
// to initialBackoff once a watch ran and ended cleanly.
const (
	initialBackoff = 50 * time.Millisecond
	maxBackoff     = 5 * time.Second
)

// List is what a list answers: a typed list object (*coordinationv1.LeaseList).
type List interface {
	runtime.Object
	GetResourceVersion() string
}

// Options configure Run. L is the list type the engine answers for Scope
// (*coordinationv1.LeaseList), T the object type of its items and events
// (*coordinationv1.Lease).
type Options[L List, T runtime.Object] struct {
	// Engine and Scope name what is listed and watched; the scope's
	// namespace is usually empty (all namespaces).
	Engine engine.API
	Scope  engine.Scope
	// SharedObjects asks the engine for the event objects it shares with
	// other watchers (engine.WithSharedWatchObjects), which saves a copy
	// per event: set it only when Apply neither changes an event's object
	// nor keeps it beyond the call.
	SharedObjects bool
	// Replace receives every successful list, whole: the cache is to hold
	// exactly its items afterwards (what vanished was deleted while no
	// watch ran). Required.
	Replace func(list L)
	// Apply receives each ADDED, MODIFIED or DELETED event's object, in
	// order. Events whose object is not a T are skipped. Required.
	Apply func(typ watch.EventType, obj T)
	// ListSkip, if set, is called before each list; the test it returns
	// (nil: none) is asked about each stored value before it is decoded,
	// and a value it answers true for is left out of that list
	// (engine.WithListSkip). For a cache that keeps a few of many
	// objects and can tell the rest from their stored bytes: Replace
	// then receives only the others, and must not take a left-out
	// object's absence for its deletion.
	ListSkip func() func(stored []byte) bool
	// OnError, if set, is told each failure to list or watch (or an
	// ERROR event), before the retry; a context ending is none, and
	// neither is an expired resourceVersion, which only means a relist.
	OnError func(err error)
}

// Run lists and watches until ctx is done.
func Run[L List, T runtime.Object](ctx context.Context, o Options[L, T]) {
	watchCtx := ctx
	if o.SharedObjects {
		watchCtx = engine.WithSharedWatchObjects(ctx)
	}
	what := o.Scope.Resource.Plural
	backoff := initialBackoff
	sleep := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, maxBackoff)
			return true
		}
	}
	fail := func(err error) {
		if ctx.Err() == nil && o.OnError != nil {
			o.OnError(err)
		}
	}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			listCtx := ctx
			if o.ListSkip != nil {
				if skip := o.ListSkip(); skip != nil {
					listCtx = engine.WithListSkip(ctx, skip)
				}
			}
			list, err := list[L](listCtx, o.Engine, o.Scope)
			if err != nil {
				fail(fmt.Errorf("list %s: %w", what, err))
				if !sleep() {
					return
				}
				continue
			}
			o.Replace(list)
			rv = list.GetResourceVersion()
		}
		w, err := o.Engine.Watch(watchCtx, o.Scope, &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			// Anything but an expiry may pass: retry from the same place.
			if expired(err) {
				rv = ""
			} else {
				fail(fmt.Errorf("watch %s: %w", what, err))
			}
			if !sleep() {
				return
			}
			continue
		}
		next, err := consume(w, rv, o.Apply)
		w.Stop()
		if err != nil {
			rv = ""
			if !expired(err) {
				fail(fmt.Errorf("watch %s: %w", what, err))
			}
			if !sleep() {
				return
			}
			continue
		}
		rv = next
		backoff = initialBackoff
	}
}

func list[L List](ctx context.Context, eng engine.API, scope engine.Scope) (L, error) {
	var zero L
	out, err := eng.List(ctx, scope, &metav1.ListOptions{})
	if err != nil {
		return zero, err
	}
	l, ok := out.(L)
	if !ok {
		return zero, fmt.Errorf("the engine answered a %T, not a %T", out, zero)
	}
	return l, nil
}

// consume applies a watch's events until it ends and returns the
// resourceVersion to resume from, or the ERROR event's error (the caller
// relists).
func consume[T runtime.Object](w watch.Interface, rv string, apply func(watch.EventType, T)) (string, error) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if st, ok := ev.Object.(*metav1.Status); ok {
				return "", &apierrors.StatusError{ErrStatus: *st}
			}
			return "", fmt.Errorf("error event with a %T", ev.Object)
		case watch.Bookmark:
			if m, ok := ev.Object.(metav1.Object); ok {
				rv = m.GetResourceVersion()
			}
		case watch.Added, watch.Modified, watch.Deleted:
			if m, ok := ev.Object.(metav1.Object); ok {
				rv = m.GetResourceVersion()
			}
			if obj, ok := ev.Object.(T); ok {
				apply(ev.Type, obj)
			}
		}
	}
	return rv, nil
}

// expired reports that the watch history a resourceVersion needs is gone
// (410, whatever the reason says).
func expired(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code == http.StatusGone {
		return true
	}
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
