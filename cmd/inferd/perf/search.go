package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/repo/modelconfig"
)

// `inferd perf search` does what Model Analyzer's profile does for one
// model (triton-inference-server/model_analyzer docs/config_search.md):
// it loads configurations that differ in instance count, max_batch_size
// and dynamic batching through the load API with a config override
// (triton-inference-server/server docs/protocol/extension_model_repository.md),
// measures each over a concurrency sweep, and picks the one with the most
// throughput, under a p99 latency budget when one is given. Brute mode
// tries the whole grid; quick mode climbs from the smallest configuration
// to the best neighbour until none is better.

// errNoWinner ends a search in which no configuration met the objective.
var errNoWinner = errors.New("no configuration met the objective")

// errInterrupted marks the configuration being tried when the search was
// interrupted.
var errInterrupted = errors.New("interrupted")

// restoreTimeout bounds restoring the original configuration, which runs
// also after the search was interrupted.
const restoreTimeout = 2 * time.Minute

// candidate is one point of the search grid.
type candidate struct {
	instances int
	maxBatch  int // 0: the model does not batch
	delay     int // µs; -1: no dynamic batching
}

func (c candidate) String() string {
	s := strconv.Itoa(c.instances) + " instance"
	if c.instances != 1 {
		s += "s"
	}
	if c.maxBatch > 0 {
		s += ", max batch " + strconv.Itoa(c.maxBatch)
	}
	if c.delay >= 0 {
		s += ", dynamic batching " + strconv.Itoa(c.delay) + " µs"
	}
	return s
}

// trial is one configuration tried and what it gave.
type trial struct {
	candidate
	preferred []int
	cfg       *modelconfig.ModelConfig
	points    []pointReport
	err       error
	score     float64 // best qualifying throughput; 0 when none qualifies
	scoreAt   string  // its concurrency or request rate (settingValue)
	scoreP99  float64 // its p99, µs
}

// Instances, MaxBatch and DynamicText are the report table's columns.
func (t *trial) Instances() int { return t.instances }
func (t *trial) MaxBatch() int  { return t.maxBatch }
func (t *trial) DynamicText() string {
	if t.delay < 0 {
		return "off"
	}
	s := strconv.Itoa(t.delay) + " µs delay"
	if len(t.preferred) > 0 {
		s += ", preferred " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(t.preferred)), ","), "[]")
	}
	return s
}

// apply returns a copy of the original configuration changed to c: one
// instance group of c.instances (otherwise the first group as it was),
// c.maxBatch, and dynamic batching with c.delay and the preferred sizes
// that fit, or none.
func (c candidate) apply(orig *modelconfig.ModelConfig, preferred []int) (*modelconfig.ModelConfig, []int) {
	cfg := proto.Clone(orig).(*modelconfig.ModelConfig)
	g := &modelconfig.ModelInstanceGroup{}
	if len(orig.GetInstanceGroup()) > 0 {
		// Keep the first group's kind, devices, rate limiter and the
		// like; the server names the group again.
		g = proto.Clone(orig.GetInstanceGroup()[0]).(*modelconfig.ModelInstanceGroup)
		g.Name = ""
	}
	g.Count = int32(c.instances)
	cfg.InstanceGroup = []*modelconfig.ModelInstanceGroup{g}
	cfg.MaxBatchSize = int32(c.maxBatch)
	cfg.SchedulingChoice = nil
	var used []int
	if c.delay >= 0 {
		db := &modelconfig.ModelDynamicBatching{MaxQueueDelayMicroseconds: uint64(c.delay)}
		if orig.GetDynamicBatching() != nil { // keep queue policy and the like
			db = proto.Clone(orig.GetDynamicBatching()).(*modelconfig.ModelDynamicBatching)
			db.MaxQueueDelayMicroseconds = uint64(c.delay)
			db.PreferredBatchSize = nil
		}
		for _, p := range preferred {
			if p <= c.maxBatch {
				db.PreferredBatchSize = append(db.PreferredBatchSize, int32(p))
				used = append(used, p)
			}
		}
		cfg.SchedulingChoice = &modelconfig.ModelConfig_DynamicBatching{DynamicBatching: db}
	}
	return cfg, used
}

// grid is the search space: one axis per setting, each sorted.
type grid struct {
	instances, maxBatch, delays []int
}

func (g grid) at(i, b, d int) candidate {
	return candidate{instances: g.instances[i], maxBatch: g.maxBatch[b], delay: g.delays[d]}
}

// newGrid fits the flags to the model: a model that does not batch keeps
// max_batch_size 0 and gets no dynamic batching; sizes below -b are left
// out, as the requests would not fit.
func newGrid(so *searchOptions, orig *modelconfig.ModelConfig, batch int) (grid, error) {
	if orig.GetSequenceBatching() != nil || orig.GetEnsembleScheduling() != nil || orig.GetPlatform() == "ensemble" {
		return grid{}, usagef("model %q: search tries dynamic batching, which sequence batching and ensembles do not take", orig.GetName())
	}
	g := grid{instances: so.instances, maxBatch: so.maxBatch, delays: so.delays}
	if orig.GetMaxBatchSize() == 0 {
		if so.setBatch {
			return grid{}, usagef("--max-batch-sizes: model %q does not batch (max_batch_size 0)", orig.GetName())
		}
		g.maxBatch = []int{0}
		if slices.ContainsFunc(g.delays, func(d int) bool { return d >= 0 }) {
			g.delays = []int{-1}
		}
		return g, nil
	}
	g.maxBatch = slices.DeleteFunc(slices.Clone(g.maxBatch), func(b int) bool { return b < batch })
	if len(g.maxBatch) == 0 {
		return grid{}, usagef("--max-batch-sizes: every size is below -b %d", batch)
	}
	return g, nil
}

// searcher runs the trials of one search.
type searcher struct {
	o      *options
	so     *searchOptions
	hc     *http.Client
	base   string // the server's URL
	model  string
	orig   *modelconfig.ModelConfig
	stderr io.Writer
	prog   *progress
	trials []*trial
	tried  map[candidate]*trial
	// metricsErr is the last failed read of the server's metrics.
	metricsErr error
}

// repositoryLoad posts a load request, with the configuration override
// when cfg is not nil.
func (sr *searcher) repositoryLoad(ctx context.Context, cfg *modelconfig.ModelConfig) error {
	body := []byte("{}")
	if cfg != nil {
		js, err := modelconfig.MarshalJSON(cfg)
		if err != nil {
			return err
		}
		body, err = json.Marshal(map[string]any{"parameters": map[string]string{"config": string(js)}})
		if err != nil {
			return err
		}
	}
	u := sr.base + "/v2/repository/models/" + url.PathEscape(sr.model) + "/load"
	if err := postJSON(ctx, sr.hc, u, body); err != nil {
		return fmt.Errorf("load %s: %w", sr.model, err)
	}
	return nil
}

// evaluate loads c and measures it over the concurrency sweep; a
// configuration the server refuses is recorded, not fatal.
func (sr *searcher) evaluate(ctx context.Context, c candidate) (*trial, error) {
	if t, ok := sr.tried[c]; ok {
		return t, nil
	}
	t := &trial{candidate: c}
	t.cfg, t.preferred = c.apply(sr.orig, sr.so.preferred)
	sr.tried[c] = t
	sr.trials = append(sr.trials, t)
	sr.prog.println(fmt.Sprintf("inferd perf search: configuration %d: %s", len(sr.trials), c))
	if err := sr.repositoryLoad(ctx, t.cfg); err != nil {
		if ctx.Err() != nil {
			t.err = errInterrupted
			return nil, ctx.Err()
		}
		t.err = err
		sr.prog.println("inferd perf search: " + err.Error())
		return t, nil
	}
	sess, err := openSession(ctx, sr.o, sr.stderr)
	if err != nil {
		if ctx.Err() != nil {
			t.err = errInterrupted
			return nil, ctx.Err()
		}
		t.err = err
		return t, nil
	}
	defer sess.close()
	use := newUsageLog(ctx, sr.o)
	defer func() {
		use.close()
		if err := use.metricsErr(); err != nil {
			sr.metricsErr = err
			sr.prog.println("inferd perf: warning: " + metricsNote(err))
		}
	}()
	use.mark()
	var sinceBest int
	steps := len(sr.so.concurrency)
	if len(sr.so.rates) > 0 {
		steps = len(sr.so.rates)
	}
	for i := range steps {
		var r result
		var err error
		if len(sr.so.rates) > 0 {
			r, err = sess.requestRate(ctx, sr.so.rates[i])
		} else {
			r, err = sess.concurrency(ctx, sr.so.concurrency[i])
		}
		use.mark()
		if err != nil {
			if ctx.Err() != nil {
				t.err = errInterrupted
				return nil, ctx.Err()
			}
			t.err = err
			break
		}
		t.points = append(t.points, pointReport{result: r, usage: use.at(len(t.points))})
		// A setting counts as progress only when it gains 5%, so that
		// noise does not keep a saturated sweep going.
		if sr.qualifies(r) && r.Throughput > t.score*1.05 {
			sinceBest = 0
		} else {
			sinceBest++
		}
		if sr.qualifies(r) && r.Throughput > t.score {
			t.score, t.scoreAt, t.scoreP99 = r.Throughput, settingValue(r), r.P99
		}
		// Stop once latency is past the budget (more concurrency or a
		// higher rate only adds to it) or throughput has not grown for two
		// settings.
		over := sr.so.latencyBudget > 0 && r.P99 > float64(sr.so.latencyBudget.Microseconds())
		if over || sinceBest >= 2 {
			break
		}
	}
	sr.prog.done()
	return t, nil
}

// qualifies tells whether a setting's result counts for the objective.
func (sr *searcher) qualifies(r result) bool {
	if r.Errors > 0 || r.Throughput <= 0 {
		return false
	}
	return sr.so.latencyBudget == 0 || r.P99 <= float64(sr.so.latencyBudget.Microseconds())
}

// evalFunc tries one configuration: searcher.evaluate, or a stand-in in
// tests of the search order.
type evalFunc func(context.Context, candidate) (*trial, error)

// brute tries every combination.
func brute(ctx context.Context, g grid, eval evalFunc) error {
	for i := range g.instances {
		for b := range g.maxBatch {
			for d := range g.delays {
				if _, err := eval(ctx, g.at(i, b, d)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// quick climbs from the smallest configuration: it tries the neighbours
// one step along each axis and moves to the best of them while that
// beats where it stands.
func quick(ctx context.Context, g grid, eval evalFunc) error {
	pos := [3]int{}
	sizes := [3]int{len(g.instances), len(g.maxBatch), len(g.delays)}
	cur, err := eval(ctx, g.at(0, 0, 0))
	if err != nil {
		return err
	}
	for {
		best, bestPos := cur, pos
		for axis := range 3 {
			for _, step := range []int{-1, 1} {
				next := pos
				next[axis] += step
				if next[axis] < 0 || next[axis] >= sizes[axis] {
					continue
				}
				t, err := eval(ctx, g.at(next[0], next[1], next[2]))
				if err != nil {
					return err
				}
				if t.score > best.score {
					best, bestPos = t, next
				}
			}
		}
		if best == cur {
			return nil
		}
		cur, pos = best, bestPos
	}
}

// winner is the trial with the most qualifying throughput; on a tie the
// one tried first (the smaller configuration). A trial whose sweep failed
// part way (say, every request failed at a high concurrency) still counts
// with the settings it measured.
func (sr *searcher) winner() *trial {
	var w *trial
	for _, t := range sr.trials {
		if t.score > 0 && (w == nil || t.score > w.score) {
			w = t
		}
	}
	return w
}

func searchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, so, err := parseSearchArgs(args, stderr)
	if err != nil {
		return err
	}
	return search(ctx, o, so, stdout, stderr)
}

func search(ctx context.Context, o *options, so *searchOptions, stdout, stderr io.Writer) (err error) {
	o.concurrency = so.concurrency // sorted: the session sizes its connection pool by the last
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	sr := &searcher{o: o, so: so, hc: hc, base: o.baseURL, model: o.model, stderr: stderr, prog: newProgress(stderr), tried: map[candidate]*trial{}}
	var raw json.RawMessage
	if err := getJSON(ctx, hc, newEndpoints(o.baseURL, o.model, o.version).config, &raw); err != nil {
		return fmt.Errorf("model %q config: %w", o.model, err)
	}
	if sr.orig, err = modelconfig.ParseJSON(raw); err != nil {
		return fmt.Errorf("model %q config: %w", o.model, err)
	}
	g, err := newGrid(so, sr.orig, o.batch)
	if err != nil {
		return err
	}

	// Whatever happens, the model goes back to its own configuration.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if rerr := sr.repositoryLoad(rctx, nil); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restoring the original configuration: %w", rerr))
		}
	}()

	if so.mode == "quick" {
		err = quick(ctx, g, sr.evaluate)
	} else {
		err = brute(ctx, g, sr.evaluate)
	}
	if err != nil && ctx.Err() != nil {
		err = errInterrupted
	}
	w := sr.winner()
	writeSearchTable(stdout, so, sr.trials, w)
	if w == nil && err == nil {
		err = errNoWinner
	}
	if w != nil {
		text, merr := configText(w.cfg)
		if merr == nil {
			merr = os.WriteFile(so.configOut, text, 0o644)
		}
		if merr != nil {
			err = errors.Join(err, fmt.Errorf("--config-out %s: %w", so.configOut, merr))
		} else {
			fmt.Fprintf(stdout, "\nBest: %s (%.1f infer/s at %s %s); config written to %s\n", w.candidate, w.score, sweepName(so), w.scoreAt, so.configOut)
		}
	}
	if o.reportPath != "" {
		werr := writeFile(o.reportPath, func(out io.Writer) error { return writeHTML(out, searchReport(o, so, sr.trials, w, sr.metricsErr)) })
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("--report %s: %w", o.reportPath, werr))
		}
	}
	return err
}

// fieldColon is a field name and the spaces after its colon at the start
// of a prototext line.
var fieldColon = regexp.MustCompile(`(?m)^(\s*[A-Za-z_][A-Za-z0-9_]*):\s+`)

// configText renders cfg as config.pbtxt. prototext varies its spacing
// on purpose (so that nobody compares its bytes); one space after each
// field's colon makes the file read as a hand-written one.
func configText(cfg *modelconfig.ModelConfig) ([]byte, error) {
	text, err := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return fieldColon.ReplaceAll(text, []byte("$1: ")), nil
}

func objectiveText(so *searchOptions) string {
	if so.latencyBudget > 0 {
		return fmt.Sprintf("maximum throughput with p99 latency within %g ms", float64(so.latencyBudget.Microseconds())/1000)
	}
	return "maximum throughput"
}

func searchReport(o *options, so *searchOptions, trials []*trial, w *trial, metricsErr error) *htmlReport {
	h := &htmlReport{
		Title: "inferd perf search: " + o.model, Model: o.model, URL: o.baseURL, Search: true,
		Settings:  settingsLine(o) + "; " + so.mode + " search",
		Objective: objectiveText(so), RateMode: len(so.rates) > 0,
	}
	if metricsErr != nil {
		h.Notes = append(h.Notes, metricsNote(metricsErr))
	}
	for _, t := range trials {
		r := runReport{Name: t.candidate.String(), Points: t.points, Winner: t == w, trial: t, Score: t.score}
		r.ScoreAt = t.scoreAt
		if t.err != nil {
			r.Err = t.err.Error()
		}
		h.Runs = append(h.Runs, r)
	}
	return h
}

// writeSearchTable prints one line per configuration tried.
func writeSearchTable(w io.Writer, so *searchOptions, trials []*trial, best *trial) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Instances\tmax_batch_size\tDynamic batching\tBest infer/s\tAt %s\tp99 µs\t\n", sweepName(so))
	for _, t := range trials {
		line := fmt.Sprintf("%d\t%d\t%s\t", t.instances, t.maxBatch, t.DynamicText())
		switch {
		case t.err != nil && len(t.points) == 0:
			line += "failed: " + t.err.Error() + "\t\t\t"
		case t.score == 0:
			line += "none qualifies\t\t\t"
		default:
			line += fmt.Sprintf("%.1f\t%s\t%s\t", t.score, t.scoreAt, us(t.scoreP99))
		}
		if t == best {
			line += "best"
		}
		if t.err != nil && len(t.points) > 0 {
			line += " then failed: " + t.err.Error()
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// sweepName is what the search sweeps, for its output.
func sweepName(so *searchOptions) string {
	if len(so.rates) > 0 {
		return "request rate"
	}
	return "concurrency"
}
