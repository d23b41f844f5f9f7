package apiserver

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/web/auth"
)

// review is a create-only resource computed per request from the
// requester and the authorizer, never stored: kube-apiserver's self
// reviews.
type review struct {
	res *engine.Resource
	// answer fills the response to the decoded request object.
	// fieldManager and userAgent name the request's field manager.
	answer func(h *Handler, u auth.User, in runtime.Object, fieldManager, userAgent string) (runtime.Object, error)
}

// reviewResource describes a review for discovery: cluster-scoped, in
// version v1, "create" its only verb, no storage version.
func reviewResource(group, kind, plural, singular string) *engine.Resource {
	return &engine.Resource{Group: group, Kind: kind, Plural: plural, Singular: singular,
		Versions: []engine.ServedVersion{{Version: "v1"}}, Verbs: []string{"create"}}
}

// reviews are the self reviews kubectl auth can-i (--list) and whoami
// create, by group and plural.
var reviews = []*review{
	{res: reviewResource(authorizationv1.GroupName, "SelfSubjectAccessReview", "selfsubjectaccessreviews", "selfsubjectaccessreview"),
		answer: answerAccessReview},
	{res: reviewResource(authorizationv1.GroupName, "SelfSubjectRulesReview", "selfsubjectrulesreviews", "selfsubjectrulesreview"),
		answer: answerRulesReview},
	{res: reviewResource(authenticationv1.GroupName, "SelfSubjectReview", "selfsubjectreviews", "selfsubjectreview"),
		answer: answerSelfSubjectReview},
}

// reviewResources lists the reviews' descriptions for discovery.
func reviewResources() []*engine.Resource {
	out := make([]*engine.Resource, len(reviews))
	for i, rv := range reviews {
		out[i] = rv.res
	}
	return out
}

// reviewAt returns the review served at /apis/<group>/<version>/<rest>.
func reviewAt(group, version, rest string) (*review, bool) {
	for _, rv := range reviews {
		if rv.res.Group == group && rest == rv.res.Plural {
			_, ok := rv.res.ServedVersion(version)
			return rv, ok
		}
	}
	return nil, false
}

// serveReview is the POST route of a review; other methods are the
// router's 405, as the only route upstream installs is create.
func (h *Handler) serveReview(rc *fasthttp.RequestCtx, rv *review, version string) {
	if !rc.IsPost() {
		h.writeError(rc, errMethodNotAllowed)
		return
	}
	if accept := b2s(rc.Request.Header.Peek("Accept")); accept != "" && !routeAccepts(accept, h.produces) {
		h.writeError(rc, routerStatus(http.StatusNotAcceptable, "NotAcceptable",
			"406: Not Acceptable\n\nAvailable representations: "+h.produces))
		return
	}
	r := newRequest(h, rc, route{res: rv.res, version: version})
	defer r.finish()
	if err := r.createReview(rv); err != nil {
		r.fail(err)
	}
}

// createReview is handlers.createHandler for a review: the body decodes
// as the endpoint's kind, the answer is 201 Created.
func (r *request) createReview(rv *review) error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	if mo.convert != nil {
		// Reviews have no Table or metadata-only form.
		return notAcceptable(r.h.mediaTypes)
	}
	info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
	if !ok {
		return unsupportedMediaType(r.h.mediaTypes)
	}
	body, err := r.body()
	if err != nil {
		return err
	}
	opts := &metav1.CreateOptions{}
	if err := r.writeOptions(opts, "CreateOptions"); err != nil {
		return err
	}
	in, err := r.decodeBody(info, body, opts.FieldValidation)
	if err != nil {
		return err
	}
	out, err := rv.answer(r.h, requesterOf(r.rc), in, opts.FieldManager, r.scope.UserAgent)
	if err != nil {
		return err
	}
	return r.respond(http.StatusCreated, out, mo)
}

// answerAccessReview echoes the review with its status filled
// (selfsubjectaccessreview.REST.Create).
func answerAccessReview(h *Handler, u auth.User, in runtime.Object, fieldManager, userAgent string) (runtime.Object, error) {
	review, ok := in.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return nil, badRequestf("not a SelfSubjectAccessReview: %#v", in)
	}
	review, err := engine.PrepareSelfSubjectAccessReview(review, fieldManager, userAgent)
	if err != nil {
		return nil, err
	}
	review.Status = auth.AccessReview(h.authz, u, review.Spec)
	return review, nil
}

// answerRulesReview lists the requester's rules in spec.namespace. Like
// selfsubjectrulesreview.REST.Create it answers a new object: the spec is
// not echoed.
func answerRulesReview(h *Handler, u auth.User, in runtime.Object, _, _ string) (runtime.Object, error) {
	review, ok := in.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, badRequestf("not a SelfSubjectRulesReview: %#v", in)
	}
	if review.Spec.Namespace == "" {
		return nil, badRequestf("no namespace on request")
	}
	return &authorizationv1.SelfSubjectRulesReview{Status: auth.RulesReview(h.authz, u, review.Spec.Namespace)}, nil
}

// answerSelfSubjectReview reports who the requester is
// (selfsubjectreview.REST.Create), stamped with the time of the answer.
func answerSelfSubjectReview(_ *Handler, u auth.User, in runtime.Object, _, _ string) (runtime.Object, error) {
	if _, ok := in.(*authenticationv1.SelfSubjectReview); !ok {
		return nil, badRequestf("not a SelfSubjectReview: %#v", in)
	}
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: auth.UserInfo(u)},
	}, nil
}
