package snapshots

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrLowSpace is a snapshot refused, or abandoned, because it would leave
// less free space than the floor (Flags.MinFreeBytes).
var ErrLowSpace = errors.New("not enough free space for a snapshot")

const (
	// chunkBytes is the most one write hands the file at once, so that
	// the pacing is smooth.
	chunkBytes = 1 << 20
	// syncEveryBytes flushes the copy as it is written: one fsync of the
	// whole file at the end would push hundreds of MiB to the disk at
	// once, and the WAL's fsyncs would wait behind them.
	syncEveryBytes = 8 << 20
	// spaceCheckEveryBytes is how often the free space is read again
	// while writing.
	spaceCheckEveryBytes = 4 << 20
)

// pacedFile is the snapshot's temporary file as the copy writes it:
// paced to bytesPerSec, flushed every syncEveryBytes, and abandoned with
// ErrLowSpace when the file system's free space falls below minFree.
type pacedFile struct {
	ctx         context.Context
	f           *os.File
	dir         string
	bytesPerSec int64
	minFree     int64

	start              time.Time
	written            int64
	unsynced, unsized  int64
	lastFree           int64
	sleeping, syncTime time.Duration
}

func (p *pacedFile) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		if err := p.ctx.Err(); err != nil {
			return total, err
		}
		n := min(len(b), chunkBytes)
		w, err := p.f.Write(b[:n])
		total += w
		p.written += int64(w)
		p.unsynced += int64(w)
		p.unsized += int64(w)
		if err != nil {
			return total, err
		}
		b = b[n:]
		if p.unsized >= spaceCheckEveryBytes {
			p.unsized = 0
			if err := p.checkSpace(); err != nil {
				return total, err
			}
		}
		if p.unsynced >= syncEveryBytes {
			p.unsynced = 0
			t := time.Now()
			if err := p.f.Sync(); err != nil {
				return total, err
			}
			p.syncTime += time.Since(t)
		}
		p.pace()
	}
	return total, nil
}

// pace sleeps until the bytes written are no more than bytesPerSec allows
// since the start.
func (p *pacedFile) pace() {
	if p.bytesPerSec <= 0 {
		return
	}
	due := p.start.Add(time.Duration(float64(p.written) / float64(p.bytesPerSec) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.ctx.Done():
		}
		p.sleeping += d
	}
}

// checkSpace fails with ErrLowSpace once the free space is below the
// floor.
func (p *pacedFile) checkSpace() error {
	free, err := freeBytes(p.dir)
	if err != nil {
		return err
	}
	p.lastFree = free
	if free < p.minFree {
		return fmt.Errorf("%w: %s has %d bytes free after %d bytes of the snapshot, below the floor of %d (--snapshot-min-free-bytes); the snapshot was abandoned",
			ErrLowSpace, p.dir, free, p.written, p.minFree)
	}
	return nil
}
