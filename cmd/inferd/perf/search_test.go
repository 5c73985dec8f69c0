package perf

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/repo/modelconfig"
)

// startExplicit runs inferd's core and HTTP API in explicit model control
// mode over root, with the named models loaded, and returns the host:port.
func startExplicit(t *testing.T, root string, models []string, backends ...core.Backend) string {
	t.Helper()
	c := servertest.Start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit, Startup: models, Backends: backends})
	hs := httptest.NewServer(httpapi.New(c, httpapi.Options{}))
	t.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://")
}

// loadedConfig reads the model's configuration from the server.
func loadedConfig(t *testing.T, addr, model string) *modelconfig.ModelConfig {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v2/models/" + model + "/config")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("config of %s: %d %s", model, resp.StatusCode, body)
	}
	cfg, err := modelconfig.ParseJSON(body)
	must(t, err)
	return cfg
}

func instanceCount(cfg *modelconfig.ModelConfig) int {
	n := 0
	for _, g := range cfg.GetInstanceGroup() {
		n += int(g.GetCount())
	}
	return n
}

// checkRestored asserts the model is back on its repository config: max
// batch 8, one instance, no dynamic batching.
func checkRestored(t *testing.T, addr, model string) {
	t.Helper()
	cfg := loadedConfig(t, addr, model)
	if cfg.GetMaxBatchSize() != 8 || instanceCount(cfg) != 1 || cfg.GetDynamicBatching() != nil {
		t.Errorf("after the search %s has max_batch_size %d, %d instances, dynamic batching %v; want its own 8, 1, none",
			model, cfg.GetMaxBatchSize(), instanceCount(cfg), cfg.GetDynamicBatching())
	}
}

// configRows are the configuration rows of a search report's table.
func configRows(page string) []string {
	return regexp.MustCompile(`<tr class="config[^"]*"><td>([^<]*)</td>`).FindAllString(page, -1)
}

// TestSearchONNX drives a brute search of four configurations of an ONNX
// model: each is loaded and measured, the best is written as a
// config.pbtxt that parses, the report lists all four, and the model ends
// on its own configuration.
func TestSearchONNX(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	addr := startExplicit(t, root, []string{"simple"})
	checkRestored(t, addr, "simple") // the repository config is what the test expects
	dir := t.TempDir()
	out, report := filepath.Join(dir, "best.pbtxt"), filepath.Join(dir, "search.html")
	code, stdout, stderr := runPerf(t, append([]string{"search", "-m", "simple", "-u", addr,
		"--instance-counts", "1,2", "--max-batch-sizes=4,8", "--dynamic-batching-delays", "off",
		"--concurrency", "1,2", "--config-out", out, "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stderr, "inferd perf search: configuration "); n != 4 {
		t.Errorf("%d configurations tried, want 4:\n%s", n, stderr)
	}
	raw, err := os.ReadFile(out)
	must(t, err)
	best, err := modelconfig.Parse(raw)
	must(t, err)
	if b := best.GetMaxBatchSize(); b != 4 && b != 8 || instanceCount(best) < 1 || instanceCount(best) > 2 || best.GetDynamicBatching() != nil {
		t.Errorf("best config is none of those tried:\n%s", raw)
	}
	if strings.Contains(string(raw), ":  ") {
		t.Errorf("best config keeps prototext's random spacing:\n%s", raw)
	}
	if best.GetName() != "simple" || len(best.GetInput()) != 2 {
		t.Errorf("best config lost the model's name or inputs:\n%s", raw)
	}
	if !strings.Contains(stdout, "Best: ") || !strings.Contains(stdout, out) {
		t.Errorf("stdout names no best configuration:\n%s", stdout)
	}
	checkRestored(t, addr, "simple")

	page, err := os.ReadFile(report)
	must(t, err)
	rows := configRows(string(page))
	if len(rows) != 4 {
		t.Errorf("report lists %d configurations, want 4: %q", len(rows), rows)
	}
	if strings.Count(string(page), `class="config winner"`) != 1 {
		t.Error("report marks no single winner")
	}
	charts := chartPoints(t, string(page))
	if got := charts["latency-throughput"]; got[0] != 8 || got[1] != 8 {
		t.Errorf("latency-throughput chart: %v points, want 8 (4 configurations x 2 settings)", got)
	}
}

// TestSearchRequestRate: with --request-rate-range each configuration is
// measured at open-loop rates, and the best is named by the rate.
func TestSearchRequestRate(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	addr := startExplicit(t, root, []string{"simple"})
	dir := t.TempDir()
	out, report := filepath.Join(dir, "best.pbtxt"), filepath.Join(dir, "search.html")
	code, stdout, stderr := runPerf(t, append([]string{"search", "-m", "simple", "-u", addr,
		"--instance-counts", "1", "--max-batch-sizes=4,8", "--dynamic-batching-delays", "off",
		"--request-rate-range", "50:100:50", "--config-out", out, "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`Best: .* infer/s at request rate (50|100)\)`).MatchString(stdout) || !strings.Contains(stdout, "At request rate") {
		t.Errorf("stdout names no best request rate:\n%s", stdout)
	}
	page, err := os.ReadFile(report)
	must(t, err)
	if !strings.Contains(string(page), "At request rate") || len(configRows(string(page))) != 2 {
		t.Errorf("report: %d configurations, rate column %v", len(configRows(string(page))), strings.Contains(string(page), "At request rate"))
	}
	checkRestored(t, addr, "simple")
}

// TestSearchNoWinner: a latency budget no configuration meets fails the
// search, writes no config, and still restores the model.
func TestSearchNoWinner(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	addr := startExplicit(t, root, []string{"simple"})
	out := filepath.Join(t.TempDir(), "best.pbtxt")
	code, stdout, stderr := runPerf(t, append([]string{"search", "-m", "simple", "-u", addr,
		"--instance-counts", "1", "--max-batch-sizes", "4", "--dynamic-batching-delays", "0",
		"--concurrency", "1", "--latency-budget", "0.000001", "--config-out", out}, fast...)...)
	if code != 1 || !strings.Contains(stderr, errNoWinner.Error()) {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, errNoWinner)
	}
	if !strings.Contains(stdout, "none qualifies") {
		t.Errorf("table does not say the configuration missed the budget:\n%s", stdout)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a config was written without a winner: %v", err)
	}
	checkRestored(t, addr, "simple")
}

// startSleepy serves testdata/search/sleepy, a model.py taking 40 ms per
// execution however many requests it holds.
func startSleepy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.CopyFS(filepath.Join(root, "sleepy"), os.DirFS("testdata/search/sleepy")))
	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	return startExplicit(t, root, []string{"sleepy"}, py)
}

// sleepyFlags measure in windows long enough to hold a few 40 ms
// executions.
var sleepyFlags = []string{"-p", "300", "-s", "1000", "--max-trials", "3"}

// TestSearchPicksDynamicBatching: with eight requests in flight, batching
// them into one 40 ms execution (dynamic batching with a 5 ms delay) gives
// several times the throughput of one request per execution, and more than
// a second instance does, so both modes must pick dynamic batching.
func TestSearchPicksDynamicBatching(t *testing.T) {
	addr := startSleepy(t)
	for _, c := range []struct {
		mode, instances string
		tried           []int // how many configurations may be tried
	}{
		{"brute", "1", []int{2}},
		{"quick", "1,2", []int{3, 4}}, // the start, its two neighbours, and maybe (2, batching)
	} {
		t.Run(c.mode, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "best.pbtxt")
			code, stdout, stderr := runPerf(t, append([]string{"search", "-m", "sleepy", "-u", addr,
				"--run-config-search-mode", c.mode, "--instance-counts", c.instances, "--max-batch-sizes", "8",
				"--dynamic-batching-delays", "off,5000", "--concurrency", "8", "--config-out", out}, sleepyFlags...)...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			raw, err := os.ReadFile(out)
			must(t, err)
			best, err := modelconfig.Parse(raw)
			must(t, err)
			if db := best.GetDynamicBatching(); db == nil || db.GetMaxQueueDelayMicroseconds() != 5000 {
				t.Errorf("best config does not batch dynamically:\n%s\nsearch:\n%s", raw, stdout)
			}
			if n := strings.Count(stderr, "inferd perf search: configuration "); !slices.Contains(c.tried, n) {
				t.Errorf("%d configurations tried, want one of %v:\n%s", n, c.tried, stderr)
			}
			cfg := loadedConfig(t, addr, "sleepy")
			if instanceCount(cfg) != 1 || cfg.GetDynamicBatching() != nil {
				t.Errorf("sleepy not restored: %d instances, dynamic batching %v", instanceCount(cfg), cfg.GetDynamicBatching())
			}
		})
	}
}

// TestSearchOrder checks which configurations each mode tries, with a
// stand-in for measuring whose score peaks at (3 instances, max batch 4,
// delay 100): brute tries the whole grid; quick climbs from the smallest
// corner, one axis step at a time, reaches the peak and stops there,
// having tried fewer.
func TestSearchOrder(t *testing.T) {
	g := grid{instances: []int{1, 2, 3, 4}, maxBatch: []int{1, 2, 4, 8}, delays: []int{-1, 0, 100}}
	peak := candidate{instances: 3, maxBatch: 4, delay: 100}
	index := func(list []int, v int) int { return slices.Index(list, v) }
	score := func(c candidate) float64 {
		d := abs(index(g.instances, c.instances)-index(g.instances, peak.instances)) +
			abs(index(g.maxBatch, c.maxBatch)-index(g.maxBatch, peak.maxBatch)) + abs(index(g.delays, c.delay)-index(g.delays, peak.delay))
		return float64(100 - 10*d)
	}
	for _, mode := range []string{"brute", "quick"} {
		tried := map[candidate]*trial{}
		var order []candidate
		eval := func(_ context.Context, c candidate) (*trial, error) {
			if t, ok := tried[c]; ok {
				return t, nil
			}
			tr := &trial{candidate: c, score: score(c)}
			tried[c] = tr
			order = append(order, c)
			return tr, nil
		}
		var err error
		if mode == "brute" {
			err = brute(context.Background(), g, eval)
		} else {
			err = quick(context.Background(), g, eval)
		}
		must(t, err)
		sr := &searcher{}
		for _, c := range order {
			sr.trials = append(sr.trials, tried[c])
		}
		if w := sr.winner(); w == nil || w.candidate != peak {
			t.Errorf("%s: winner %v, want %v", mode, w, peak)
		}
		switch {
		case mode == "brute" && len(order) != 48:
			t.Errorf("brute tried %d configurations, want all 48", len(order))
		case mode == "quick" && (len(order) >= 48 || order[0] != (candidate{1, 1, -1})):
			t.Errorf("quick tried %d configurations starting at %v; want fewer than 48 from the smallest", len(order), order[0])
		}
	}
}

func abs(v int) int { return max(v, -v) }

func TestSplitSearchArgs(t *testing.T) {
	own, rest, err := splitSearchArgs([]string{"-m", "x", "--instance-counts", "1,2", "-p", "100", "--config-out=a.pbtxt", "-concurrency", "4", "--report", "r.html"})
	must(t, err)
	if want := []string{"--instance-counts", "1,2", "--config-out=a.pbtxt", "-concurrency", "4"}; !slices.Equal(own, want) {
		t.Errorf("own = %q, want %q", own, want)
	}
	if want := []string{"-m", "x", "-p", "100", "--report", "r.html"}; !slices.Equal(rest, want) {
		t.Errorf("rest = %q, want %q", rest, want)
	}
	if _, _, err := splitSearchArgs([]string{"-m", "x", "--latency-budget"}); err == nil {
		t.Error("a search flag without its value was accepted")
	}
}

func TestParseSearchArgs(t *testing.T) {
	o, so, err := parseSearchArgs([]string{"-m", "x", "--dynamic-batching-delays", "100,off,0,100", "--latency-budget", "2.5"}, io.Discard)
	must(t, err)
	if o.model != "x" || so.mode != "brute" || !slices.Equal(so.delays, []int{-1, 0, 100}) || so.latencyBudget.Microseconds() != 2500 ||
		!slices.Equal(so.instances, []int{1, 2, 3, 4, 5}) || !slices.Equal(so.concurrency, []int{1, 2, 4, 8, 16, 32}) || so.configOut != "x.best.pbtxt" {
		t.Errorf("parsed %+v", so)
	}
	if _, so, err := parseSearchArgs([]string{"-m", "x", "--concurrency-range", "2:6:2"}, io.Discard); err != nil || !slices.Equal(so.concurrency, []int{2, 4, 6}) {
		t.Errorf("--concurrency-range: %v, %v", so, err)
	}
	if _, so, err := parseSearchArgs([]string{"-m", "x", "--request-rate-range", "100:300:100"}, io.Discard); err != nil ||
		!slices.Equal(so.rates, []float64{100, 200, 300}) || so.concurrency != nil {
		t.Errorf("--request-rate-range: %+v, %v", so, err)
	}
	if _, _, err := parseSearchArgs([]string{"-m", "x", "--request-rate-range", "100", "--concurrency", "4"}, io.Discard); err == nil {
		t.Error("both a rate range and a concurrency list were accepted")
	}
	if o, _, err := parseSearchArgs([]string{"-m", "x", "--collect-metrics", "--metrics-url", "srv:9/metrics", "--metrics-interval", "250"}, io.Discard); err != nil ||
		!o.collectMetrics || o.metricsURL != "http://srv:9/metrics" || o.metricsInterval.Milliseconds() != 250 {
		t.Errorf("metrics flags: %+v, %v", o, err)
	}
	if _, _, err := parseSearchArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h gave %v", err)
	}
	for _, args := range [][]string{
		{"-m", "x", "--run-config-search-mode", "optuna"},
		{"-m", "x", "-i", "grpc"},
		{"-m", "x", "--request-rate-range", "10", "--concurrency", "4"},
		{"-m", "x", "-f", "out.csv"},
		{"-m", "x", "--instance-counts", "0"},
		{"-m", "x", "--max-batch-sizes", "4,x"},
		{"-m", "x", "--dynamic-batching-delays", "-5"},
		{"-m", "x", "--latency-budget", "-1"},
		{"-m", "x", "--no-such-flag", "1"},
		{"--instance-counts", "1"},
		{"-m", "x", "--metrics-interval", "0"},
		{"-m", "x", "--metrics-url", "ftp://host/metrics"},
	} {
		_, _, err := parseSearchArgs(args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

func TestCandidateApply(t *testing.T) {
	orig := &modelconfig.ModelConfig{Name: "m", MaxBatchSize: 8, InstanceGroup: []*modelconfig.ModelInstanceGroup{
		{Name: "m_0", Kind: modelconfig.ModelInstanceGroup_KIND_GPU, Count: 1, Gpus: []int32{0}, Passive: true}, {Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Count: 2}}}
	cfg, used := candidate{instances: 3, maxBatch: 4, delay: 100}.apply(orig, []int{2, 4, 8})
	if g := cfg.GetInstanceGroup(); len(g) != 1 || g[0].GetCount() != 3 || g[0].GetKind() != modelconfig.ModelInstanceGroup_KIND_GPU || !slices.Equal(g[0].GetGpus(), []int32{0}) ||
		!g[0].GetPassive() || g[0].GetName() != "" {
		t.Errorf("instance groups %v", g)
	}
	db := cfg.GetDynamicBatching()
	if cfg.GetMaxBatchSize() != 4 || db == nil || db.GetMaxQueueDelayMicroseconds() != 100 || !slices.Equal(db.GetPreferredBatchSize(), []int32{2, 4}) || !slices.Equal(used, []int{2, 4}) {
		t.Errorf("max batch %d, dynamic batching %v, used %v", cfg.GetMaxBatchSize(), db, used)
	}
	if orig.GetMaxBatchSize() != 8 || len(orig.GetInstanceGroup()) != 2 || orig.GetInstanceGroup()[0].GetName() != "m_0" || orig.GetInstanceGroup()[0].GetCount() != 1 {
		t.Error("apply changed the original")
	}
	off, _ := candidate{instances: 1, maxBatch: 8, delay: -1}.apply(cfg, nil)
	if off.GetDynamicBatching() != nil {
		t.Error("delay off kept dynamic batching")
	}
}

func TestNewGrid(t *testing.T) {
	so := &searchOptions{instances: []int{1, 2}, maxBatch: []int{1, 2, 4}, delays: []int{-1, 0}}
	g, err := newGrid(so, &modelconfig.ModelConfig{Name: "m", MaxBatchSize: 8}, 2)
	must(t, err)
	if !slices.Equal(g.maxBatch, []int{2, 4}) {
		t.Errorf("sizes below -b kept: %v", g.maxBatch)
	}
	g, err = newGrid(so, &modelconfig.ModelConfig{Name: "m"}, 1)
	must(t, err)
	if !slices.Equal(g.maxBatch, []int{0}) || !slices.Equal(g.delays, []int{-1}) {
		t.Errorf("non-batching model: sizes %v, delays %v", g.maxBatch, g.delays)
	}
	so.setBatch = true
	if _, err := newGrid(so, &modelconfig.ModelConfig{Name: "m"}, 1); err == nil {
		t.Error("--max-batch-sizes accepted for a non-batching model")
	}
	seq := &modelconfig.ModelConfig{Name: "m", MaxBatchSize: 8, SchedulingChoice: &modelconfig.ModelConfig_SequenceBatching{SequenceBatching: &modelconfig.ModelSequenceBatching{}}}
	if _, err := newGrid(so, seq, 1); err == nil {
		t.Error("a sequence model was accepted")
	}
}

func TestParseCPULine(t *testing.T) {
	for _, c := range []struct {
		line       string
		busy, tot  uint64
		wantErrNil bool
	}{
		{"cpu  10 1 5 80 4 0 0 0 7 0\n", 16, 100, true},
		{"cpu 1 2 3", 0, 0, false},
		{"cpu0 1 2 3 4 5", 0, 0, false},
		{"cpu 1 x 3 4 5", 0, 0, false},
	} {
		got, err := parseCPULine(c.line)
		if (err == nil) != c.wantErrNil || got.busy != c.busy || got.total != c.tot {
			t.Errorf("%q: %+v, %v", c.line, got, err)
		}
	}
	if u := utilization(cpuTimes{10, 100}, cpuTimes{40, 200}); u != 30 {
		t.Errorf("utilization = %v, want 30", u)
	}
	if u := utilization(cpuTimes{10, 100}, cpuTimes{10, 100}); !bad(u) {
		t.Errorf("utilization over no time = %v, want NaN", u)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi, minStep float64
		want            []float64
	}{
		{0, 10, 0, []float64{0, 2, 4, 6, 8, 10}},
		{0, 9500, 0, []float64{0, 2000, 4000, 6000, 8000, 10000}},
		{0, 0, 0, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 2, 0, []float64{0, 0.5, 1, 1.5, 2}},
		{0, 2, 1, []float64{0, 1, 2}},
	} {
		if got := niceTicks(c.lo, c.hi, 5, c.minStep); !slices.Equal(got, c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// cancelOn is a writer that cancels a context once what was written holds
// needle.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	needle string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.needle) {
		c.cancel()
	}
	return len(p), nil
}

// TestSearchInterruptedRestores: a search cut short (Ctrl-C) as it moves
// to its second configuration, two instances, still reloads the model's
// own, one instance, and keeps the best of what it measured.
func TestSearchInterruptedRestores(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	addr := startExplicit(t, root, []string{"simple"})
	out := filepath.Join(t.TempDir(), "best.pbtxt")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stderr := &cancelOn{needle: "configuration 2: ", cancel: cancel}
	var stdout bytes.Buffer
	code := Main(ctx, append([]string{"search", "-m", "simple", "-u", addr, "--instance-counts", "1,2,3", "--max-batch-sizes", "8",
		"--dynamic-batching-delays", "off", "--concurrency", "1", "--config-out", out}, fast...), &stdout, stderr)
	stderr.mu.Lock()
	errText := stderr.buf.String()
	stderr.mu.Unlock()
	if code != 1 || !strings.Contains(errText, "interrupted") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and interrupted", code, errText)
	}
	if !strings.Contains(stdout.String(), "failed: interrupted") {
		t.Errorf("the table does not mark the configuration cut short:\n%s", stdout.String())
	}
	if strings.Contains(errText, "configuration 3: ") {
		t.Errorf("the search went on after the interruption:\n%s", errText)
	}
	// What was measured is kept: the best so far is the first configuration.
	raw, err := os.ReadFile(out)
	must(t, err)
	best, err := modelconfig.Parse(raw)
	must(t, err)
	if instanceCount(best) != 1 || !strings.Contains(stdout.String(), "Best: 1 instance, max batch 8") {
		t.Errorf("best so far:\n%s\nstdout:\n%s", raw, stdout.String())
	}
	checkRestored(t, addr, "simple")
}
