package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine"
)

// minRequestTimeout is kube-apiserver's --min-request-timeout: a watch
// without timeoutSeconds lasts a random time in [1x, 2x) of it.
const minRequestTimeout = 30 * time.Minute

// watch streams events (handlers.ListResource's watch branch and
// serveWatchHandler). mo is the negotiated output, which decides any
// Table or PartialObjectMetadata conversion.
func (r *request) watch(mo mediaOptions, opts *metav1.ListOptions) error {
	accept := b2s(r.rc.Request.Header.Peek("Accept"))
	smo, ok := negotiateMediaType(accept, r.h.infos, restrictResource, true)
	if !ok {
		return notAcceptable(r.h.streamTypes)
	}
	tableOpts, err := r.tableOptions(mo)
	if err != nil {
		return err
	}
	if opts.TimeoutSeconds == nil || *opts.TimeoutSeconds == 0 {
		secs := int64((minRequestTimeout + rand.N(minRequestTimeout)) / time.Second)
		opts.TimeoutSeconds = &secs
	}
	// A timeoutSeconds beyond engine.MaxWatchTimeout is clamped to it:
	// the product would overflow and end the watch at once.
	timeout := engine.MaxWatchTimeout
	if secs := *opts.TimeoutSeconds; secs < int64(timeout/time.Second) {
		timeout = time.Duration(secs) * time.Second
	}
	enc, err := r.newWatchEncoder(smo.info, mo.convert, tableOpts)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(r.h.streams, timeout)
	ctx = engine.WithWarnings(ctx, &r.warnings)
	// The stream copies an object before any encoder that writes to it
	// (encode), so it can take the objects the engine shares.
	lag := &lagDeadline{conn: r.rc.Conn(), active: true}
	w, err := r.h.eng.Watch(engine.WithLaggingHook(engine.WithSharedWatchObjects(ctx), lag.lagged), r.scope, opts)
	if err != nil {
		cancel()
		return err
	}
	enc.ctx = ctx

	mediaType := smo.info.MediaType
	if mediaType != "application/json" {
		mediaType += ";stream=watch"
	}
	r.rc.SetContentType(mediaType)
	r.rc.SetStatusCode(http.StatusOK)
	// client-go's Watch returns only once the headers arrive; send them
	// before the first event.
	r.rc.Response.ImmediateHeaderFlush = true
	log := r.h.log
	ended := streamEndOf(r.rc)
	initialised := initialEventsOf(r.rc)
	guard := func() {
		// fasthttp runs the stream on a connection goroutine: a panic
		// here would end the process, so it only ends the stream.
		if v := recover(); v != nil {
			log.Error("Recovered from a panic in a watch stream", slog.String("panic", fmt.Sprint(v)),
				slog.String("stack", string(debug.Stack())))
		}
	}
	if bw, ok := w.(engine.BatchWatcher); ok {
		// fasthttp frames each Write of the body as one chunk and calls
		// WriteTo on the connection's own goroutine: no pipe and no extra
		// goroutine per stream, one chunk per flush.
		r.h.watchStreams.Add(1)
		cleanup := sync.OnceFunc(func() {
			initialised()
			lag.end()
			r.h.watchStreams.Add(-1)
			ended()
			cancel()
			w.Stop()
		})
		r.rc.Response.SetBodyStream(&watchBody{run: func(out io.Writer) error {
			defer cleanup()
			defer guard()
			return enc.streamBatches(ctx, bw, out, r.h.watchFlushInterval, initialised)
		}, log: log, cancel: cancel, cleanup: cleanup}, -1)
		return nil
	}
	r.rc.SetBodyStreamWriter(func(bw *bufio.Writer) {
		initialised()
		defer ended()
		defer cancel()
		defer w.Stop()
		defer guard()
		if err := enc.stream(ctx, w.ResultChan(), bw); err != nil {
			log.Debug("Watch stream ended", slog.String("err", err.Error()))
		}
	})
	return nil
}

// laggingWriteGrace is how long a stream whose watch was closed for
// falling behind may stay blocked in a write to a client that stopped
// reading. Then the write fails, and the stream, the batch it holds and
// its watch slot go; without it they would stay until the client
// disconnects.
const laggingWriteGrace = 10 * time.Second

// lagDeadline sets the write deadline of a stream's connection when its
// watch is closed as lagging (engine.WithLaggingHook), and clears it when
// the stream ends in time, so that a kept-alive connection serves its
// next request without it. Once the stream ended the hook does nothing:
// the connection may be serving another request.
type lagDeadline struct {
	conn     net.Conn
	mu       sync.Mutex
	active   bool
	deadline bool
}

func (d *lagDeadline) lagged() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active && d.conn != nil {
		d.deadline = true
		_ = d.conn.SetWriteDeadline(time.Now().Add(laggingWriteGrace))
	}
}

func (d *lagDeadline) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active = false
	if d.deadline {
		_ = d.conn.SetWriteDeadline(time.Time{})
	}
}

// watchBody is the body of a watch response served from a BatchWatcher.
// fasthttp uses WriteTo (BodyWriterTo); Read, for any path that reads
// instead, runs the same stream through a pipe.
type watchBody struct {
	run func(io.Writer) error
	log *slog.Logger
	// cancel ends the stream's context; cleanup releases everything the
	// stream holds (the watch, its slot), for a body never written.
	cancel, cleanup func()
	once            sync.Once
	pr              *io.PipeReader
}

func (b *watchBody) SupportsBodyWriteTo() bool { return true }

func (b *watchBody) WriteTo(w io.Writer) (int64, error) {
	started := false
	b.once.Do(func() { started = true })
	if !started {
		return 0, errors.New("watch body already consumed")
	}
	if err := b.run(w); err != nil {
		b.log.Debug("Watch stream ended", slog.String("err", err.Error()))
		return 0, err
	}
	return 0, nil
}

func (b *watchBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		pr, pw := io.Pipe()
		b.pr = pr
		go func() { _ = pw.CloseWithError(b.run(pw)) }()
	})
	if b.pr == nil {
		return 0, io.EOF
	}
	return b.pr.Read(p)
}

func (b *watchBody) Close() error {
	b.once.Do(b.cleanup) // never started: end the watch and free its slot
	if b.pr != nil {
		_ = b.pr.Close()
		b.cancel() // the reader went away: end the stream writing to it
	}
	return nil
}

// watchEncoder writes watch events like upstream's watchEncoder: the
// object is encoded on its own (the "embedded" encoding), wrapped in a
// WatchEvent and written through the media type's framer.
type watchEncoder struct {
	r         *request
	ctx       context.Context
	embedded  runtime.Encoder
	event     runtime.Encoder
	framer    func(io.Writer) io.Writer
	target    *schema.GroupVersionKind
	tableOpts *metav1.TableOptions
	obj, ev   bytes.Buffer
	// fastJSON: events go through frameCache; gv is the version they
	// are written in.
	fastJSON bool
	gv       schema.GroupVersion
}

func (r *request) newWatchEncoder(info *runtime.SerializerInfo, target *schema.GroupVersionKind, tableOpts *metav1.TableOptions) (*watchEncoder, error) {
	if info.StreamSerializer == nil || info.StreamSerializer.Framer == nil {
		return nil, fmt.Errorf("no framer defined for %q", info.MediaType)
	}
	e := &watchEncoder{
		r:         r,
		event:     engine.Codecs.EncoderForVersion(info.StreamSerializer.Serializer, r.gv),
		framer:    info.StreamSerializer.Framer.NewFrameWriter,
		target:    target,
		tableOpts: tableOpts,
	}
	gv := r.gv
	if target != nil {
		gv = target.GroupVersion()
	}
	e.embedded = r.h.encoder(info, false, gv)
	// Plain JSON events of a kind engine has a codec for share their
	// frames (frameCache).
	e.gv = gv
	e.fastJSON = target == nil && info.MediaType == "application/json" && engine.HasJSONCodec(gv.WithKind(r.scope.Resource.Kind))
	return e, nil
}

// watchFlushInterval is the shortest time between two flushes of one
// watch stream. The first event after a quiet period goes out at once;
// under a steady stream events are batched into one write per interval,
// so that 1,000 watchers of a namespace renewed 1,000 times per second
// cost tens of thousands of writes per second instead of a million.
const watchFlushInterval = 10 * time.Millisecond

// maxWatchFlushInterval bounds the interval that many open streams
// stretch it to (watchFlushInterval method).
const maxWatchFlushInterval = 40 * time.Millisecond

// watchFlushInterval grows the flush interval with the number of open
// batched streams, 40 µs per stream between 10 and 40 ms: with 1,000
// watchers a busy stream is written 25 times per second instead of 100,
// which the socket writes of both ends (on the same cores) make worth a
// few tens of milliseconds of delivery latency. A quiet stream still gets
// its first event at once.
func (h *Handler) watchFlushInterval() time.Duration {
	d := time.Duration(h.watchStreams.Load()) * 40 * time.Microsecond
	return min(max(d, watchFlushInterval), maxWatchFlushInterval)
}

// stream copies events to bw until the channel closes, the context ends
// (timeout, shutdown) or a write fails (the client went away). It flushes
// when no further event is queued, at most once per watchFlushInterval.
func (e *watchEncoder) stream(ctx context.Context, ch <-chan watch.Event, bw *bufio.Writer) error {
	out := e.framer(bw)
	var lastFlush time.Time
	var timer *time.Timer
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return bw.Flush()
			}
			if err := e.encode(ev, out); err != nil {
				return err
			}
		}
		if len(ch) > 0 {
			continue
		}
		if wait := time.Until(lastFlush.Add(watchFlushInterval)); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
			for len(ch) > 0 {
				ev, ok := <-ch
				if !ok {
					return bw.Flush()
				}
				if err := e.encode(ev, out); err != nil {
					return err
				}
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		lastFlush = time.Now()
	}
}

// watchBatchBytes is about how much of a stream's queue is taken, encoded
// and written at once (by the events' stored size): a stream holds one
// batch, however far behind its client is; the rest stays in the engine's
// queue, counted against the watch budgets.
const watchBatchBytes = 64 << 10

// streamBatches is stream for a watch that queues its events: it takes
// what is queued in batches of about watchBatchBytes and writes each with
// one Write (one HTTP chunk, usually one socket write), a large frame on
// its own without a copy. When the queue is drained it waits for the next
// flush to be due (interval()), so a stream costs one wake-up and one
// write per flush however many events arrive in between.
// initialised runs once the events queued before the stream began have
// been written (the first time the queue is drained).
func (e *watchEncoder) streamBatches(ctx context.Context, w engine.BatchWatcher, dst io.Writer, interval func() time.Duration, initialised func()) error {
	var buf bytes.Buffer
	out := e.framer(&buf)
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		_, err := dst.Write(buf.Bytes())
		if buf.Cap() > 256<<10 {
			buf = bytes.Buffer{} // a burst's buffer goes; framers hold &buf
		}
		buf.Reset()
		return err
	}
	var evs []watch.Event
	var lastFlush time.Time
	var timer *time.Timer
	for {
		var open, more bool
		evs, open, more = w.TakeEvents(evs[:0], watchBatchBytes)
		for i := range evs {
			if frame, ok := e.fastFrame(evs[i]); ok {
				if len(frame) < watchBatchBytes/4 {
					_, _ = out.Write(frame) // a bytes.Buffer
					continue
				}
				if err := flush(); err != nil {
					return err
				}
				if _, err := dst.Write(frame); err != nil {
					return err
				}
				continue
			}
			if err := e.encode(evs[i], out); err != nil {
				return err
			}
		}
		clear(evs)
		if err := flush(); err != nil {
			return err
		}
		if e.obj.Cap() > 256<<10 || e.ev.Cap() > 256<<10 {
			e.obj, e.ev = bytes.Buffer{}, bytes.Buffer{} // a large event's scratch goes
		}
		if len(evs) > 0 {
			lastFlush = time.Now()
		}
		if !open {
			return nil
		}
		if more {
			continue
		}
		if initialised != nil {
			initialised()
			initialised = nil
		}
		if len(evs) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-w.Ready():
			}
		}
		// Let further events gather until the next flush is due.
		if wait := time.Until(lastFlush.Add(interval())); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		}
	}
}

// fastFrame is the shared plain JSON frame of an event (frameCache), when
// the stream writes plain JSON of a kind the engine has a codec for.
func (e *watchEncoder) fastFrame(ev watch.Event) ([]byte, bool) {
	if !e.fastJSON { // implies no conversion
		return nil, false
	}
	return e.r.h.frames.frame(ev.Type, ev.Object, e.gv)
}

// encode writes one event.
func (e *watchEncoder) encode(ev watch.Event, out io.Writer) error {
	obj := ev.Object
	if frame, ok := e.fastFrame(ev); ok {
		_, err := out.Write(frame)
		return err
	}
	// The engine shares event objects between watchers, and encoders set
	// the TypeMeta of what they encode: encode a copy.
	obj = engine.ShallowCopy(obj)
	if e.target != nil {
		// As upstream, a failed conversion sends the object unconverted.
		if t, err := e.r.transformTo(e.ctx, obj, e.target, e.tableOpts); err == nil {
			obj = t
		}
		if e.tableOpts != nil {
			// Only the first Table carries the column definitions.
			e.tableOpts.NoHeaders = true
		}
	}
	e.obj.Reset()
	if err := e.embedded.Encode(obj, &e.obj); err != nil {
		return fmt.Errorf("encoding watch object %T: %w", obj, err)
	}
	e.ev.Reset()
	we := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: e.obj.Bytes()}}
	if err := e.event.Encode(we, &e.ev); err != nil {
		return fmt.Errorf("encoding watch event: %w", err)
	}
	_, err := out.Write(e.ev.Bytes())
	return err
}
