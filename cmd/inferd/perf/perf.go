// Package perf is `inferd perf`, a perf_analyzer-style load tool for any
// KServe v2 server (inferd or Triton), over HTTP or gRPC (-i grpc): it sweeps concurrency or request
// rate, measures in windows until they agree, and reports client latency
// and throughput beside the server's own queue/compute split.
package perf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Main runs the tool with args (the words after "perf") and returns the
// exit code: 0 done, 1 failed, 2 bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "search" {
		err = searchMain(ctx, args[1:], stdout, stderr)
	} else {
		var o *options
		if o, err = parseArgs(args, stderr); err == nil {
			err = run(ctx, o, stdout, stderr)
		}
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "inferd perf:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	sess, err := openSession(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer sess.close()
	if o.verbose {
		sess.m.passes = stdout
	}
	writeSettings(stdout, o, sess.info)
	started := time.Now() // where the report's autopilot decisions count from
	var results []result
	var runErr error
	cpu := newUsageLog(ctx, o) // for --report
	defer cpu.close()
	cpu.mark()
	// try measures one setting and reports it as perf_analyzer does: a
	// setting over --latency-threshold or not stable is not reported (the
	// JSON report keeps it, marked), and does not meet the limit.
	try := func(concurrency int, rate float64) (result, bool, error) {
		writeSettingStart(stdout, o, concurrency, rate)
		var r result
		var err error
		if len(o.concurrency) > 0 {
			r, err = sess.concurrency(ctx, concurrency)
		} else {
			r, err = sess.requestRate(ctx, rate)
		}
		cpu.mark()
		if err != nil {
			if ctx.Err() != nil {
				err = errors.New("interrupted")
			}
			return r, false, err
		}
		r.OverLatencyThreshold = o.latencyThreshold > 0 && usec(r.StabilityLatency)/1000 >= o.latencyThreshold.Milliseconds()
		results = append(results, r)
		sess.prog.done()
		if r.Errors > 0 {
			sess.warn(fmt.Sprintf("%s: %d of %d requests failed, last: %s", r.label(), r.Errors, r.Requests, r.LastError))
		}
		if r.OverLatencyThreshold {
			sess.prog.println(fmt.Sprintf("Measured latency went over the set limit of %d msec. ", o.latencyThreshold.Milliseconds()))
			return r, false, nil
		}
		if !r.Stable {
			sess.prog.println(unstableMessage(o, r))
			return r, false, nil
		}
		writeSettingReport(stdout, o, r)
		return r, true, nil
	}
	switch {
	case o.binarySearch && len(o.concurrency) > 0:
		c := o.concurrency
		runErr = bisect(c[0], c[len(c)-1], rangeStep(c), func(n int) (bool, error) { _, met, err := try(n, 0); return met, err })
	case o.binarySearch:
		r := o.rates
		runErr = bisect(r[0], r[len(r)-1], rangeStep(r), func(v float64) (bool, error) { _, met, err := try(0, v); return met, err })
	default:
		// perf_analyzer's sweep ends at the first setting that does not
		// meet the limit, and fails when the first did not settle.
		for i := range max(len(o.concurrency), len(o.rates)) {
			var r result
			var met bool
			if len(o.concurrency) > 0 {
				r, met, runErr = try(o.concurrency[i], 0)
			} else {
				r, met, runErr = try(0, o.rates[i])
			}
			if runErr != nil {
				break
			}
			if !met {
				if i == 0 && !r.OverLatencyThreshold {
					runErr = errUnstable
				}
				break
			}
		}
	}
	sess.prog.done()
	writeSummary(stdout, o, reported(results))
	// Reports hold whatever was measured, also when the run was cut short.
	if err := writeReports(o, results); err != nil {
		return errors.Join(runErr, err)
	}
	if err := writeSweepHTML(context.WithoutCancel(ctx), o, results, cpu, started); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// bisect is perf_analyzer's binary search over a range (triton-inference-server/perf_analyzer
// src/inference_profiler.h, Profile): it tries start, then end, then the
// middle of what is left, keeping the half whose lower end meets the limit
// (met), until the range is no wider than step.
func bisect[T int | float64](start, end, step T, met func(T) (bool, error)) error {
	ok, err := met(start)
	if err != nil || !ok {
		return err
	}
	if ok, err = met(end); err != nil || ok {
		return err
	}
	for end-start > step {
		mid := (start + end) / 2
		ok, err := met(mid)
		if err != nil {
			return err
		}
		if ok {
			start = mid
		} else {
			end = mid
		}
	}
	return nil
}

// rangeStep is the step of an expanded range (1 for a single setting).
func rangeStep[T int | float64](values []T) T {
	if len(values) < 2 {
		return 1
	}
	return values[1] - values[0]
}

// session is one model on one server, ready to be measured: the requests
// are prepared and the server has answered one of them. A config search
// measures several settings through one session per configuration.
type session struct {
	o     *options
	proto protocol
	info  *modelInfo
	send  *sender
	m     *measurer
	prog  *progress
	rates int        // request-rate settings measured so far: seeds each schedule
	shm   *shmLayout // --shared-memory system's regions; nil without
}

// openSession connects, reads the model, prepares its requests and sends
// one. Progress lines and warnings go to stderr.
func openSession(ctx context.Context, o *options, stderr io.Writer) (*session, error) {
	conns := o.maxThreads
	if len(o.concurrency) > 0 {
		conns = o.concurrency[len(o.concurrency)-1]
	}
	var proto protocol
	if o.serviceKind == "openai" {
		p, err := newOpenAIProtocol(o, conns)
		if err != nil {
			return nil, err
		}
		proto = p
	} else if o.protocol == "grpc" {
		g, err := newGRPCProtocol(o)
		if err != nil {
			return nil, err
		}
		proto = g
	} else {
		h, err := newHTTPProtocol(o, conns)
		if err != nil {
			return nil, err
		}
		proto = h
	}
	s := &session{o: o, proto: proto, prog: newProgress(stderr)}
	if err := s.open(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) open(ctx context.Context) error {
	info, err := s.proto.model(ctx)
	if err != nil {
		return err
	}
	s.info = info
	if p, ok := s.proto.(*openaiProtocol); ok {
		return s.openTexts(ctx, p)
	}
	if info.noConfig {
		s.warn("the server has no model config endpoint; treating the model as non-batching")
	}
	sets, err := buildTensors(s.o, info, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return usageError{err}
	}
	if s.o.sharedMemory == "system" {
		if s.shm, err = newShmLayout(s.o, info, sets); err != nil {
			return err
		}
		if err := s.shm.register(ctx, s.proto); err != nil {
			return err
		}
	}
	if err := s.proto.prepare(info, sets, s.shm); err != nil {
		return usageError{err}
	}
	s.send = &sender{proto: s.proto, n: uint64(len(sets))}
	// One request before measuring: a request the server refuses outright
	// would fail every time, so say so now rather than after a window.
	c := s.proto.conn()
	_, err = c.infer(ctx, 0)
	c.close()
	if err != nil {
		if rejected(err) {
			return fmt.Errorf("the server rejects the request: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	s.m = s.newMeasurer()
	return nil
}

// newMeasurer measures the session's model (and an ensemble's composing
// models) through its sender.
func (s *session) newMeasurer() *measurer {
	return &measurer{opts: s.o, sender: s.send, progress: s.prog, warn: s.warn,
		model: modelRef{name: s.o.model, version: s.o.version}, composing: s.info.composing}
}

func (s *session) warn(msg string) { s.prog.println("inferd perf: warning: " + msg) }

// close unregisters and removes the session's shared-memory regions, also
// after an interrupt, and ends its connections.
func (s *session) close() {
	if s.shm != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.shm.release(ctx, s.proto); err != nil {
			s.warn("--shared-memory system: " + err.Error())
		}
		cancel()
		s.shm = nil
	}
	s.proto.shutdown()
}

// note adds what the model's config says to a result, and the
// embeddings mode's texts a second.
func (s *session) note(r *result) {
	if s.o.serviceKind == "openai" {
		r.TextsPerSec = r.Throughput * float64(s.o.textBatch)
	}
	if r.Server != nil {
		r.Server.ResponseCache = s.info.responseCache
	}
}

// concurrency measures n requests kept in flight until the windows agree
// or --max-trials pass.
func (s *session) concurrency(ctx context.Context, n int) (result, error) {
	r, err := s.m.measure(ctx, func(ctx context.Context) load { return startConcurrency(ctx, s.send, n) }, "concurrency "+strconv.Itoa(n))
	r.Concurrency = n
	s.note(&r)
	return r, err
}

// requestRate measures rate requests per second sent on --request-distribution's schedule.
func (s *session) requestRate(ctx context.Context, rate float64) (result, error) {
	rng := rand.New(rand.NewPCG(3, uint64(s.rates)))
	s.rates++
	label := "request rate " + strconv.FormatFloat(rate, 'g', -1, 64)
	r, err := s.m.measure(ctx, func(ctx context.Context) load {
		return startRate(ctx, s.send, rate, s.o.distribution == "poisson", s.o.maxThreads, rng)
	}, label)
	r.RequestRate = rate
	s.note(&r)
	return r, err
}

// fromFile tells whether --input-data names data files.
func fromFile(o *options) bool { return len(o.dataPaths) > 0 }

// buildTensors makes the input tensors of every request the load will
// send; the protocol encodes them.
func buildTensors(o *options, info *modelInfo, rng *rand.Rand) ([][]tensorData, error) {
	if info.maxBatch == 0 && o.batch > 1 {
		return nil, fmt.Errorf("-b %d: model %q does not batch (max_batch_size 0)", o.batch, info.name)
	}
	if info.maxBatch > 0 && o.batch > info.maxBatch {
		return nil, fmt.Errorf("-b %d: model %q takes at most %d", o.batch, info.name, info.maxBatch)
	}
	for name := range o.shapes {
		found := false
		for _, in := range info.inputs {
			found = found || in.Name == name
		}
		if !found {
			return nil, fmt.Errorf("--shape %s: the model has no input %q", name, name)
		}
	}
	withBatch := func(dims []int64) []int64 {
		if info.maxBatch == 0 {
			return dims
		}
		return append([]int64{int64(o.batch)}, dims...)
	}

	if !fromFile(o) {
		var tensors []tensorData
		for _, in := range info.inputs {
			shape, err := resolveShape(in.Name, in.Shape, o.shapes[in.Name], -1)
			if err != nil {
				return nil, err
			}
			t, err := synthetic(in.Datatype, withBatch(shape), o.inputData == "zero", o.stringLength, rng)
			if in.Datatype == "BYTES" && o.stringData != "" && err == nil {
				t = repeatedString(o.stringData, withBatch(shape))
			}
			if err != nil {
				return nil, fmt.Errorf("input %s: %w", in.Name, err)
			}
			tensors = append(tensors, t)
		}
		return [][]tensorData{tensors}, nil
	}

	steps, err := loadData(o.dataPaths, info.inputs, o.shapes)
	if err != nil {
		return nil, err
	}
	// Request k carries steps k .. k+b-1 (wrapping), as perf_analyzer
	// fills a batch from consecutive steps.
	sets := make([][]tensorData, 0, len(steps))
	for k := range steps {
		tensors := make([]tensorData, len(info.inputs))
		for i, in := range info.inputs {
			first := steps[k][i]
			var joined []byte
			for j := 0; j < o.batch; j++ {
				t := steps[(k+j)%len(steps)][i]
				if !slices.Equal(t.shape, first.shape) {
					return nil, fmt.Errorf("data file: input %s: steps in one batch of %d have different shapes [%s] and [%s]", in.Name, o.batch, joinDims(first.shape), joinDims(t.shape))
				}
				joined = append(joined, t.raw...)
			}
			tensors[i] = tensorData{raw: joined, shape: withBatch(first.shape), count: first.count * int64(o.batch)}
		}
		sets = append(sets, tensors)
	}
	return sets, nil
}

// progress writes one status line per window to stderr: rewritten in place
// on a terminal, one line each otherwise (logs, CI).
type progress struct {
	w       io.Writer
	tty     bool
	lastLen int
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(line string) {
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := max(p.lastLen-len(line), 0)
	fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
	p.lastLen = len(line)
}

// println prints a line of its own, clearing a pending progress line.
func (p *progress) println(line string) {
	p.done()
	fmt.Fprintln(p.w, line)
}

// done clears the progress line on a terminal.
func (p *progress) done() {
	if p.tty && p.lastLen > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.lastLen)+"\r")
		p.lastLen = 0
	}
}
