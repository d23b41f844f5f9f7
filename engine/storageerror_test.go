package engine

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/storage"
)

// TestStorageTimeoutIs504: a storage request that did not complete in
// time (a write whose outcome is unknown included) answers what
// kube-apiserver answers when a request outlives its deadline
// (finisher.FinishRequest): 504, reason Timeout, never a 500 that would
// let a client believe an applied write failed.
func TestStorageTimeoutIs504(t *testing.T) {
	cause := fmt.Errorf("etcd: update /k: %w: the write was sent but not answered", storage.ErrTimeout)
	err := toStatus(storageError(cause))
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("storageError = %T %v, want a StatusError", err, err)
	}
	// The answer hides the cause, as kube-apiserver's does; the server's
	// log line for the request names it.
	if got := Cause(err); got != cause {
		t.Errorf("Cause = %v, want the storage error %v", got, cause)
	}
	if !errors.Is(err, storage.ErrTimeout) {
		t.Errorf("the answer no longer unwraps to storage.ErrTimeout")
	}
	if Cause(apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "x")) != nil {
		t.Errorf("a refusal of the engine's own has a storage cause")
	}
	st := se.ErrStatus
	want := "Timeout: request did not complete within requested timeout - context deadline exceeded"
	if st.Code != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout || st.Message != want || st.Status != metav1.StatusFailure {
		t.Errorf("status %d %s %q (%s), want 504 Timeout %q", st.Code, st.Reason, st.Message, st.Status, want)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 0 {
		t.Errorf("details %+v, want kube-apiserver's empty details", st.Details)
	}
}
