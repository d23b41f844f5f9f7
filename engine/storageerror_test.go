package engine

import (
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/storage"
)

// TestStorageTimeoutIs504: a storage request that did not complete in
// time (a write whose outcome is unknown included) answers what
// kube-apiserver answers when a request outlives its deadline
// (finisher.FinishRequest): 504, reason Timeout, never a 500 that would
// let a client believe an applied write failed.
func TestStorageTimeoutIs504(t *testing.T) {
	err := storageError(fmt.Errorf("etcd: update /k: %w: the write was sent but not answered", storage.ErrTimeout))
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("storageError = %T %v, want a StatusError", err, err)
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
