package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// maxPageSize is the largest storage page fetched while filling a
	// selector-filtered page (etcd3 store's maxLimit).
	maxPageSize = 10000

	listExpiredMessage     = "The resourceVersion for the provided list is too old."
	continueExpiredMessage = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
	inconsistentContinue   = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)

// listQuery is a validated list or watch request.
type listQuery struct {
	opts  metainternalversion.ListOptions
	label labels.Selector
	field fields.Selector
	// fieldSet is the kind's selectable fields of an object.
	fieldSet func(o object) fields.Set
}

// empty reports a query without selectors (remainingItemCount is only
// given then).
func (q *listQuery) empty() bool { return q.label.Empty() && q.field.Empty() }

// matches applies the label and field selectors, on the kind's
// selectable fields (metadata.name and metadata.namespace for the
// coordination kinds, as upstream).
func (q *listQuery) matches(o object) bool {
	if !q.label.Empty() && !q.label.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	if !q.field.Empty() && !q.field.Matches(q.fieldSet(o)) {
		return false
	}
	return true
}

// metaFieldSet is the selectable fields of every kind without its own.
func metaFieldSet(o object) fields.Set {
	return fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}
}

// parseListOptions converts, defaults and validates list options exactly
// in the order of kube-apiserver's list/watch handler: selector syntax
// (400), option rules (422 ListOptions), field labels (400).
func parseListOptions(k *kind, in *metav1.ListOptions, watch bool) (*listQuery, error) {
	if in == nil {
		in = &metav1.ListOptions{}
	}
	q := &listQuery{fieldSet: metaFieldSet}
	conv := runtime.DefaultMetaV1FieldSelectorConversion
	if k != nil && k.fieldSet != nil {
		q.fieldSet, conv = k.fieldSet, k.fieldLabel
	}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(in, &q.opts, nil); err != nil {
		return nil, badRequest(err.Error())
	}
	q.opts.Watch = watch
	metainternalversion.SetListOptionsDefaults(&q.opts, true)
	if errs := metainternalversionvalidation.ValidateListOptions(&q.opts, true); len(errs) > 0 {
		return nil, optionsInvalid("ListOptions", errs)
	}
	q.label, q.field = q.opts.LabelSelector, q.opts.FieldSelector
	if q.label == nil {
		q.label = labels.Everything()
	}
	if q.field == nil {
		q.field = fields.Everything()
	} else {
		f, err := q.field.Transform(conv)
		if err != nil {
			return nil, badRequest(err.Error())
		}
		q.field = f
	}
	return q, nil
}

// List returns the selected objects as a list in the scope's version.
func (e *Engine) List(ctx context.Context, s Scope, opts *metav1.ListOptions) (runtime.Object, error) {
	out, err := e.listObject(ctx, s, opts)
	return out, toStatus(err)
}

func (e *Engine) listObject(ctx context.Context, s Scope, opts *metav1.ListOptions) (runtime.Object, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	q, err := parseListOptions(k, opts, false)
	if err != nil {
		return nil, err
	}
	res, err := e.list(ctx, k, s.Namespace, q)
	if err != nil {
		return nil, err
	}
	return k.newList(s.Version, res.items, res.meta), nil
}

type listResult struct {
	items []object
	// raw holds the stored values instead of items for a list without
	// selectors read with raw set.
	raw  []storage.KeyValue
	meta metav1.ListMeta
}

// list reads one page (or everything) at a consistent revision.
func (e *Engine) list(ctx context.Context, k *kind, namespace string, q *listQuery) (listResult, error) {
	return e.listPage(ctx, k, namespace, q, false)
}

// listPage is list; with raw (only for a query without selectors) it
// returns the stored values undecoded.
func (e *Engine) listPage(ctx context.Context, k *kind, namespace string, q *listQuery, raw bool) (listResult, error) {
	raw = raw && q.empty()
	prefix := k.listPrefix(namespace)
	tokenPrefix := strings.TrimSuffix(prefix, "/")
	var p listPaging
	if err := e.startListPaging(ctx, &q.opts, tokenPrefix, &p); err != nil {
		return listResult{}, err
	}
	pageLimit := p.limit
	for {
		res, err := e.store.List(ctx, prefix, storage.ListOptions{Revision: p.withRev, StartKey: p.start, Limit: pageLimit})
		if err != nil {
			return listResult{}, e.listStorageError(ctx, err, &q.opts, &p, tokenPrefix)
		}
		if p.withRev == 0 {
			p.withRev = res.Revision // later pages read the same snapshot
		}
		p.hasMore, p.lastCount = res.More, res.Count
		if raw {
			p.takeRaw(res.KVs)
			break
		}
		e.takeMatching(ctx, k, q, &p, res.KVs)
		if !p.hasMore || p.limit == 0 || int64(len(p.items)) >= p.limit {
			break
		}
		// Selectors dropped items: fetch more, in growing pages.
		if pageLimit < maxPageSize {
			pageLimit = min(pageLimit*2, maxPageSize)
		}
		p.start = p.lastKey + "\x00"
	}
	meta, err := p.listMeta(q, tokenPrefix)
	if err != nil {
		return listResult{}, err
	}
	return listResult{items: p.items, raw: p.raws, meta: meta}, nil
}

// listPaging is the state of one listPage call, kept in a struct on
// listPage's stack so that its steps can be separate functions without
// returning many values or allocating.
type listPaging struct {
	// limit is the page size asked for, 0 for everything.
	limit int64
	// start is the key the next storage page starts at.
	start string
	// withRev is the snapshot revision read, 0 until the first page
	// fixes it for a list at the latest revision.
	withRev int64

	items     []object
	raws      []storage.KeyValue
	lastKey   string
	hasMore   bool
	lastCount int64
}

// startListPaging checks resourceVersion, limit and continue, and sets
// where and at which revision listing starts, like the etcd3 store's
// GetList.
func (e *Engine) startListPaging(ctx context.Context, o *metainternalversion.ListOptions, tokenPrefix string, p *listPaging) error {
	var rv int64
	if o.Continue == "" {
		// With a continue token the resourceVersion may only be "" or
		// "0" (checked below), so it is never parsed.
		var err error
		if rv, err = listRV(o.ResourceVersion); err != nil {
			return err
		}
	}
	p.limit = o.Limit
	if p.limit < 0 || (o.ResourceVersion == "0" && o.Continue == "") {
		// RV=0 is served from kube-apiserver's watch cache, which ignores
		// limit.
		p.limit = 0
	}
	if o.Continue != "" {
		key, crv, err := decodeContinue(o.Continue, tokenPrefix)
		if err != nil {
			return badRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if o.ResourceVersion != "" && o.ResourceVersion != "0" {
			return badRequest("specifying resource version is not allowed when using continue")
		}
		p.start = key
		if crv > 0 {
			p.withRev = crv
		}
	} else if rv > 0 {
		if err := e.waitForRV(ctx, rv); err != nil {
			return err
		}
		switch o.ResourceVersionMatch {
		case metav1.ResourceVersionMatchExact:
			p.withRev = rv
		case "":
			if p.limit > 0 {
				p.withRev = rv // legacy paginated list: exactly at rv
			}
		}
	}
	return nil
}

// listStorageError turns a failed storage page read into the Status
// kube-apiserver answers with: an expired list or continue token, a
// resourceVersion from the future, or an internal error.
func (e *Engine) listStorageError(ctx context.Context, err error, o *metainternalversion.ListOptions, p *listPaging, tokenPrefix string) error {
	switch {
	case errors.Is(err, storage.ErrCompacted):
		if o.Continue != "" {
			return expiredContinue(p.start, tokenPrefix)
		}
		return apierrors.NewResourceExpired(listExpiredMessage)
	case errors.Is(err, storage.ErrFutureRevision):
		cur, _ := e.store.CurrentRevision(ctx)
		return tooLargeRV(p.withRev, cur)
	}
	return storageError(err)
}

// takeRaw keeps a storage page undecoded. Without selectors every item is
// taken, so no page is refilled.
func (p *listPaging) takeRaw(kvs []storage.KeyValue) {
	n := len(kvs)
	if p.limit > 0 && int64(n) > p.limit {
		n, p.hasMore = int(p.limit), true
	}
	p.raws = kvs[:n]
	if n > 0 {
		p.lastKey = p.raws[n-1].Key
	}
}

// takeMatching decodes a storage page and appends the objects the
// selectors match, up to the limit.
func (e *Engine) takeMatching(ctx context.Context, k *kind, q *listQuery, p *listPaging, kvs []storage.KeyValue) {
	skip := listSkip(ctx)
	if p.items == nil {
		p.items = make([]object, 0, len(kvs))
	}
	for _, kv := range kvs {
		if p.limit > 0 && int64(len(p.items)) >= p.limit {
			p.hasMore = true
			return
		}
		p.lastKey = kv.Key
		if skip != nil && skip(kv.Value) {
			continue
		}
		obj, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			// One damaged record must not hide all the others.
			e.noteUndecodable(ctx, kv, err)
			AddWarning(ctx, k.skippedWarning(kv.Key))
			continue
		}
		if q.matches(obj) {
			p.items = append(p.items, obj)
		}
	}
}

type listSkipKey struct{}

// WithListSkip marks ctx so that List asks skip about each stored value
// before decoding it, and leaves out those it answers true for, as if a
// selector had not matched them. It is for in-process callers that list
// everything to find a few objects, and can tell the rest from the stored
// bytes for less than a decode (the election controller's start, which
// looks for the few coordinated leases among thousands): skip must not
// keep or modify the value. The HTTP API never sets it.
func WithListSkip(ctx context.Context, skip func(stored []byte) bool) context.Context {
	return context.WithValue(ctx, listSkipKey{}, skip)
}

func listSkip(ctx context.Context) func([]byte) bool {
	f, _ := ctx.Value(listSkipKey{}).(func([]byte) bool)
	return f
}

// listMeta is the page's resourceVersion and, when more remain, its
// continue token and (without selectors) the remaining item count.
func (p *listPaging) listMeta(q *listQuery, tokenPrefix string) (metav1.ListMeta, error) {
	meta := metav1.ListMeta{ResourceVersion: formatRV(p.withRev)}
	if p.hasMore && p.limit > 0 {
		next, err := encodeContinue(p.lastKey+"\x00", tokenPrefix, p.withRev)
		if err != nil {
			return metav1.ListMeta{}, apierrors.NewInternalError(err)
		}
		meta.Continue = next
		if q.empty() {
			c := p.lastCount - p.limit
			meta.RemainingItemCount = &c
		}
	}
	return meta, nil
}

// ListJSON is List answered with the body of a plain application/json
// response, rendered from the stored values without decoding them: the
// same errors, and byte for byte the serializer's JSON of what List
// returns. ok is false (and nothing was read) when the request needs the
// objects decoded, because of selectors, a version other than the storage
// version or a kind without a stored-format codec, and when the codec
// declines a value; the caller then uses List.
func (e *Engine) ListJSON(ctx context.Context, s Scope, opts *metav1.ListOptions) (_ []byte, ok bool, _ error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, false, toStatus(err)
	}
	if k.storedListJSON == nil || s.Version != k.storageGV.Version {
		return nil, false, nil
	}
	q, err := parseListOptions(k, opts, false)
	if err != nil {
		return nil, false, toStatus(err)
	}
	if !q.empty() {
		return nil, false, nil
	}
	res, err := e.listPage(ctx, k, s.Namespace, q, true)
	if err != nil {
		return nil, false, toStatus(err)
	}
	body, ok := k.storedListJSON(&res.meta, res.raw)
	return body, ok, nil
}

// continueToken is kube-apiserver's continue format (storage.EncodeContinue).
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// encodeContinue renders a token whose start key is relative to
// tokenPrefix (the list prefix without its trailing "/"), so the bytes
// match upstream's: {"v":"meta.k8s.io/v1","rv":N,"start":"/ns/name\u0000"}.
func encodeContinue(key, tokenPrefix string, rv int64) (string, error) {
	next := strings.TrimPrefix(key, tokenPrefix)
	if next == key {
		return "", fmt.Errorf("unable to encode next field: the key and key prefix do not match")
	}
	out, err := json.Marshal(&continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rv, StartKey: next})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// decodeContinue is storage.DecodeContinue with the same messages.
func decodeContinue(token, tokenPrefix string) (string, int64, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, fmt.Errorf("continue key is not valid: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, fmt.Errorf("continue key is not valid: %v", err)
	}
	switch c.APIVersion {
	case "meta.k8s.io/v1":
		if c.ResourceVersion == 0 {
			return "", 0, fmt.Errorf("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
		}
		if c.StartKey == "" {
			return "", 0, fmt.Errorf("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
		}
		key := c.StartKey
		if !strings.HasPrefix(key, "/") {
			key = "/" + key
		}
		// path.Clean keeps a client from ranging above the list prefix.
		if cleaned := path.Clean(key); cleaned != key {
			return "", 0, fmt.Errorf("continue key is not valid: %s", c.StartKey)
		}
		return tokenPrefix + key, c.ResourceVersion, nil
	}
	return "", 0, fmt.Errorf("continue key is not valid: server does not recognize this encoded version %q", c.APIVersion)
}

// expiredContinue is the 410 for a continue token whose revision has been
// compacted, carrying a fresh token that continues at the latest state.
func expiredContinue(key, tokenPrefix string) error {
	next, err := encodeContinue(key, tokenPrefix, -1)
	if err != nil {
		return apierrors.NewResourceExpired(continueExpiredMessage)
	}
	se := apierrors.NewResourceExpired(inconsistentContinue)
	se.ErrStatus.ListMeta.Continue = next
	return se
}
