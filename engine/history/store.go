package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/leasehold/leasehold/storage"
)

// Store reads and writes decision histories and lease timelines.
type Store struct {
	kv  storage.Interface
	log *slog.Logger
}

// New returns a Store over kv, which is the store the engine serves from
// (the documents live beside the API objects). A nil log discards.
func New(kv storage.Interface, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{kv: kv, log: log}
}

// maxWriteRetries bounds the compare-and-swap loops; each document has
// one writer (the election controller, or the UI), so conflicts are rare.
const maxWriteRetries = 8

// checkLease refuses names a key could be confused by.
func checkLease(ns, name string) error {
	if ns == "" || name == "" || strings.Contains(ns, "/") || strings.Contains(name, "/") {
		return fmt.Errorf("invalid lease %q/%q", ns, name)
	}
	return nil
}

// rewrite is the compare-and-swap loop both documents are written with:
// next gets the stored value (nil when there is none) and returns the
// one to store; the write is retried from a fresh read when the key
// changed, appeared or vanished meanwhile.
func (s *Store) rewrite(ctx context.Context, key string, next func(old []byte) ([]byte, error)) error {
	for range maxWriteRetries {
		kv, err := s.kv.Get(ctx, key)
		found := err == nil
		if !found && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		var old []byte
		if found {
			old = kv.Value
		}
		val, err := next(old)
		if err != nil {
			return err
		}
		if found {
			_, err = s.kv.Update(ctx, key, val, kv.ModRevision)
		} else {
			_, err = s.kv.Create(ctx, key, val)
		}
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrKeyExists) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		return err
	}
	return storage.ErrConflict
}

// remove deletes key; a missing key is not an error.
func (s *Store) remove(ctx context.Context, key string) error {
	_, _, err := s.kv.Delete(ctx, key, 0)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return nil
}

// leases lists the leases that have a document under prefix, in key
// order (namespace, then name).
func (s *Store) leases(ctx context.Context, prefix string, each func(ns, name string, value []byte)) error {
	res, err := s.kv.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		return err
	}
	for _, kv := range res.KVs {
		if ns, name, ok := strings.Cut(strings.TrimPrefix(kv.Key, prefix), "/"); ok {
			each(ns, name, kv.Value)
		}
	}
	return nil
}
