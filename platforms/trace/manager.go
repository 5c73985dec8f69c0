package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
)

// Manager holds the trace settings, samples requests and writes or exports
// their traces. Its zero value is not usable; New builds one.
type Manager struct {
	cfg Config
	log *slog.Logger

	// snap is what Start reads: replaced whole on every update, so the
	// request path takes no lock.
	snap atomic.Pointer[snapshot]

	mu       sync.Mutex // updates
	startup  *setting   // the start-up setting, what a cleared global value falls back to
	files    map[string]*fileSink
	fallback map[string]bool // models whose setting mirrors some global value
	closed   bool

	ids atomic.Uint64 // trace ids, from 1

	// monoBase and wallBase map a time.Time to Triton's steady-clock
	// nanoseconds (CLOCK_MONOTONIC), which the triton mode records.
	monoBase int64
	wallBase time.Time

	otel *otelExporter // opentelemetry mode only
}

type snapshot struct {
	global *setting
	models map[string]*setting
	on     bool // some setting traces (level not OFF)
}

// New builds the manager of cfg. In opentelemetry mode it sets up the
// OTLP/HTTP exporter (nothing is sent until a span ends).
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, files: map[string]*fileSink{}, fallback: map[string]bool{}}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, fmt.Errorf("reading the monotonic clock: %w", err)
	}
	m.monoBase, m.wallBase = ts.Nano(), time.Now()
	if cfg.Mode == ModeOpenTelemetry {
		exp, err := newOTelExporter(cfg)
		if err != nil {
			return nil, err
		}
		m.otel = exp
	}
	m.startup = m.newSetting(values{level: cfg.Level, rate: cfg.Rate, count: cfg.Count, logFreq: cfg.LogFrequency, file: cfg.File}, flags{})
	global := m.newSetting(m.startup.values, flags{})
	m.snap.Store(&snapshot{global: global, on: global.level != 0})
	return m, nil
}

// Mode is the trace mode, fixed at start.
func (m *Manager) Mode() Mode { return m.cfg.Mode }

// steadyNs is t on Triton's steady clock, in nanoseconds.
func (m *Manager) steadyNs(t time.Time) int64 { return m.monoBase + int64(t.Sub(m.wallBase)) }

// On says some setting traces requests, so a frontend may take the
// timestamps it records before Start (HTTP_RECV_START).
func (m *Manager) On() bool { return m != nil && m.snap.Load().on }

// Start decides whether a request for model is traced, and starts its
// trace: nil (the common case) when it is not. In opentelemetry mode, a
// W3C traceparent in carrier continues the caller's trace and is always
// sampled, whatever the rate and count. carrier may be nil.
func (m *Manager) Start(model string, carrier propagation.TextMapCarrier) *Request {
	if m == nil {
		return nil
	}
	sn := m.snap.Load()
	if !sn.on {
		return nil
	}
	st := sn.global
	if len(sn.models) > 0 {
		if ms, ok := sn.models[model]; ok {
			st = ms
		}
	}
	if st.level == 0 {
		return nil
	}
	var parent context.Context
	force := false
	if m.otel != nil && carrier != nil {
		ctx := propagation.TraceContext{}.Extract(context.Background(), carrier)
		if oteltrace.SpanContextFromContext(ctx).IsValid() {
			parent, force = ctx, true
		}
	}
	if !st.sample(force) {
		return nil
	}
	return m.newRequest(st, parent)
}

// Settings is a setting as the settings API shows it.
type Settings struct {
	Level        Level
	Rate         uint32
	Count        int32
	LogFrequency uint32
	File         string
	Mode         Mode
	// Extra are the mode's own settings (opentelemetry mode).
	Extra [][2]string
}

// Settings answers model's setting ("": the global one); a model without
// a setting of its own shows the global one.
func (m *Manager) Settings(model string) Settings {
	sn := m.snap.Load()
	st := sn.global
	if ms, ok := sn.models[model]; ok && model != "" {
		st = ms
	}
	v := st.current()
	return Settings{Level: v.level, Rate: v.rate, Count: v.count, LogFrequency: v.logFreq, File: v.file, Mode: m.cfg.Mode, Extra: m.cfg.Extra}
}

// Update applies u to model's setting ("": the global one), as Triton's
// trace manager: a value given is kept as the setting's own; a cleared or
// never given one follows the global setting (for a model) or the start-up
// one (for the global setting); after a global update, the models that
// follow some global value are updated too. A setting that would trace
// although it cannot (no trace file in triton mode, rate 0, count 0) is
// refused.
func (m *Manager) Update(model string, u Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("the trace manager is closed")
	}
	sn := m.snap.Load()
	next := &snapshot{global: sn.global, models: sn.models}
	// The update works on a copy of the followers, committed with the
	// snapshot: a refused update (the global one may fail part-way, at a
	// model that follows it) leaves both as they were.
	fallback := maps.Clone(m.fallback)
	if err := m.update(next, fallback, model, u); err != nil {
		return err
	}
	if model == "" {
		for _, name := range slices.Collect(maps.Keys(fallback)) {
			if err := m.update(next, fallback, name, Update{}); err != nil {
				return err
			}
		}
	}
	next.on = next.global.level != 0
	for _, st := range next.models {
		next.on = next.on || st.level != 0
	}
	m.snap.Store(next)
	m.fallback = fallback
	// Settings replaced write out what they hold, as Triton's destructor
	// of a replaced setting does; traces still running under them write
	// on their own when they end.
	for _, old := range retired(sn, next) {
		old.retire()
	}
	return nil
}

func retired(old, next *snapshot) []*setting {
	var out []*setting
	if old.global != next.global {
		out = append(out, old.global)
	}
	for name, st := range old.models {
		if next.models[name] != st {
			out = append(out, st)
		}
	}
	return out
}

// update computes model's new setting into next (copy-on-write of its
// models map) and whether it follows the global setting into fallback,
// Triton's UpdateTraceSettingInternal. It changes nothing of m's but the
// trace files it may register.
func (m *Manager) update(next *snapshot, fallback map[string]bool, model string, u Update) error {
	var cur, base *setting
	if model != "" {
		cur = next.models[model]
		base = next.global
	} else {
		cur, base = next.global, m.startup
	}
	v := base.current()
	var f flags
	has := func(clear, given bool, was func(*setting) bool) bool {
		return !clear && ((cur != nil && was(cur)) || given)
	}
	f.level = has(u.ClearLevel, u.Level != nil, func(s *setting) bool { return s.flags.level })
	f.rate = has(u.ClearRate, u.Rate != nil, func(s *setting) bool { return s.flags.rate })
	f.count = has(u.ClearCount, u.Count != nil, func(s *setting) bool { return s.flags.count })
	f.logFreq = has(u.ClearLogFreq, u.LogFrequency != nil, func(s *setting) bool { return s.flags.logFreq })
	var cv values
	if cur != nil {
		cv = cur.current()
	}
	if f.level {
		v.level = pick(u.Level, cv.level)
	}
	if f.rate {
		v.rate = pick(u.Rate, cv.rate)
	}
	if f.count {
		v.count = pick(u.Count, cv.count)
	}
	if f.logFreq {
		v.logFreq = pick(u.LogFrequency, cv.logFreq)
	}
	if model != "" {
		// A model never has a file of its own (it cannot be set over the
		// network), so it always follows the global setting in part.
		if !(f.level || f.rate || f.count || f.logFreq) {
			models := cloneModels(next.models)
			delete(models, model)
			next.models = models
			delete(fallback, model)
			return nil
		}
		fallback[model] = true
	}
	st := m.newSetting(v, f)
	if reason, ok := st.valid(); !ok && st.level != 0 {
		return core.Errorf(core.CodeInvalidArg, "Attempting to set invalid trace setting :%s", reason)
	}
	if model == "" {
		next.global = st
	} else {
		models := cloneModels(next.models)
		models[model] = st
		next.models = models
	}
	return nil
}

func pick[T any](given *T, current T) T {
	if given != nil {
		return *given
	}
	return current
}

func cloneModels(in map[string]*setting) map[string]*setting {
	out := make(map[string]*setting, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Close writes out the traces the settings hold, closes the trace files
// and flushes the spans not yet exported (bounded by ctx).
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	sn := m.snap.Load()
	sts := []*setting{sn.global}
	for _, st := range sn.models {
		sts = append(sts, st)
	}
	m.mu.Unlock()
	for _, st := range sts {
		st.retire()
	}
	m.mu.Lock()
	var errs []error
	for _, f := range m.files {
		errs = append(errs, f.close())
	}
	m.mu.Unlock()
	if m.otel != nil {
		errs = append(errs, m.otel.shutdown(ctx))
	}
	return errors.Join(errs...)
}

// values are one setting's values.
type values struct {
	level   Level
	rate    uint32
	count   int32
	logFreq uint32
	file    string
}

// flags say which values a setting holds as its own rather than follows.
type flags struct{ level, rate, count, logFreq bool }

// setting is one immutable setting (global or a model's) with its
// sampling state and, in triton mode, the traces it collected and has not
// written yet. Updates replace a setting rather than change it, so a
// trace keeps the setting it was sampled under.
type setting struct {
	values
	flags flags
	m     *Manager
	sink  *fileSink

	// seen counts the requests offered to the sampler without mu: every
	// request of a traced model passes here, and only every rate-th one
	// needs the lock (BENCHMARKS.md, "Scaling with cores").
	seen atomic.Uint64
	// spent is set (under mu) once remaining reaches zero.
	spent atomic.Bool

	mu        sync.Mutex
	remaining int32  // count left (-1: no limit); what the settings API shows
	created   uint64 // traces sampled (counted ones)
	collected uint64 // traces written into buf
	buf       []byte // collected traces not yet saved, comma separated
	inBuf     uint32
	retiredAt bool
}

func (m *Manager) newSetting(v values, f flags) *setting {
	st := &setting{values: v, flags: f, m: m, remaining: v.count}
	st.spent.Store(v.count == 0)
	if m.cfg.Mode == ModeTriton && v.file != "" {
		st.sink = m.files[v.file]
		if st.sink == nil {
			st.sink = &fileSink{name: v.file, log: m.log}
			m.files[v.file] = st.sink
		}
	}
	return st
}

// current is the setting's values, with the count that is left.
func (st *setting) current() values {
	st.mu.Lock()
	defer st.mu.Unlock()
	v := st.values
	v.count = st.remaining
	return v
}

// valid says whether the setting can trace, and why not.
func (st *setting) valid() (string, bool) {
	switch {
	case st.level == 0:
		return "tracing is disabled", false
	case st.rate == 0:
		return "sample rate must be non-zero", false
	case st.m.cfg.Mode == ModeTriton && st.file == "":
		return "trace file name is not given", false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return "", st.remaining != 0
}

// sample counts one request and says whether it is traced: every
// rate-th request while the count lasts, and any forced one (a caller's
// propagated trace context). Rate 0 traces only the forced ones.
func (st *setting) sample(force bool) bool {
	if st.rate == 0 {
		return force
	}
	if st.m.cfg.Mode == ModeTriton && st.sink == nil {
		return false // no file to write to: Triton samples nothing
	}
	if st.spent.Load() || st.seen.Add(1)%uint64(st.rate) != 0 {
		return force
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.remaining == 0 {
		return force
	}
	if st.remaining > 0 {
		st.remaining--
		st.spent.Store(st.remaining == 0)
	}
	st.created++
	return true
}

// maxBufferedTraceBytes caps the traces a setting without a log frequency
// holds. Triton keeps them all in memory until the setting ends (an update
// or the server's stop), which an unlimited count lets grow without
// bound; past the cap they are appended to the trace file early, where
// they would have gone (unless a count runs out later: its last traces go
// to an indexed file, as Triton's all would), so the completed file holds
// the same traces.
const maxBufferedTraceBytes = 16 << 20

// write adds one finished trace (its records, comma separated) and saves
// the collected ones to the next indexed file when log_frequency of them
// are collected, or when the count is spent and every counted trace is in;
// without a log frequency, to the trace file once they pass
// maxBufferedTraceBytes.
func (st *setting) write(records []byte) {
	if st.sink == nil {
		return
	}
	st.mu.Lock()
	if st.inBuf > 0 {
		st.buf = append(st.buf, ',')
	}
	st.buf = append(st.buf, records...)
	st.inBuf++
	st.collected++
	flush := st.retiredAt || (st.logFreq != 0 && st.inBuf >= st.logFreq) || (st.remaining == 0 && st.collected >= st.created)
	var out []byte
	indexed := true
	switch {
	case flush:
		out, st.buf, st.inBuf = st.buf, nil, 0
		indexed = !st.retiredAt || st.logFreq != 0
	case st.logFreq == 0 && len(st.buf) >= maxBufferedTraceBytes:
		out, st.buf, st.inBuf = st.buf, nil, 0
		indexed = false
	}
	st.mu.Unlock()
	if out != nil {
		st.sink.save(out, indexed)
	}
}

// retire saves what the setting holds when it is replaced or the server
// stops: to the next indexed file with a log frequency, else to the trace
// file itself.
func (st *setting) retire() {
	if st.sink == nil {
		return
	}
	st.mu.Lock()
	st.retiredAt = true
	out := st.buf
	st.buf, st.inBuf = nil, 0
	st.mu.Unlock()
	if len(out) > 0 {
		st.sink.save(out, st.logFreq != 0)
	}
}
