package boltdb

import (
	"unsafe"

	"github.com/leasehold/leasehold/storage"
)

// histEvent is one retained event. Revisions are dense (every revision is
// exactly one event), so the history is addressed by revision arithmetic.
type histEvent struct {
	ev storage.Event
	// round is the revision of the last event committed in the same
	// transaction; replay uses it to rebuild per-commit responses.
	round int64
	// at is the commit time in Unix nanoseconds, for the time window.
	at int64
}

// history holds the events with revisions (compactRev, rev] in order. It is
// a slice with a moving head so that trimming the front is O(1) amortised.
// A history is copied by value into each snapshot and the backing array
// is shared: the writer only appends beyond every published length and
// never writes an element a published snapshot can see, so a trimmed
// front is not cleared in place but left to the garbage collector when
// the live tail moves to a new array.
type history struct {
	events []histEvent
	head   int
	// bytes estimates the memory the retained events hold (see
	// eventBytes), for Options.HistoryMaxBytes.
	bytes int64
	// dead is what the trimmed events before head still hold, until
	// the live tail moves.
	dead int64
}

func (h *history) len() int { return len(h.events) - h.head }

// eventBytes estimates what one retained event keeps alive: its slot, its
// key and value, and the previous key-value header. The previous value
// itself is not counted: it is the value of the key's preceding event (or
// of the state the history starts from), counted there. It is an estimate:
// the oldest retained event of each key also pins its previous value once
// the event holding it was trimmed, so the real figure can exceed the
// bound by up to one value per key written in the window.
func eventBytes(e *storage.Event) int64 {
	n := int64(unsafe.Sizeof(histEvent{})) + int64(len(e.KV.Key)+len(e.KV.Value))
	if e.PrevKV != nil {
		n += int64(unsafe.Sizeof(storage.KeyValue{}))
	}
	return n
}

// get returns the i-th retained event (0 is the oldest).
func (h *history) get(i int) *histEvent { return &h.events[h.head+i] }

func (h *history) push(e histEvent) {
	h.events = append(h.events, e)
	h.bytes += eventBytes(&e.ev)
}

// dropFront forgets the n oldest events.
func (h *history) dropFront(n int) {
	for i := h.head; i < h.head+n; i++ {
		b := eventBytes(&h.events[i].ev)
		h.bytes -= b
		h.dead += b
	}
	h.head += n
	if h.head == len(h.events) {
		*h = history{}
		return
	}
	// Move the live tail to a new array once the dead front dominates,
	// in slots or in bytes, so memory is bounded by about twice the
	// retained events (older snapshots still being read keep the old
	// array until they finish).
	if (h.head >= 1024 && h.head*2 >= len(h.events)) || h.dead > max(h.bytes, 1<<20) {
		live := make([]histEvent, len(h.events)-h.head, max(16, 2*(len(h.events)-h.head)))
		copy(live, h.events[h.head:])
		h.events, h.head, h.dead = live, 0, 0
	}
}
