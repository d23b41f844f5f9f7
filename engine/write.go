package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxUpdateAttempts bounds the optimistic-concurrency retry loop of one
// write (kube-apiserver retries without bound; a bound keeps a pathological
// write storm from pinning a request forever).
const maxUpdateAttempts = 64

// transformFunc computes the object to store from the live one. live is
// never nil: a missing object is represented by an empty one and exists
// is false. live must not be modified (guaranteedUpdate compares the
// result with it): a transform that edits the live object edits a
// DeepCopy. Not copying up front saves a renewal, which only reads it,
// a deep copy of the stored object.
type transformFunc func(ctx context.Context, live object, exists bool) (object, error)

// writeResult is the outcome of guaranteedUpdate.
type writeResult struct {
	obj     object
	created bool
	// deleted is set when the update removed the last finalizer of an
	// object being deleted, which deletes it.
	deleted bool
	// written is set when a compare-and-swap on the live object's
	// revision (or a create of a missing key) succeeded: the read it was
	// computed from was then the latest state (guaranteedUpdate).
	written bool
}

// guaranteedUpdate is kube-apiserver's Store.Update on top of
// storage.GuaranteedUpdate: read, precondition, transform, create-or-
// update checks, validation, no-op detection, compare-and-swap, retried on
// write races.
func (e *Engine) guaranteedUpdate(ctx context.Context, k *kind, namespace, name string, uidPrecondition string, dryRun bool, transform transformFunc) (writeResult, error) {
	key := k.key(namespace, name)
	// The first read may be a stale one (storage.StaleReader: on a
	// cluster, no quorum round), as kube-apiserver starts an update from
	// its watch cache: the write that follows is a compare-and-swap on
	// the revision read, so a result that was written was computed from
	// the latest state, as if the read had been linearizable. Any other
	// outcome (a conflict, a no-op, a refusal, an error but a timeout, a
	// dry run, which writes nothing) could come from a stale state: it is
	// decided again from a linearizable read.
	stale, _ := e.store.(storage.StaleReader)
	if dryRun {
		stale = nil
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		res, retry, err := e.updateAttempt(ctx, k, key, namespace, name, uidPrecondition, dryRun, transform, stale)
		// A timeout is final: a write whose outcome is unknown may have
		// been applied, and its client must be told so (504), as from a
		// linearizable start.
		if stale != nil && !apierrors.IsTimeout(err) && (retry || err != nil || !res.written) {
			stale = nil
			attempt-- // the stale attempt does not count
			continue
		}
		if retry {
			continue
		}
		return res, err
	}
	return writeResult{}, apierrors.NewConflict(k.gr, name, errors.New(OptimisticLockErrorMsg))
}

// updateAttempt is one read-transform-write round of guaranteedUpdate;
// its read is stale's when stale is set. retry is set when another write
// won the race, so that the caller reads again.
func (e *Engine) updateAttempt(ctx context.Context, k *kind, key, namespace, name, uidPrecondition string, dryRun bool,
	transform transformFunc, stale storage.StaleReader) (_ writeResult, retry bool, _ error) {
	var (
		kv  storage.KeyValue
		err error
	)
	if stale != nil {
		kv, err = stale.GetStale(ctx, key)
	} else {
		kv, err = e.store.Get(ctx, key)
	}
	exists := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return writeResult{}, false, storageError(err)
	}
	var live object
	if exists {
		if live, err = k.decode(kv.Value, kv.ModRevision); err != nil {
			if stale == nil { // the linearizable read that follows notes it
				e.noteUndecodable(ctx, kv, err)
			}
			return writeResult{}, false, k.corruptObject(namespace, name, err)
		}
	} else {
		live = k.newObj()
	}
	if uidPrecondition != "" && string(live.GetUID()) != uidPrecondition {
		return writeResult{}, false, k.uidPreconditionFailed(namespace, name, uidPrecondition, string(live.GetUID()))
	}
	obj, err := transform(ctx, live, exists)
	if err != nil {
		return writeResult{}, false, err
	}
	// Store.Update parses the new object's resourceVersion before it
	// knows whether it creates, so a malformed one fails both ways.
	newRV, err := objectRV(obj)
	if err != nil {
		return writeResult{}, false, err
	}
	if !exists {
		return e.createForUpdate(ctx, k, key, namespace, obj, dryRun)
	}
	return e.updateExisting(ctx, k, key, &kv, namespace, name, obj, live, newRV, dryRun)
}

// createForUpdate is guaranteedUpdate's create of an object that does not
// exist yet (create on update). retry is set when it was created
// concurrently, so that the caller updates it instead.
func (e *Engine) createForUpdate(ctx context.Context, k *kind, key, namespace string, obj object, dryRun bool) (_ writeResult, retry bool, _ error) {
	e.fillSystemFields(obj)
	// From the namespace admission to the write (nsGate).
	leave := e.nsGate.enterCreate(namespace)
	if err := e.beforeCreate(ctx, k, namespace, obj, dryRun); err != nil {
		leave()
		return writeResult{}, false, err
	}
	obj.SetResourceVersion("")
	if dryRun {
		leave()
		return writeResult{obj: obj, created: true}, false, nil
	}
	data, err := k.encode(obj)
	if err != nil {
		leave()
		return writeResult{}, false, apierrors.NewInternalError(err)
	}
	created, err := e.store.Create(ctx, key, data)
	leave()
	if errors.Is(err, storage.ErrKeyExists) {
		return writeResult{}, true, nil
	}
	if err != nil {
		return writeResult{}, false, storageError(err)
	}
	if k.isEvent {
		e.events.noteCreate(len(data))
	}
	obj.SetResourceVersion(formatRV(created.ModRevision))
	return writeResult{obj: obj, created: true, written: true}, false, nil
}

// updateExisting is guaranteedUpdate's compare-and-swap of the stored kv
// at key (the live object) with obj. retry is set when another write won the
// race, so that the caller reads again.
func (e *Engine) updateExisting(ctx context.Context, k *kind, key string, kv *storage.KeyValue, namespace, name string, obj, live object, newRV uint64, dryRun bool) (_ writeResult, retry bool, _ error) {
	if newRV == 0 && !k.allowUnconditionalUpdate {
		// Upstream names the resource, not the kind, in this one.
		qualifiedKind := schema.GroupKind{Group: k.gr.Group, Kind: k.gr.Resource}
		return writeResult{}, false, apierrors.NewInvalid(qualifiedKind, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), newRV, "must be specified for an update"),
		})
	}
	if newRV == 0 {
		// An unconditional update: the object takes the stored
		// resourceVersion, as upstream's store sets it before validation.
		newRV = uint64(kv.ModRevision)
		obj.SetResourceVersion(formatRV(kv.ModRevision))
	}
	if newRV != uint64(kv.ModRevision) {
		return writeResult{}, false, apierrors.NewConflict(k.gr, name, errors.New(OptimisticLockErrorMsg))
	}
	if err := e.beforeUpdate(k, namespace, obj, live); err != nil {
		return writeResult{}, false, err
	}
	data, err := k.encode(obj)
	if err != nil {
		return writeResult{}, false, apierrors.NewInternalError(err)
	}
	data = keepManagedFieldsTimes(k, obj, live, data, kv.Value)
	if bytes.Equal(data, kv.Value) {
		return writeResult{obj: live}, false, nil // no-op: same RV, no event
	}
	if shouldDeleteDuringUpdate(obj, live) {
		if dryRun {
			return writeResult{obj: obj, deleted: true}, false, nil
		}
		if _, _, err := e.store.Delete(ctx, key, kv.ModRevision); err != nil {
			if errors.Is(err, storage.ErrConflict) {
				return writeResult{}, true, nil
			}
			if errors.Is(err, storage.ErrNotFound) {
				return writeResult{obj: obj, deleted: true}, false, nil
			}
			return writeResult{}, false, storageError(err)
		}
		return writeResult{obj: obj, deleted: true, written: true}, false, nil
	}
	if dryRun {
		return writeResult{obj: obj}, false, nil
	}
	updated, err := e.store.Update(ctx, key, data, kv.ModRevision)
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		return writeResult{}, true, nil
	}
	if err != nil {
		return writeResult{}, false, storageError(err)
	}
	obj.SetResourceVersion(formatRV(updated.ModRevision))
	return writeResult{obj: obj, written: true}, false, nil
}

// keepManagedFieldsTimes returns the encoding of obj to store. When only
// managedFields timestamps differ from the stored value old, it keeps the
// live object's ones, so that an otherwise unchanged object is a no-op.
func keepManagedFieldsTimes(k *kind, obj, live object, data, old []byte) []byte {
	if bytes.Equal(data, old) || !managedFieldsEqualModuloTime(obj.GetManagedFields(), live.GetManagedFields()) {
		return data
	}
	mine := obj.GetManagedFields()
	obj.SetManagedFields(live.GetManagedFields())
	if alt, err := k.encode(obj); err == nil && bytes.Equal(alt, old) {
		return alt
	}
	obj.SetManagedFields(mine)
	return data
}

// objectRV parses an object's resourceVersion like APIObjectVersioner:
// a malformed one is a 500 with the strconv error.
func objectRV(o object) (uint64, error) {
	rv := o.GetResourceVersion()
	if rv == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, unknownError(err.Error())
	}
	return v, nil
}

// shouldDeleteDuringUpdate: an update that removes the last finalizer of
// an object pending deletion deletes it.
func shouldDeleteDuringUpdate(o, old object) bool {
	g := old.GetDeletionGracePeriodSeconds()
	return len(o.GetFinalizers()) == 0 && old.GetDeletionTimestamp() != nil && g != nil && *g == 0
}

// createOnce is Store.create: system fields, name generation,
// validation, then the storage create.
func (e *Engine) createOnce(ctx context.Context, k *kind, namespace string, o object, dryRun bool) (object, error) {
	// From the namespace admission to the write (nsGate).
	defer e.nsGate.enterCreate(namespace)()
	e.fillSystemFields(o)
	if o.GetGenerateName() != "" && o.GetName() == "" {
		o.SetName(generateName(o.GetGenerateName()))
	}
	if err := e.beforeCreate(ctx, k, namespace, o, dryRun); err != nil {
		return nil, err
	}
	key := k.key(namespace, o.GetName())
	if dryRun {
		_, err := e.store.Get(ctx, key)
		if err == nil {
			return nil, e.alreadyExists(ctx, k, o)
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, storageError(err)
		}
		return o, nil
	}
	// A numeric non-zero resourceVersion is refused (etcd3 store Create);
	// a malformed one is silently dropped, as upstream.
	if v, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64); err == nil && v != 0 {
		return nil, unknownError("resourceVersion should not be set on objects to be created")
	}
	o.SetResourceVersion("")
	data, err := k.encode(o)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	kv, err := e.store.Create(ctx, key, data)
	if errors.Is(err, storage.ErrKeyExists) {
		return nil, e.alreadyExists(ctx, k, o)
	}
	if err != nil {
		return nil, storageError(err)
	}
	if k.isEvent {
		e.events.noteCreate(len(data))
	}
	o.SetResourceVersion(formatRV(kv.ModRevision))
	return o, nil
}

// alreadyExists builds the 409 for a create on an existing key, with
// upstream's generateName and terminating-object variants.
func (e *Engine) alreadyExists(ctx context.Context, k *kind, o object) error {
	name := o.GetName()
	err := apierrors.NewAlreadyExists(k.gr, name)
	if o.GetGenerateName() != "" {
		err = apierrors.NewGenerateNameConflict(k.gr, name, 1)
	}
	if kv, gerr := e.store.Get(ctx, k.key(o.GetNamespace(), name)); gerr == nil {
		if cur, derr := k.decode(kv.Value, kv.ModRevision); derr == nil && cur.GetDeletionTimestamp() != nil {
			err.ErrStatus.Message = fmt.Sprintf("object is being deleted: %s", err.ErrStatus.Message)
		}
	}
	return err
}
