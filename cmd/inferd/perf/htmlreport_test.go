package perf

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core/autopilot"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
)

// chartPoints maps each chart figure of a report to its SVG's
// data-points count and the markers actually drawn (circles or rects of
// class "pt").
func chartPoints(t *testing.T, page string) map[string][2]int {
	t.Helper()
	figRE := regexp.MustCompile(`(?s)<figure id="([^"]+)" class="chart[^"]*">(.*?)</figure>`)
	countRE := regexp.MustCompile(`data-points="(\d+)"`)
	out := map[string][2]int{}
	for _, m := range figRE.FindAllStringSubmatch(page, -1) {
		declared := -1
		if c := countRE.FindStringSubmatch(m[2]); c != nil {
			declared, _ = strconv.Atoi(c[1])
		}
		out[m[1]] = [2]int{declared, strings.Count(m[2], `class="pt"`)}
	}
	return out
}

func TestSweepReport(t *testing.T) {
	addr, _, _ := startInferd(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	code, stdout, stderr := runPerf(t, append([]string{"-m", "simple", "-u", addr, "--concurrency-range", "1:3", "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(report)
	must(t, err)
	page := string(raw)
	// Nothing is fetched: no scripts, style sheets, images or fonts from
	// anywhere.
	for _, banned := range []string{"<script", "<link", "<img", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("report holds %q: it must be self-contained", banned)
		}
	}
	charts := chartPoints(t, page)
	want := map[string]int{"latency-throughput": 3, "percentiles": 9, "batch": 3, "cpu": 3}
	for id, n := range want {
		got, ok := charts[id]
		if !ok {
			t.Errorf("no chart %q; charts: %v", id, charts)
			continue
		}
		if got[0] != n || got[1] != n {
			t.Errorf("chart %q: %d points declared, %d drawn; want %d", id, got[0], got[1], n)
		}
	}
	if got := charts["server-split"]; got[0] < 3 || got[0] != got[1] {
		t.Errorf("server-split chart: %d segments declared, %d drawn; want at least one per setting", got[0], got[1])
	}
	if !strings.Contains(page, "@media print") {
		t.Error("no print styles")
	}
	if n := strings.Count(page, "<tr><td>"); n != 3 {
		t.Errorf("measurement table has %d rows, want 3", n)
	}
}

// TestReportEdgeCases renders a search report by hand: a configuration
// that failed to load shows its error, figures without data say why
// instead of drawing an empty chart, and names are escaped.
func TestReportEdgeCases(t *testing.T) {
	nan := math.NaN()
	ok := &trial{candidate: candidate{instances: 1, maxBatch: 8, delay: 100}, preferred: []int{4, 8}, score: 50, scoreAt: "2",
		points: []pointReport{
			{result: result{Concurrency: 1, Throughput: 30, P50: 900, P95: 1000, P99: 1100, Stable: true}, usage: usage{nan, nan, nan}},
			{result: result{Concurrency: 2, Throughput: 50, P50: 1900, P95: 2000, P99: 2100}, usage: usage{nan, nan, nan}},
		}}
	failed := &trial{candidate: candidate{instances: 2, maxBatch: 8, delay: -1}, err: errors.New(`load m: HTTP 400: <bad> config`)}
	// A sweep that measured one setting and then failed still counts with it.
	partial := &trial{candidate: candidate{instances: 3, maxBatch: 8, delay: -1}, err: errors.New("concurrency 2: every request failed"), score: 20, scoreAt: "1",
		points: []pointReport{{result: result{Concurrency: 1, Throughput: 20, P99: 3000, Stable: true}, usage: usage{nan, nan, nan}}}}
	o := &options{model: `m<x>`, baseURL: "http://localhost:8000", protocol: "http", binary: true, batch: 1, inputData: "random", interval: time.Second, stability: 0.1, maxTrials: 10}
	var b strings.Builder
	must(t, writeHTML(&b, searchReport(o, &searchOptions{mode: "quick", latencyBudget: 5 * time.Millisecond}, []*trial{ok, failed, partial}, ok, errors.New("metrics <down>"))))
	page := b.String()
	for _, want := range []string{
		"load m: HTTP 400: &lt;bad&gt; config", // the failure, escaped
		"inferd perf search: m&lt;x&gt;",
		"The server gave no statistics.",                  // batch fill and the queue/compute split
		"No CPU figures",                                  // CPU unknown
		"100 µs delay, preferred 4,8",                     // the configuration's dynamic batching
		"maximum throughput with p99 latency within 5 ms", // the objective
		"<tr><td>1</td>", "<tr><td>2 (not stable)</td>",   // the second setting's windows did not agree
		"reading the server&#39;s metrics failed, last: metrics &lt;down&gt;",
		`<tr class="config winner"><td>1 instance, max batch 8, dynamic batching 100 µs (best)</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "m<x>") {
		t.Error("model name not escaped")
	}
	charts := chartPoints(t, page)
	if got := charts["latency-throughput"]; got != [2]int{3, 3} {
		t.Errorf("latency-throughput: %v, want 3 points (the failed configuration has none)", got)
	}
	if got := charts["percentiles"]; got != [2]int{6, 6} {
		t.Errorf("percentiles: %v, want 6", got)
	}
	for _, id := range []string{"batch", "cpu", "server-split"} {
		if got := charts[id]; got[0] != -1 {
			t.Errorf("chart %s drawn without data: %v", id, got)
		}
	}
	for _, id := range []string{"server-cpu", "gpu"} {
		if _, ok := charts[id]; ok {
			t.Errorf("chart %s shown without --collect-metrics figures", id)
		}
	}

	// With server and GPU figures (as --collect-metrics reads them from a
	// GPU server), both get a chart and a column.
	ok.points[0].usage = usage{client: 40, server: 55, gpu: 70}
	ok.points[1].usage = usage{client: 45, server: 60, gpu: 90}
	b.Reset()
	must(t, writeHTML(&b, searchReport(o, &searchOptions{mode: "brute"}, []*trial{ok}, ok, nil)))
	charts = chartPoints(t, b.String())
	for _, id := range []string{"cpu", "server-cpu", "gpu"} {
		if got := charts[id]; got != [2]int{2, 2} {
			t.Errorf("chart %s: %v, want 2 points", id, got)
		}
	}
	if !strings.Contains(b.String(), "<th>Server CPU</th><th>GPU</th>") || !strings.Contains(b.String(), "<td>55%</td><td>70%</td>") {
		t.Error("the table has no server CPU and GPU columns")
	}
}

func TestParseUtilization(t *testing.T) {
	body := []byte(`# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.25
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5
nv_gpu_utilization{gpu_uuid="GPU 2, spaced"} 1
nv_gpu_utilization_other 0.9
nv_inference_count{model="simple",version="1"} 12
`)
	cpu, gpu := parseUtilization(body)
	if cpu != 25 || gpu != 75 {
		t.Errorf("cpu %v, gpu %v; want 25 and 75", cpu, gpu)
	}
	cpu, gpu = parseUtilization([]byte("nv_inference_count 3\n"))
	if !math.IsNaN(cpu) || !math.IsNaN(gpu) {
		t.Errorf("absent gauges read as %v, %v", cpu, gpu)
	}
}

// TestSweepReportServerMetrics: with --collect-metrics, the sweep reads
// inferd's own metrics endpoint and the report charts the server's CPU
// use; the CPU-only server exports no GPU figures, so there is no GPU
// chart.
func TestSweepReportServerMetrics(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	c := servertest.Start(t, servertest.Options{Repo: root})
	hs := httptest.NewServer(httpapi.New(c, httpapi.Options{}))
	t.Cleanup(hs.Close)
	cfg := metrics.DefaultConfig()
	cfg.AllowGPU, cfg.Interval = false, 40*time.Millisecond
	mh := metrics.NewHandler(c, cfg)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go mh.Run(ctx, nil)
	ms := httptest.NewServer(mh)
	t.Cleanup(ms.Close)

	report := filepath.Join(t.TempDir(), "report.html")
	code, stdout, stderr := runPerf(t, append([]string{"-m", "simple", "-u", strings.TrimPrefix(hs.URL, "http://"), "--concurrency-range", "1:2",
		"--collect-metrics", "--metrics-url", strings.TrimPrefix(ms.URL, "http://") + "/metrics", "--metrics-interval", "30", "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(report)
	must(t, err)
	charts := chartPoints(t, string(raw))
	if got := charts["server-cpu"]; got != [2]int{2, 2} {
		t.Errorf("server-cpu chart: %v, want 2 points; charts %v", got, charts)
	}
	if _, ok := charts["gpu"]; ok {
		t.Error("a GPU chart without GPU metrics")
	}
}

// TestSweepReportMetricsDown: a metrics endpoint that cannot be read
// leaves the sweep to finish, and the report says why the server's
// figures are missing.
func TestSweepReportMetricsDown(t *testing.T) {
	addr, _, _ := startInferd(t)
	ln := httptest.NewServer(http.NotFoundHandler()) // answers 404 to every scrape
	t.Cleanup(ln.Close)
	report := filepath.Join(t.TempDir(), "report.html")
	code, stdout, stderr := runPerf(t, append([]string{"-m", "simple", "-u", addr, "--collect-metrics",
		"--metrics-url", ln.URL + "/metrics", "--metrics-interval", "20", "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(report)
	must(t, err)
	if !strings.Contains(string(raw), "reading the server&#39;s metrics failed, last: metrics "+ln.URL+"/metrics: HTTP 404") {
		t.Error("report does not say the metrics could not be read")
	}
	if _, ok := chartPoints(t, string(raw))["server-cpu"]; ok {
		t.Error("server CPU chart without server figures")
	}
}

// TestSweepReportAutopilot: run against a model whose batching inferd's
// autopilot tunes, the report shows the target, a table of the decisions
// made during the run and a chart of the settings over time.
func TestSweepReportAutopilot(t *testing.T) {
	cfg := servertest.SimpleConfig("simple") + `dynamic_batching { max_queue_delay_microseconds: 30000 preferred_batch_size: [ 8 ] }
parameters { key: "slo_p99_ms" value { string_value: "20" } }
parameters { key: "slo_period_ms" value { string_value: "200" } }
`
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: cfg, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	c := servertest.Start(t, servertest.Options{Repo: root, Autopilot: autopilot.New(autopilot.Options{})})
	hs := httptest.NewServer(httpapi.New(c, httpapi.Options{}))
	t.Cleanup(hs.Close)

	report := filepath.Join(t.TempDir(), "report.html")
	// Windows of a second: the first 100 requests (the autopilot's least
	// for a p99) take most of one at 30 ms a batch of 4.
	code, stdout, stderr := runPerf(t, append(append([]string{"-m", "simple", "-u", strings.TrimPrefix(hs.URL, "http://"), "--concurrency-range", "4",
		"--report", report}, fast...), "-p", "1000")...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(report)
	must(t, err)
	page := string(raw)
	// 30 ms of delay for batches 4 clients never fill breaks the 20 ms
	// target: the autopilot takes it away during the run.
	if !strings.Contains(page, "Latency target p99 20.0 ms") || !strings.Contains(page, `<tr class="decision"><td>`) ||
		!strings.Contains(page, "30000 → 0") {
		t.Errorf("report lacks the autopilot's target or decisions:\n%s", page)
	}
	if got := chartPoints(t, page)["autopilot"]; got[0] < 2 {
		t.Errorf("autopilot chart: %v points", got)
	}
}
