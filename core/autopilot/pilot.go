package autopilot

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Config parameters (config.pbtxt `parameters`), and the keys of
// --model-slo=<model>,<key>=<value>,...
const (
	ParamP99      = "slo_p99_ms"
	ParamPeriod   = "slo_period_ms"
	ParamMaxDelay = "slo_max_queue_delay_us"
	// The instance scaler's bounds (scale.go): the CPUs the instances may
	// use between them, the fewest instances, and the periods between two
	// changes.
	ParamMaxCPUs      = "slo_max_cpus"
	ParamMinInstances = "slo_min_instances"
	ParamDwell        = "slo_dwell_periods"
)

// DefaultPeriod is how often a watch measures and may decide: long enough
// for a window of a few hundred requests at modest rates, short enough to
// follow a change of load within seconds.
const DefaultPeriod = 2 * time.Second

// MinPeriod bounds how often a config or command line may make a watch
// decide: a watch reads the statistics and its window every period, and
// a period of microseconds would spin a core.
const MinPeriod = 100 * time.Millisecond

// errShortPeriod refuses a period under MinPeriod.
var errShortPeriod = fmt.Errorf("the period must be at least %v", MinPeriod)

// Target is one model's latency target and how the autopilot may pursue
// it; zero fields take the config's parameters, then the defaults.
type Target struct {
	P99, Period, MaxDelay time.Duration
	// MaxCPUs (0: GOMAXPROCS), MinInstances (0: 1) and Dwell (0:
	// DefaultDwell, else at least MinDwell) bound the instance scaler.
	MaxCPUs, MinInstances, Dwell int
}

// Options configure a Pilot.
type Options struct {
	// Targets are --model-slo's, by model name; they win over the
	// config's parameters.
	Targets map[string]Target
	Logger  *slog.Logger
	// History is how many decisions a report keeps (default 20).
	History int
}

// Pilot watches the versions with a target (core.Autopilot), and scales
// their instances through the server it is bound to (core.AutopilotBinder).
type Pilot struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// reload is the server (Bind); scalers are the models' instance
	// scalers, kept across their own reloads.
	reload  core.Reloader
	scalers map[string]*scaler
	closed  bool
	wg      sync.WaitGroup // reloads in flight
	// ctx is the reloads' context, which Close cancels.
	ctx    context.Context
	cancel context.CancelFunc
}

// New makes a Pilot.
func New(opts Options) *Pilot {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.History <= 0 {
		opts.History = 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pilot{opts: opts, log: opts.Logger, scalers: map[string]*scaler{}, ctx: ctx, cancel: cancel}
}

// Bind gives the pilot the server whose models it reloads to change their
// instances (core.AutopilotBinder; core.NewServer calls it).
func (p *Pilot) Bind(r core.Reloader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reload = r
}

// Close cancels the reloads in flight, waits for them and starts no more
// (core.AutopilotBinder: the server's Shutdown calls it first, so that no
// reload loads a model after the shutdown).
func (p *Pilot) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// ParseFlag reads one --model-slo value: <model>,p99_ms=<ms>[,period_ms=<ms>]
// [,max_queue_delay_us=<µs>].
func ParseFlag(v string) (string, Target, error) {
	parts := strings.Split(v, ",")
	name := strings.TrimSpace(parts[0])
	if name == "" || len(parts) < 2 {
		return "", Target{}, fmt.Errorf("--model-slo=%q: want <model>,p99_ms=<ms>", v)
	}
	var t Target
	for _, kv := range parts[1:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return "", Target{}, fmt.Errorf("--model-slo=%q: %q is not <key>=<value>", v, kv)
		}
		var err error
		switch strings.TrimSpace(k) {
		case "p99_ms":
			t.P99, err = positive(val, time.Millisecond)
		case "period_ms":
			if t.Period, err = positive(val, time.Millisecond); err == nil && t.Period < MinPeriod {
				err = errShortPeriod
			}
		case "max_queue_delay_us":
			t.MaxDelay, err = positive(val, time.Microsecond)
		case "max_cpus":
			t.MaxCPUs, err = count(val, 1)
		case "min_instances":
			t.MinInstances, err = count(val, 1)
		case "dwell_periods":
			t.Dwell, err = count(val, MinDwell)
		default:
			err = fmt.Errorf("unknown key %q (p99_ms, period_ms, max_queue_delay_us, max_cpus, min_instances, dwell_periods)", k)
		}
		if err != nil {
			return "", Target{}, fmt.Errorf("--model-slo=%q: %w", v, err)
		}
	}
	if t.P99 == 0 {
		return "", Target{}, fmt.Errorf("--model-slo=%q: p99_ms is required", v)
	}
	return name, t, nil
}

// positive parses a positive decimal number of unit.
func positive(s string, unit time.Duration) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f > 0) || f > 1e9 {
		return 0, fmt.Errorf("%q is not a positive number", s)
	}
	return time.Duration(f * float64(unit)), nil
}

// count parses a whole number of at least least (and at most 1<<16).
func count(s string, least int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < least || n > 1<<16 {
		return 0, fmt.Errorf("%q is not a whole number from %d to %d", s, least, 1<<16)
	}
	return n, nil
}

// target is cfg's target, the command line's winning key by key; false
// when the model declares none.
func (p *Pilot) target(name string, cfg *modelconfig.ModelConfig) (Target, bool, error) {
	t := p.opts.Targets[name]
	params := cfg.GetParameters()
	read := func(key string, unit time.Duration, into *time.Duration) error {
		v, ok := params[key]
		if !ok || *into != 0 {
			return nil
		}
		d, err := positive(v.GetStringValue(), unit)
		if err != nil {
			return fmt.Errorf("parameter %s: %w", key, err)
		}
		*into = d
		return nil
	}
	for _, r := range []struct {
		key  string
		unit time.Duration
		into *time.Duration
	}{{ParamP99, time.Millisecond, &t.P99}, {ParamPeriod, time.Millisecond, &t.Period}, {ParamMaxDelay, time.Microsecond, &t.MaxDelay}} {
		if err := read(r.key, r.unit, r.into); err != nil {
			return Target{}, false, err
		}
	}
	for _, r := range []struct {
		key   string
		least int
		into  *int
	}{{ParamMaxCPUs, 1, &t.MaxCPUs}, {ParamMinInstances, 1, &t.MinInstances}, {ParamDwell, MinDwell, &t.Dwell}} {
		v, ok := params[r.key]
		if !ok || *r.into != 0 {
			continue
		}
		n, err := count(v.GetStringValue(), r.least)
		if err != nil {
			return Target{}, false, fmt.Errorf("parameter %s: %w", r.key, err)
		}
		*r.into = n
	}
	if t.P99 == 0 {
		return Target{}, false, nil
	}
	if t.Period != 0 && t.Period < MinPeriod {
		return Target{}, false, fmt.Errorf("parameter %s: %w", ParamPeriod, errShortPeriod)
	}
	if t.Period == 0 {
		t.Period = DefaultPeriod
	}
	if t.MaxDelay == 0 {
		t.MaxDelay = t.P99 / 2
	}
	return t, true, nil
}

// Observers wraps the server's observer factory (nil: none) so that the
// versions with a target also count their request latencies.
func (p *Pilot) Observers(inner core.ObserverFactory) core.ObserverFactory {
	return func(mv *core.ModelVersion) core.Observer {
		var o core.Observer
		if inner != nil {
			o = inner(mv)
		}
		if _, ok, _ := p.target(mv.Name, mv.Config); !ok {
			return o
		}
		return core.TeeObservers(o, &window{})
	}
}

// Watch starts tuning mv when it declares a target and runs on a dynamic
// batcher (core.Autopilot); a target on a model that cannot be tuned is
// logged and left alone.
func (p *Pilot) Watch(mv *core.ModelVersion, b core.BatchScheduler) core.SLOWatch {
	w, _ := core.ObserverAs[*window](mv.Stats.Observer())
	log := p.log.With("model", mv.Name, "version", mv.Version)
	t, ok, err := p.target(mv.Name, mv.Config)
	switch {
	case err != nil:
		log.Warn("latency target ignored", "error", err)
		return nil
	case !ok:
		return nil
	}
	tuner, tunable := b.(core.Tuner)
	switch {
	case mv.Config.GetDynamicBatching() == nil || mv.Config.GetMaxBatchSize() < 2 || !tunable:
		log.Warn("latency target ignored: the autopilot tunes dynamic batching, which needs dynamic_batching and max_batch_size of 2 or more", "slo_p99_ms", ms(t.P99))
		return nil
	case w == nil:
		log.Warn("latency target ignored: the server counts no request latencies for it (core.Options.Observers is not the autopilot's)")
		return nil
	}
	instances, _ := b.Load()
	wt := newWatch(t, bounds{target: t.P99, maxDelay: t.MaxDelay, maxBS: int64(mv.Config.GetMaxBatchSize()), instances: max(instances, 1), threads: execThreads(mv.Config)},
		mv.Stats, w, tuner, log, p.opts.History)
	log.Info("latency target", "slo_p99_ms", ms(t.P99), "period_ms", ms(t.Period), "max_queue_delay_us", t.MaxDelay.Microseconds())
	sw := p.attach(mv, wt, tuner, t, log)
	go wt.run()
	return sw
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// execThreads is the CPUs an execution of cfg's model keeps busy in this
// process (bounds.threads): an ONNX Runtime session's intra-op threads,
// the config's or ORT's default (one a core); none for other backends,
// whose executions run in other processes.
func execThreads(cfg *modelconfig.ModelConfig) float64 {
	if cfg.GetBackend() != onnxBackend {
		return 0
	}
	if n := intraOpThreads(cfg); n > 0 {
		return float64(n)
	}
	return float64(runtime.NumCPU())
}
