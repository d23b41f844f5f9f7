package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/leasehold/leasehold/plugins/abi"
)

// Timing splits one offline or online call.
type Timing struct {
	Instantiate Duration `json:"instantiate"` // includes _initialize
	Call        Duration `json:"call"`
	Total       Duration `json:"total"`
}

// invoke runs one export of cm in a fresh instance (bounded as run says)
// and returns what the guest wrote with write_output. The instance is always
// closed: it is never reused, after an error or otherwise.
func (r *runner) invoke(ctx context.Context, cm wazero.CompiledModule, logger *guestLogger, export string, input []byte, seed uint64) ([]byte, Timing, error) {
	out, code, tm, err := r.run(ctx, cm, logger, export, input, seed)
	if err != nil {
		return nil, tm, err
	}
	if code != 0 {
		return nil, tm, fmt.Errorf("%s returned %d: %s", export, code, excerpt(out))
	}
	if out == nil {
		return nil, tm, fmt.Errorf("%s returned 0 without calling write_output", export)
	}
	return out, tm, nil
}

// run instantiates cm, calls export and returns its i32 result and the
// output written, if any. The call ends at ctx's deadline, which for a
// decision is its caller's (the election controller's DecideTimeout), or
// after CallLimit when the caller set none: no guest runs unbounded.
func (r *runner) run(ctx context.Context, cm wazero.CompiledModule, logger *guestLogger, export string, input []byte, seed uint64) ([]byte, int32, Timing, error) {
	var tm Timing
	start := time.Now()
	ctx, cancel := r.bounded(ctx)
	defer cancel()
	st := &callState{input: input, max: r.opts.MaxOutputBytes, logger: logger}
	ctx = context.WithValue(ctx, callKey{}, st)
	ctx = experimental.WithMemoryAllocator(ctx, r.mem)
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithSysNanotime(). // a Go guest's garbage collector stalls under a fake monotonic clock
		WithRandSource(newDetRand(seed)).
		WithStdout(logger.stream("stdout")).
		WithStderr(logger.stream("stderr"))
	mod, err := r.rt.InstantiateModule(ctx, cm, cfg)
	tm.Instantiate = Duration(time.Since(start))
	if err != nil {
		return nil, 0, tm, r.callError(ctx, "instantiate", err)
	}
	defer mod.Close(context.Background())
	res, err := mod.ExportedFunction(export).Call(ctx)
	tm.Total = Duration(time.Since(start))
	tm.Call = tm.Total - tm.Instantiate
	if err != nil {
		return nil, 0, tm, r.callError(ctx, export, err)
	}
	if !st.wrote {
		st.output = nil
	} else if st.output == nil {
		st.output = []byte{}
	}
	return st.output, int32(res[0]), tm, nil
}

// bounded returns ctx unchanged in its deadline when its caller set one,
// and otherwise limited to CallLimit: the load-time checks, the self-test
// and offline runs have no caller deadline, a live decision always has the
// election's.
func (r *runner) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, r.opts.CallLimit,
		fmt.Errorf("no answer within %v (the host's CallLimit)", r.opts.CallLimit))
}

// callError turns wazero's errors into short messages: a deadline (with
// its cause, which names the limit that ran out), a proc_exit, or a trap
// (with wazero's wasm stack trace trimmed).
func (r *runner) callError(ctx context.Context, what string, err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("%s: timed out: %w", what, context.Cause(ctx))
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("%s: cancelled: %w", what, context.Cause(ctx))
		}
		return fmt.Errorf("%s: module called proc_exit(%d)", what, exit.ExitCode())
	}
	msg := err.Error()
	if i := strings.Index(msg, "\nwasm stack trace:"); i >= 0 {
		msg = msg[:i] + " (" + firstFrame(msg[i:]) + ")"
	}
	return fmt.Errorf("%s: %s", what, msg)
}

func firstFrame(trace string) string {
	lines := strings.Split(strings.TrimSpace(trace), "\n")
	if len(lines) > 1 {
		return "in " + strings.TrimSpace(lines[1])
	}
	return "no stack"
}

// excerpt makes guest bytes safe for a log line or an error message.
func excerpt(b []byte) string {
	const max = 200
	if len(b) > max {
		b = b[:max]
	}
	s := strings.ToValidUTF8(string(b), "?")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// decodeStrict parses one JSON document into v: valid UTF-8, no unknown
// fields, nothing after it.
func decodeStrict(b []byte, v any) error {
	if !utf8.Valid(b) {
		return errors.New("output is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("output is not a valid document: %w (output: %q)", err, excerpt(b))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("output has data after the document: %q", excerpt(b))
	}
	return nil
}

// detRand is the guest's random source: a SplitMix64 stream seeded from
// the Input's seed, so a decision replays exactly from its recorded input.
type detRand struct{ s uint64 }

func newDetRand(seed uint64) *detRand { return &detRand{s: seed} }

func (d *detRand) Read(p []byte) (int, error) {
	var b [8]byte
	for i := 0; i < len(p); i += 8 {
		d.s += 0x9e3779b97f4a7c15
		z := d.s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[:], z^(z>>31))
		copy(p[i:], b[:])
	}
	return len(p), nil
}
