package boltdb

import (
	"context"

	"github.com/leasehold/leasehold/storage"
)

var _ storage.Elector = (*Store)(nil)

// Campaign grants leadership at once: a bbolt file is locked by a single
// process, so there is never another replica to agree with. Leadership
// lasts until ctx ends.
func (s *Store) Campaign(ctx context.Context, name string) (<-chan struct{}, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lost := make(chan struct{})
	context.AfterFunc(ctx, func() { close(lost) })
	return lost, nil
}
