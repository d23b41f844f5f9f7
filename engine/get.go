package engine

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// tooLargeRVWait is how long a read with a future resourceVersion waits for
// the store to catch up before the 504 (kube-apiserver: ~3 s).
const tooLargeRVWait = 3 * time.Second

// Get returns one object. It is the first half of every client-go renewal,
// so it stays at one storage Get and one protobuf Unmarshal.
func (e *Engine) Get(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	out, err := e.get(ctx, s, name, opts)
	return out, toStatus(err)
}

func (e *Engine) get(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	kv, err := e.getStored(ctx, k, s, name, opts)
	if err != nil {
		return nil, err
	}
	o, err := k.decode(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return k.fromStorage(o, s.Version), nil
}

// getStored reads the stored value Get answers with.
func (e *Engine) getStored(ctx context.Context, k *kind, s Scope, name string, opts *metav1.GetOptions) (storage.KeyValue, error) {
	if opts != nil && opts.ResourceVersion != "" {
		rv, err := parseRV(opts.ResourceVersion)
		if err != nil {
			return storage.KeyValue{}, err
		}
		if err := e.waitForRV(ctx, rv); err != nil {
			return storage.KeyValue{}, err
		}
	}
	kv, err := e.store.Get(ctx, k.key(s.Namespace, name))
	if errors.Is(err, storage.ErrNotFound) {
		return storage.KeyValue{}, apierrors.NewNotFound(k.gr, name)
	}
	if err != nil {
		return storage.KeyValue{}, storageError(err)
	}
	return kv, nil
}

// GetRaw is Get for a caller that encodes the stored value itself (as
// ListRaw is List's): the same checks and errors, and the object as
// stored. ok is false (and nothing was read) when s asks for a version
// other than the storage version; the caller then uses Get.
func (e *Engine) GetRaw(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (_ RawItem, ok bool, _ error) {
	k, err := e.kindFor(s)
	if err != nil {
		return RawItem{}, false, toStatus(err)
	}
	if s.Version != k.storageGV.Version {
		return RawItem{}, false, nil
	}
	kv, err := e.getStored(ctx, k, s, name, opts)
	if err != nil {
		return RawItem{}, false, toStatus(err)
	}
	return RawItem{Value: kv.Value, ModRevision: kv.ModRevision}, true, nil
}

// waitForRV implements "not older than rv": it returns at once when the
// store has reached rv, else waits up to tooLargeRVWait and then answers
// 504 Too large resource version.
func (e *Engine) waitForRV(ctx context.Context, rv int64) error {
	if rv <= 0 {
		return nil
	}
	cur, err := e.store.CurrentRevision(ctx)
	if err != nil {
		return storageError(err)
	}
	if cur >= rv {
		return nil
	}
	deadline := time.NewTimer(e.rvWait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return tooLargeRV(rv, cur)
		case <-deadline.C:
			return tooLargeRV(rv, cur)
		case <-tick.C:
			if cur, err = e.store.CurrentRevision(ctx); err != nil {
				return storageError(err)
			}
			if cur >= rv {
				return nil
			}
		}
	}
}
