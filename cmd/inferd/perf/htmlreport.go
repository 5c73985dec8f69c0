package perf

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"
)

// runReport is one configuration's measurements for the HTML report: the
// model as it was loaded (a plain sweep), or one configuration a search
// tried.
type runReport struct {
	Name    string
	Points  []pointReport
	Err     string  // the configuration failed to load or to run
	Score   float64 // best qualifying throughput (search only)
	ScoreAt string  // the setting that gave it
	Winner  bool
	trial   *trial // search only: its configuration, for the table
}

// pointReport is one setting's result and what it cost in CPU and GPU.
type pointReport struct {
	result
	usage
}

// CPU is the client machine's CPU use, for the tables.
func (p pointReport) CPU() float64 { return p.client }

// htmlReport is everything the HTML page shows.
type htmlReport struct {
	Title     string
	Model     string
	URL       string
	Settings  string // protocol, batch size, windows
	Objective string // search only
	Generated string
	RateMode  bool
	Runs      []runReport
	Search    bool
	Notes     []string // what could not be measured, and why
	// Autopilot is the model's latency-target tuning, when inferd's
	// autopilot watches it (nil otherwise).
	Autopilot *autopilotView
}

// focus is the run the single-configuration charts show: the winner, or
// the only run.
func (h *htmlReport) focus() *runReport {
	for i := range h.Runs {
		if h.Runs[i].Winner {
			return &h.Runs[i]
		}
	}
	for i := range h.Runs {
		if len(h.Runs[i].Points) > 0 {
			return &h.Runs[i]
		}
	}
	return nil
}

func (h *htmlReport) settingLabel() string {
	if h.RateMode {
		return "Request rate (infer/s sent)"
	}
	return "Concurrency"
}

func (h *htmlReport) settingOf(r result) float64 {
	if h.RateMode {
		return r.RequestRate
	}
	return float64(r.Concurrency)
}

// chartView is one figure: a drawn chart, or a note saying why not.
type chartView struct {
	ID, Title, Caption string
	SVG                template.HTML
	Legend             []legendEntry
	Missing            string
}

type legendEntry struct{ Name, Colour string }

func legend(ss []series) []legendEntry {
	out := make([]legendEntry, len(ss))
	for i, s := range ss {
		out[i] = legendEntry{s.Name, colour(i)}
	}
	return out
}

func newChart(id, title, caption, missing string, svg string, ok bool, ss []series) chartView {
	c := chartView{ID: id, Title: title, Caption: caption, Legend: legend(ss)}
	if ok {
		c.SVG = template.HTML(svg) // built by svgchart.go, which escapes every text it writes
	} else {
		c.Missing = missing
		c.Legend = nil
	}
	return c
}

// charts builds the report's figures from its runs.
func (h *htmlReport) charts() []chartView {
	var out []chartView
	// perRun is one curve per configuration, a point per setting.
	perRun := func(x, y func(pointReport) float64) []series {
		var ss []series
		for _, r := range h.Runs {
			if len(r.Points) == 0 {
				continue
			}
			s := series{Name: r.Name}
			for _, p := range r.Points {
				s.X = append(s.X, x(p))
				s.Y = append(s.Y, y(p))
			}
			ss = append(ss, s)
		}
		return ss
	}
	setting := func(p pointReport) float64 { return h.settingOf(p.result) }
	ms := func(us float64) float64 { return us / 1000 }

	// Latency against throughput, as Model Analyzer draws it.
	lt := perRun(func(p pointReport) float64 { return p.Throughput }, func(p pointReport) float64 { return ms(p.P99) })
	svg, ok := lineSVG("chart-latency-throughput", "Throughput (infer/s)", "p99 latency (ms)", lt)
	out = append(out, newChart("latency-throughput", "p99 latency against throughput",
		"Each point is one "+lowerFirst(h.settingLabel())+" setting; up and to the left is worse.", "No measurements.", svg, ok, lt))

	if f := h.focus(); f != nil {
		var pct []series
		for _, q := range []struct {
			name string
			get  func(result) float64
		}{{"p50", func(r result) float64 { return r.P50 }}, {"p95", func(r result) float64 { return r.P95 }}, {"p99", func(r result) float64 { return r.P99 }}} {
			s := series{Name: q.name}
			for _, p := range f.Points {
				s.X = append(s.X, h.settingOf(p.result))
				s.Y = append(s.Y, ms(q.get(p.result)))
			}
			pct = append(pct, s)
		}
		svg, ok := lineSVG("chart-percentiles", h.settingLabel(), "Latency (ms)", pct)
		out = append(out, newChart("percentiles", "Latency percentiles: "+f.Name, "Client-side latency of successful requests.", "No measurements.", svg, ok, pct))

		var cats []string
		parts := []series{{Name: "Queue"}, {Name: "Compute input"}, {Name: "Compute infer"}, {Name: "Compute output"}}
		for _, p := range f.Points {
			cats = append(cats, fmtTick(h.settingOf(p.result)))
			s := p.Server
			if s == nil {
				s = &serverSplit{QueueUS: math.NaN(), ComputeInput: math.NaN(), ComputeInfer: math.NaN(), ComputeOutput: math.NaN()}
			}
			parts[0].Y = append(parts[0].Y, ms(s.QueueUS))
			parts[1].Y = append(parts[1].Y, ms(s.ComputeInput))
			parts[2].Y = append(parts[2].Y, ms(s.ComputeInfer))
			parts[3].Y = append(parts[3].Y, ms(s.ComputeOutput))
		}
		svg, ok = stackSVG("chart-server-split", h.settingLabel(), "Server time per request (ms)", cats, parts)
		out = append(out, newChart("server-split", "Queue and compute time: "+f.Name, "Server statistics between the first and last window of each setting.",
			"The server gave no statistics.", svg, ok, parts))
	}

	batch := perRun(setting, func(p pointReport) float64 {
		if p.Server == nil || p.Server.AvgBatchSize == 0 {
			return math.NaN()
		}
		return p.Server.AvgBatchSize
	})
	svg, ok = lineSVG("chart-batch", h.settingLabel(), "Average server batch size", batch)
	out = append(out, newChart("batch", "Batch fill", "Inferences per model execution, from the server's statistics.", "The server gave no statistics.", svg, ok, batch))

	cpu := perRun(setting, func(p pointReport) float64 { return p.client })
	svg, ok = lineSVG("chart-cpu", h.settingLabel(), "Client machine CPU busy (%)", cpu)
	out = append(out, newChart("cpu", "CPU utilisation", "All cores of the machine running inferd perf (/proc/stat), over each setting's windows; the server's too when it runs there.",
		"No CPU figures: /proc/stat is not readable here.", svg, ok, cpu))

	// The server's own figures exist only with --collect-metrics, and GPU
	// figures only on a server with GPUs: without them there is no figure.
	server := perRun(setting, func(p pointReport) float64 { return p.server })
	if svg, ok := lineSVG("chart-server-cpu", h.settingLabel(), "Server CPU busy (%)", server); ok {
		out = append(out, newChart("server-cpu", "Server CPU utilisation", "nv_cpu_utilization from the server's metrics, averaged over each setting.", "", svg, ok, server))
	}
	gpu := perRun(setting, func(p pointReport) float64 { return p.gpu })
	if svg, ok := lineSVG("chart-gpu", h.settingLabel(), "GPU busy (%)", gpu); ok {
		out = append(out, newChart("gpu", "GPU utilisation", "nv_gpu_utilization from the server's metrics, the mean over its GPUs, averaged over each setting.", "", svg, ok, gpu))
	}
	if h.Autopilot != nil {
		out = append(out, h.Autopilot.chart())
	}
	return out
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"us": func(v float64) string { return us(v) },
	"f1": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"pct": func(v float64) string {
		if bad(v) {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 0, 64) + "%"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.R.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1000px; padding: 0 16px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
.meta { color: #555; margin: 0.2em 0; }
.warn { color: #a00; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid #ddd; border-radius: 6px; padding: 8px 10px; break-inside: avoid; }
figcaption { font-weight: 600; margin-bottom: 4px; }
figure svg { width: 100%; height: auto; display: block; }
.note { color: #555; font-size: 0.85em; margin: 4px 0 0; }
.legend { list-style: none; padding: 0; margin: 4px 0 0; font-size: 0.85em; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.legend span { display: inline-block; width: 12px; height: 12px; margin-right: 5px; vertical-align: -1px; border-radius: 2px; }
.missing { color: #777; font-style: italic; padding: 2em 0; text-align: center; }
table { border-collapse: collapse; width: 100%; margin-top: 12px; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.winner td { background: #e6f2ea; font-weight: 600; }
td.err { color: #a00; text-align: left; }
td.why { text-align: left; font-size: 0.85em; }
@media print {
  body { max-width: none; margin: 0; font-size: 10pt; }
  .charts { display: block; }
  figure { margin-bottom: 10px; border: none; }
  figure svg { max-height: 9cm; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
</style>
</head>
<body>
<h1>{{.R.Title}}</h1>
<p class="meta">Model <b>{{.R.Model}}</b> at {{.R.URL}}, measured {{.R.Generated}}</p>
<p class="meta">{{.R.Settings}}</p>
{{with .R.Objective}}<p class="meta">Objective: {{.}}</p>{{end}}
{{range .R.Notes}}<p class="meta warn">{{.}}</p>{{end}}
<div class="charts">
{{range .Charts}}<figure id="{{.ID}}" class="chart{{if .Missing}} empty{{end}}">
<figcaption>{{.Title}}</figcaption>
{{if .Missing}}<p class="missing">{{.Missing}}</p>{{else}}{{.SVG}}
<ul class="legend">{{range .Legend}}<li><span style="background:{{.Colour}}"></span>{{.Name}}</li>{{end}}</ul>{{end}}
<p class="note">{{.Caption}}</p>
</figure>
{{end}}</div>
<h2>{{if .R.Search}}Configurations{{else}}Measurements{{end}}</h2>
{{if .R.Search}}<table id="configs">
<thead><tr><th>Configuration</th><th>Instances</th><th>max_batch_size</th><th>Dynamic batching</th><th>Best infer/s</th><th>At {{if .R.RateMode}}request rate{{else}}concurrency{{end}}</th><th>p99 there (µs)</th></tr></thead>
<tbody>
{{range .R.Runs}}<tr class="config{{if .Winner}} winner{{end}}"><td>{{.Name}}{{if .Winner}} (best){{end}}</td>{{with .Trial}}<td>{{.Instances}}</td><td>{{.MaxBatch}}</td><td>{{.DynamicText}}</td>{{end}}
{{if not .Points}}<td class="err" colspan="3">{{.Err}}</td>{{else if not .ScoreAt}}<td class="err" colspan="3">none qualifies{{with .Err}}; then {{.}}{{end}}</td>{{else}}<td>{{f1 .Score}}</td><td>{{.ScoreAt}}</td><td>{{.P99AtScore}}</td>{{end}}</tr>
{{if and .Points .Err .ScoreAt}}<tr class="config-err"><td class="err" colspan="7">then: {{.Err}}</td></tr>{{end}}
{{end}}</tbody>
</table>
{{end}}
{{with .R.Autopilot}}<h2>Autopilot</h2>
<p class="meta">Latency target p99 {{f1 .TargetMS}} ms; last window p99 {{f1 .MeasuredMS}} ms; capacity within the target {{f1 .Capacity}} infer/s (headroom {{printf "%.2f" .Headroom}}); in force: max_queue_delay {{.Delay}} µs, preferred batch size {{.Preferred}}, batches of at most {{.MaxBatch}}.</p>
<table id="autopilot">
<thead><tr><th>When</th><th>max_queue_delay µs</th><th>Preferred</th><th>At most</th><th>p99 ms</th><th>Rate infer/s</th><th>Capacity infer/s</th><th>Why</th></tr></thead>
<tbody>
{{range .Decisions}}<tr class="decision"><td>{{.Offset $.R.Autopilot.Start}}</td><td>{{.FromDelay}} → {{.Delay}}</td><td>{{.FromPref}} → {{.Preferred}}</td><td>{{.FromMax}} → {{.MaxBatch}}</td><td>{{f1 .MeasuredMS}}</td><td>{{f1 .Rate}}</td><td>{{f1 .Capa}}</td><td class="why">{{.Reason}}</td></tr>
{{end}}</tbody>
</table>
{{if .Instances}}<p class="meta">Instances in force: {{.Instances}}{{if .Threads}} × {{.Threads}} intra-op threads{{end}}.</p>{{end}}
{{with .InstanceChanges}}<table id="autopilot-instances">
<thead><tr><th>When</th><th>Instances</th><th>p99 ms</th><th>Rate infer/s</th><th>Capacity infer/s</th><th>Why</th></tr></thead>
<tbody>
{{range .}}<tr class="decision"><td>{{.Offset $.R.Autopilot.Start}}</td><td>{{.InstancesText}}</td><td>{{f1 .MeasuredMS}}</td><td>{{f1 .Rate}}</td><td>{{f1 .Capa}}</td><td class="why">{{.Reason}}</td></tr>
{{end}}</tbody>
</table>
{{end}}
{{end}}
{{range .R.Runs}}{{if .Points}}<h3>{{.Name}}</h3>
<table class="points">
<thead><tr><th>{{$.R.Setting}}</th><th>Infer/s</th><th>p50 µs</th><th>p95 µs</th><th>p99 µs</th><th>Avg µs</th><th>Errors</th><th>Queue µs</th><th>Compute µs</th><th>Batch</th><th>CPU</th>{{if $.Server}}<th>Server CPU</th>{{end}}{{if $.GPU}}<th>GPU</th>{{end}}</tr></thead>
<tbody>
{{range .Points}}<tr><td>{{.SettingText}}</td><td>{{f1 .Throughput}}</td><td>{{us .P50}}</td><td>{{us .P95}}</td><td>{{us .P99}}</td><td>{{us .Avg}}</td><td>{{.Errors}}</td>{{with .Server}}<td>{{us .QueueUS}}</td><td>{{us .Compute}}</td><td>{{printf "%.2f" .AvgBatchSize}}</td>{{else}}<td>n/a</td><td>n/a</td><td>n/a</td>{{end}}<td>{{pct .CPU}}</td>{{if $.Server}}<td>{{pct .Usage.Server}}</td>{{end}}{{if $.GPU}}<td>{{pct .Usage.GPU}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}{{end}}
</body>
</html>
`))

// Setting is the name of the measured setting's column.
func (h *htmlReport) Setting() string {
	if h.RateMode {
		return "Request rate"
	}
	return "Concurrency"
}

// SettingText prints the point's setting, marked when its windows did not
// agree or it went over --latency-threshold (such a setting ends a sweep,
// and the text table and CSV leave it out).
func (p pointReport) SettingText() string {
	s := settingValue(p.result)
	switch {
	case p.OverLatencyThreshold:
		s += " (over -l)"
	case !p.Stable:
		s += " (not stable)"
	}
	return s
}

// Trial is the search configuration of a run, nil for a plain sweep.
func (r runReport) Trial() *trial { return r.trial }

// P99AtScore is the p99 latency of the setting that gave the score.
func (r runReport) P99AtScore() string {
	for _, p := range r.Points {
		if settingValue(p.result) == r.ScoreAt {
			return us(p.P99)
		}
	}
	return ""
}

// Usage gives the template the point's server and GPU figures.
func (p pointReport) Usage() struct{ Server, GPU float64 } {
	return struct{ Server, GPU float64 }{p.server, p.gpu}
}

// Compute is the server's whole compute time per request.
func (s *serverSplit) Compute() float64 { return s.ComputeInput + s.ComputeInfer + s.ComputeOutput }

// writeHTML writes the report page.
func writeHTML(w io.Writer, h *htmlReport) error {
	if h.Generated == "" {
		h.Generated = time.Now().UTC().Format("2006-01-02 15:04 UTC")
	}
	view := struct {
		R           *htmlReport
		Charts      []chartView
		Server, GPU bool // whether any setting has the figure
	}{R: h, Charts: h.charts()}
	for _, r := range h.Runs {
		for _, p := range r.Points {
			view.Server = view.Server || !bad(p.server)
			view.GPU = view.GPU || !bad(p.gpu)
		}
	}
	err := reportTemplate.Execute(w, view)
	if err != nil {
		return fmt.Errorf("HTML report: %w", err)
	}
	return nil
}

// sweepReport is the HTML report of a plain sweep: one run, the model as
// it is loaded.
func sweepReport(o *options, results []result, use *usageLog) *htmlReport {
	run := runReport{Name: o.model + " as loaded"}
	for i, r := range results {
		run.Points = append(run.Points, pointReport{result: r, usage: use.at(i)})
	}
	h := &htmlReport{
		Title: "inferd perf: " + o.model, Model: o.model, URL: o.baseURL, Settings: settingsLine(o),
		RateMode: len(o.rates) > 0, Runs: []runReport{run},
	}
	if err := use.metricsErr(); err != nil {
		h.Notes = append(h.Notes, metricsNote(err))
	}
	return h
}

// writeSweepHTML writes --report after a sweep.
func writeSweepHTML(ctx context.Context, o *options, results []result, use *usageLog, start time.Time) error {
	if o.reportPath == "" {
		return nil
	}
	h := sweepReport(o, results, use)
	h.Autopilot = fetchAutopilot(ctx, o, start)
	err := writeFile(o.reportPath, func(w io.Writer) error { return writeHTML(w, h) })
	if err != nil {
		return fmt.Errorf("--report %s: %w", o.reportPath, err)
	}
	return nil
}

// metricsNote says why server figures may be missing.
func metricsNote(err error) string {
	return "--collect-metrics: reading the server's metrics failed, last: " + err.Error()
}

// settingsLine sums up how the measurements were taken.
func settingsLine(o *options) string {
	return fmt.Sprintf("%s, %s tensors, batch size %d, input data %s; windows of %d ms, stable within %g%% (%s latency), at most %d",
		protocolName(o), tensorsName(o), o.batch, o.inputData, o.interval.Milliseconds(), o.stability*100, latencyName(o.percentile), o.maxTrials)
}
