package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/engine"
)

// routerStatus builds the Status go-restful's router errors become in
// kube-apiserver: details is present but empty.
func routerStatus(code int32, reason metav1.StatusReason, message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: message,
		Details: &metav1.StatusDetails{},
	}}
}

var (
	errMethodNotAllowed = routerStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		"the server does not allow this method on the requested resource")
	errNotFound = routerStatus(http.StatusNotFound, metav1.StatusReasonNotFound,
		"the server could not find the requested resource")
	errPatchMediaType = routerStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"415: Unsupported Media Type")
)

// notAcceptable is negotiation's 406 (no details).
func notAcceptable(accepted []string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + joinComma(accepted),
	}}
}

// notAcceptableMessage is a 406 with a handler's own message.
func notAcceptableMessage(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: msg,
	}}
}

// unsupportedMediaType is negotiation's 415 for request bodies.
func unsupportedMediaType(accepted []string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + joinComma(accepted),
	}}
}

// plainInternal is what kube-apiserver answers for an error that is not
// a Status: code 500, no reason, the error text as message. Used where the
// upstream handler passes such errors on (e.g. DeleteOptions decoding).
func plainInternal(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: err.Error(),
	}}
}

// statusGV is the version Status and the discovery types are written in.
var statusGV = schema.GroupVersion{Version: "v1"}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// toStatus converts err to the Status to send (ErrorToAPIStatus). Errors
// that are not Status errors are logged with the request's audit ID and
// reported as an InternalError naming that ID, so that no internal detail
// leaks but an operator can find the cause.
func (h *Handler) toStatus(rc *fasthttp.RequestCtx, err error) *metav1.Status {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		if s.Status == "" {
			s.Status = metav1.StatusFailure
		}
		if s.Code == 0 {
			if s.Status == metav1.StatusSuccess {
				s.Code = http.StatusOK
			} else {
				s.Code = http.StatusInternalServerError
			}
		}
		s.Kind = "Status"
		s.APIVersion = "v1"
		return &s
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s := apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0).ErrStatus
		s.Kind, s.APIVersion = "Status", "v1"
		return &s
	}
	id := string(rc.Response.Header.Peek("Audit-Id"))
	h.log.LogAttrs(context.Background(), slog.LevelError, "Request failed with an internal error",
		slog.String("requestID", id), slog.String("method", string(rc.Method())),
		slog.String("path", string(rc.Path())), slog.String("err", err.Error()))
	s := apierrors.NewInternalError(fmt.Errorf("request %s failed, see the server log", id)).ErrStatus
	s.Kind, s.APIVersion = "Status", "v1"
	return &s
}

// writeError renders err as a Status (responsewriters.ErrorNegotiated):
// Retry-After from details, then the negotiated encoding; when the Accept
// header allows no plain media type, indented JSON.
func (h *Handler) writeError(rc *fasthttp.RequestCtx, err error) {
	status := h.toStatus(rc, err)
	if cause := engine.Cause(err); cause != nil {
		rc.SetUserValue(causeKey, cause.Error())
	}
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		rc.Response.Header.Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	h.writeObject(rc, restrictDefault, int(status.Code), status, statusGV, mediaOptions{}, false)
}

// writeRawJSON writes v as indented JSON (responsewriters.WriteRawJSON),
// the fallback when negotiation fails.
func writeRawJSON(rc *fasthttp.RequestCtx, code int, v any) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		rc.Error(err.Error(), http.StatusInternalServerError)
		return
	}
	rc.SetContentType("application/json")
	rc.SetStatusCode(code)
	rc.SetBody(out)
}

// writeObject encodes obj with a negotiated serializer
// (responsewriters.WriteObjectNegotiated). When negotiated is false the
// Accept header is negotiated here with restriction r; failure writes the
// object itself for error codes, or a 406, as indented JSON.
func (h *Handler) writeObject(rc *fasthttp.RequestCtx, r restriction, code int, obj runtime.Object, gv schema.GroupVersion, mo mediaOptions, negotiated bool) {
	if !negotiated {
		var ok bool
		mo, ok = negotiateMediaType(b2s(rc.Request.Header.Peek("Accept")), h.infos, r, false)
		if !ok {
			if code < http.StatusOK || code >= http.StatusBadRequest {
				writeRawJSON(rc, code, obj)
				return
			}
			st := h.toStatus(rc, notAcceptable(h.mediaTypes))
			writeRawJSON(rc, int(st.Code), st)
			return
		}
	}
	pretty := mo.pretty || isPrettyPrint(rc)
	if plainJSON(mo, pretty) {
		if body, ok := engine.EncodeJSON(obj, gv); ok {
			rc.SetContentType(mo.info.MediaType)
			rc.SetStatusCode(code)
			rc.Response.SetBodyRaw(body)
			return
		}
	}
	enc := h.encoder(mo.info, pretty, gv)
	rc.SetContentType(mo.info.MediaType)
	rc.SetStatusCode(code)
	err := errNotCollection
	if mo.info.MediaType == runtime.ContentTypeYAML {
		if ok, yerr := encodeYAMLCollection(enc, obj, rc.Response.BodyWriter()); ok {
			err = yerr
		}
	}
	if err == errNotCollection {
		err = enc.Encode(obj, rc.Response.BodyWriter())
	}
	if err != nil {
		// Nothing useful has been sent yet: replace it with a 500.
		rc.Response.ResetBody()
		st := h.toStatus(rc, fmt.Errorf("encoding %T: %w", obj, err))
		writeRawJSON(rc, int(st.Code), st)
	}
}

// WriteError renders err as kube-apiserver would: a Status for Status
// errors, an InternalError (logged with the request's Audit-Id) for
// anything else. The web layer uses it for panics and oversized bodies.
func (h *Handler) WriteError(rc *fasthttp.RequestCtx, err error) {
	h.writeError(rc, err)
}

// ErrMethodNotAllowed is the router's 405 Status.
var ErrMethodNotAllowed = errMethodNotAllowed

// TooLarge is the 413 Status for a body over the configured limit.
func (h *Handler) TooLarge() error {
	return tooLarge(h.maxBody)
}

// UnsupportedMediaType is the 415 a request body of a type the API does
// not read gets: negotiation's for a create or an update, the router's
// for a patch.
func (h *Handler) UnsupportedMediaType(method string) error {
	if method == http.MethodPatch {
		return errPatchMediaType
	}
	return unsupportedMediaType(h.mediaTypes)
}
