package host

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

const (
	poolMinCap = 1 << 20  // reserve so small guests grow without copying
	poolMaxCap = 16 << 20 // larger buffers are left to the GC
)

// memPool backs guest linear memories with reused buffers. A fresh
// instance per decision would otherwise allocate (and make the GC sweep)
// its whole memory every time: 64 KiB-4 MiB per decision, the main source
// of latency outliers. Buffers are zeroed as they are handed out, as wasm
// requires. After the runtime is closed nothing returns to the pool, so a
// buffer still referenced by a closing instance is never handed out again.
type memPool struct {
	pool   sync.Pool
	closed atomic.Bool
}

func (p *memPool) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	return &pooledMemory{p: p, max: maxBytes}
}

type pooledMemory struct {
	p   *memPool
	buf []byte
	max uint64
}

// Reallocate grows the memory to size bytes, zeroing what it exposes.
func (m *pooledMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.buf == nil {
		if b, ok := m.p.pool.Get().(*[]byte); ok && uint64(cap(*b)) >= size {
			m.buf = (*b)[:0]
		} else {
			m.buf = make([]byte, 0, max(size, poolMinCap))
		}
	}
	old := uint64(len(m.buf))
	if size <= old {
		m.buf = m.buf[:size]
		return m.buf
	}
	if size > uint64(cap(m.buf)) {
		grown := make([]byte, size, min(max(2*size, poolMinCap), max(m.max, size)))
		copy(grown, m.buf)
		m.buf = grown
		return m.buf
	}
	m.buf = m.buf[:size]
	clear(m.buf[old:])
	return m.buf
}

func (m *pooledMemory) Free() {
	if m.buf != nil && cap(m.buf) <= poolMaxCap && !m.p.closed.Load() {
		b := m.buf[:0]
		m.p.pool.Put(&b)
	}
	m.buf = nil
}
