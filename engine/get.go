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
		e.noteUndecodable(ctx, kv, err)
		return nil, k.corruptObject(s.Namespace, name, err)
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

// GetJSON is Get answered with the body of a plain application/json
// response, rendered from the stored value without decoding it: the same
// checks and errors, and byte for byte the serializer's JSON of what Get
// returns. ok is false (and nothing was read) when the scope's kind has
// no stored-format codec or asks for a version other than the storage
// version, and when the codec declines the value; the caller then uses
// Get.
func (e *Engine) GetJSON(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (_ []byte, ok bool, _ error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, false, toStatus(err)
	}
	if k.storedJSON == nil || s.Version != k.storageGV.Version {
		return nil, false, nil
	}
	kv, err := e.getStored(ctx, k, s, name, opts)
	if err != nil {
		return nil, false, toStatus(err)
	}
	body, ok := k.storedJSON(kv.Value, kv.ModRevision)
	return body, ok, nil
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
