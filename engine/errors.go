package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// OptimisticLockErrorMsg is kube-apiserver's text for a resourceVersion
// mismatch.
const OptimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

func badRequest(msg string) error { return apierrors.NewBadRequest(msg) }

// unknownError is what kube-apiserver answers for an error that is not a
// Status: 500, no reason, the error text as the message.
func unknownError(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: msg,
	}}
}

// toStatus makes sure every error leaving the engine is a StatusError.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if s, ok := se.(*apierrors.StatusError); ok {
			return s
		}
		return &apierrors.StatusError{ErrStatus: se.Status()}
	}
	return unknownError(err.Error())
}

// storageError maps a storage failure that has no better interpretation.
func storageError(err error) error {
	switch {
	case errors.Is(err, storage.ErrValueTooLarge):
		return apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	case errors.Is(err, storage.ErrClosed):
		return apierrors.NewServiceUnavailable(err.Error())
	case errors.Is(err, storage.ErrTimeout):
		// kube-apiserver's answer when its storage does not answer within
		// the request's deadline (finisher.FinishRequest): the client
		// cannot tell whether a write was applied, and must re-read.
		return &failure{apierrors.NewTimeoutError("request did not complete within requested timeout - "+context.DeadlineExceeded.Error(), 0), err}
	}
	return &failure{apierrors.NewInternalError(err), err}
}

// failure is the Status answer to a storage failure, keeping the failure
// itself: kube-apiserver's 504 says only "context deadline exceeded",
// which tells an operator nothing, so the server's log line for the
// request names the cause (Cause). Both unwrap: callers find the Status
// error and the storage error (errors.Is(err, storage.ErrTimeout)).
type failure struct {
	*apierrors.StatusError
	cause error
}

func (f *failure) Unwrap() []error { return []error{f.StatusError, f.cause} }

// Cause is the storage failure behind an error the engine returned, or
// nil when the engine refused the request itself.
func Cause(err error) error {
	var f *failure
	if errors.As(err, &f) {
		return f.cause
	}
	return nil
}

// formatRV renders a storage revision as a resourceVersion.
func formatRV(rev int64) string { return strconv.FormatInt(rev, 10) }

// parseRV parses a resourceVersion parameter like upstream's
// APIObjectVersioner: "" and "0" are 0; anything non-numeric is a 500.
// Get and watch pass that error on as kube-apiserver's watch cache does;
// a list answers listRV's 400 instead.
func parseRV(rv string) (int64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || v > 1<<63-1 {
		if err == nil {
			err = fmt.Errorf("strconv.ParseUint: parsing %q: value out of range", rv)
		}
		return 0, unknownError(field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())}.ToAggregate().Error())
	}
	return int64(v), nil
}

// listRV parses a list's resourceVersion: a malformed one is the 400
// storage.ValidateListOptions makes of the versioner's error, which
// kube-apiserver checks before a list reaches its watch cache or etcd.
func listRV(rv string) (int64, error) {
	v, err := parseRV(rv)
	if err != nil {
		return 0, badRequest("invalid resource version: " + err.Error())
	}
	return v, nil
}

// tooLargeRV is the 504 for a resourceVersion the store has not reached.
func tooLargeRV(want, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// optionsInvalid is the 422 for invalid CreateOptions, ListOptions, ...
func optionsInvalid(kind string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// storagePreconditionUID reproduces the text of an etcd3 storage UID
// precondition failure wrapped in a Conflict.
func (k *kind) uidPreconditionFailed(namespace, name, want, have string) error {
	msg := fmt.Sprintf("StorageError: invalid object, Code: 4, Key: %s%s/%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object meta: %s",
		k.upstreamKeyPrefix, namespace, name, want, have)
	return apierrors.NewConflict(k.gr, name, errors.New(msg))
}
