package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

type noModels struct{}

func (noModels) ReadyVersions(string) []*core.ModelVersion { return nil }

func TestParseSetting(t *testing.T) {
	def := defaultQuantiles()
	cases := []struct {
		args       []string
		wantErr    bool
		counters   bool
		summaries  bool
		histogram  bool
		quantiles  map[float64]float64
		badEntries []string
	}{
		{args: nil, counters: true, quantiles: def},
		{args: []string{"counter_latencies=false"}, quantiles: def},
		{args: []string{"counter_latencies=FALSE"}, counters: true, quantiles: def}, // only the literal "false" turns them off
		{args: []string{"counter_latencies=true"}, counters: true, quantiles: def},
		{args: []string{"unknown_setting=1"}, counters: true, quantiles: def}, // ignored, as Triton
		{args: []string{"summary_latencies=true"}, counters: true, summaries: true, quantiles: def},
		{args: []string{"summary_latencies=TRUE"}, counters: true, quantiles: def}, // only the literal "true" turns them on
		{args: []string{"summary_latencies=1"}, counters: true, quantiles: def},
		{args: []string{"summary_latencies=true", "summary_latencies=false"}, counters: true, quantiles: def},
		{args: []string{"histogram_latencies=true"}, counters: true, histogram: true, quantiles: def},
		{args: []string{"histogram_latencies=True"}, counters: true, quantiles: def},
		{args: []string{"summary_quantiles=0.5:0.05,0.9:0.01"}, counters: true, quantiles: map[float64]float64{0.5: 0.05, 0.9: 0.01}},
		{args: []string{"summary_quantiles= 0.25 : 0.1"}, counters: true, quantiles: map[float64]float64{0.25: 0.1}},
		{args: []string{"summary_quantiles=0.5:0.05,nocolon,0.9:x,y:0.1,2:0.1,0.7:-1,,0.99:0.001"}, counters: true,
			quantiles: map[float64]float64{0.5: 0.05, 0.99: 0.001}, badEntries: []string{"nocolon", "0.9:x", "y:0.1", "2:0.1", "0.7:-1", ""}},
		{args: []string{"summary_quantiles=bad"}, counters: true, quantiles: def, badEntries: []string{"bad"}},
		// Every pair bad: the default list, not the previous setting.
		{args: []string{"summary_quantiles=0.5:0.05", "summary_quantiles=a:b"}, counters: true, quantiles: def, badEntries: []string{"a:b"}},
		{args: []string{"foo"}, wantErr: true, counters: true, quantiles: def},
		{args: []string{"a,b=c"}, wantErr: true, counters: true, quantiles: def},
		{args: []string{"=x"}, wantErr: true, counters: true, quantiles: def},
		{args: []string{"k="}, wantErr: true, counters: true, quantiles: def},
		{args: []string{"summary_quantiles="}, wantErr: true, counters: true, quantiles: def},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg := DefaultConfig()
			var err error
			for _, a := range c.args {
				if err = cfg.ParseSetting(a); err != nil {
					break
				}
			}
			if (err != nil) != c.wantErr || cfg.CounterLatencies != c.counters || cfg.SummaryLatencies != c.summaries || cfg.HistogramLatencies != c.histogram {
				t.Fatalf("err %v, counters %v, summaries %v, histogram %v", err, cfg.CounterLatencies, cfg.SummaryLatencies, cfg.HistogramLatencies)
			}
			if !maps.Equal(cfg.SummaryQuantiles, c.quantiles) {
				t.Errorf("quantiles %v, want %v", cfg.SummaryQuantiles, c.quantiles)
			}
			if !slices.Equal(cfg.badQuantiles, c.badEntries) {
				t.Errorf("skipped pairs %q, want %q", cfg.badQuantiles, c.badEntries)
			}
		})
	}
}

func TestObserversLogsSkippedPairs(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.ParseSetting("summary_quantiles=0.5:0.05,oops,0.9:zz"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg.Observers(slog.New(slog.NewTextHandler(&buf, nil)))
	for _, want := range []string{"level=ERROR", "pair=oops", "pair=0.9:zz"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	DefaultConfig().Observers(slog.New(slog.NewTextHandler(&buf, nil)))
	if buf.Len() != 0 {
		t.Errorf("default config logged %q", buf.String())
	}
}

func TestObserversOff(t *testing.T) {
	for _, c := range []struct {
		settings []string
		want     bool
	}{
		{nil, false},
		{[]string{"counter_latencies=false"}, false},
		{[]string{"summary_quantiles=0.5:0.05"}, false},
		{[]string{"summary_latencies=true"}, true},
		{[]string{"histogram_latencies=true"}, true},
	} {
		cfg := DefaultConfig()
		for _, s := range c.settings {
			if err := cfg.ParseSetting(s); err != nil {
				t.Fatal(err)
			}
		}
		if got := cfg.Observers(discard()) != nil; got != c.want {
			t.Errorf("%v: factory present = %v, want %v", c.settings, got, c.want)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// observerText renders one observer's families as the endpoint would.
func observerText(t *testing.T, o *observer) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(observerCollector{o})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

type observerCollector struct{ o *observer }

func (observerCollector) Describe(chan<- *prometheus.Desc)      {}
func (c observerCollector) Collect(ch chan<- prometheus.Metric) { c.o.collect(ch) }

// labelValues lists the values of label in the samples of series (a full
// sample name such as x_bucket), in output order.
func labelValues(text, series, label string) []string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + `\{[^}]*\b` + label + `="([^"]*)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestObserver(t *testing.T) {
	const tagged = `name: "m" metric_tags { key: "team" value: "x" } metric_tags { key: "a" value: "b" }`
	const labels = `_a="b",_team="x",model="m",version="3"`
	cases := []struct {
		name      string
		settings  []string
		config    string
		quantiles []string // nil: no summaries
		buckets   []string // nil: no histogram
		warn      string   // a warning the load must log
	}{
		{name: "summaries", settings: []string{"summary_latencies=true"}, config: tagged,
			quantiles: []string{"0.5", "0.9", "0.95", "0.99", "0.999"}},
		{name: "own quantiles", settings: []string{"summary_latencies=true", "summary_quantiles=0.9:0.01,0.5:0.05"}, config: tagged,
			quantiles: []string{"0.5", "0.9"}},
		{name: "histogram", settings: []string{"histogram_latencies=true"}, config: tagged,
			buckets: []string{"100", "500", "2000", "5000", "+Inf"}},
		{name: "both", settings: []string{"histogram_latencies=true", "summary_latencies=true"}, config: tagged,
			quantiles: []string{"0.5", "0.9", "0.95", "0.99", "0.999"}, buckets: []string{"100", "500", "2000", "5000", "+Inf"}},
		{name: "model buckets", settings: []string{"histogram_latencies=true"},
			config:  tagged + ` model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 1, 2, 4, 8 ] } } ] }`,
			buckets: []string{"1", "2", "4", "8", "+Inf"}},
		{name: "other family ignored", settings: []string{"histogram_latencies=true"},
			config:  tagged + ` model_metrics { metric_control [ { metric_identifier { family: "nv_inference_request_duration_us" } histogram_options { buckets: [ 1 ] } } ] }`,
			buckets: []string{"100", "500", "2000", "5000", "+Inf"}, warn: "family=nv_inference_request_duration_us"},
		{name: "unsorted buckets", settings: []string{"histogram_latencies=true"},
			config:  tagged + ` model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 8, 2, 2, nan, 4 ] } } ] }`,
			buckets: []string{"2", "4", "8", "+Inf"}, warn: "ascending"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			for _, s := range c.settings {
				if err := cfg.ParseSetting(s); err != nil {
					t.Fatal(err)
				}
			}
			mc, err := modelconfig.Parse([]byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			o := cfg.Observers(slog.New(slog.NewTextHandler(&logs, nil)))(&core.ModelVersion{Name: "m", Version: 3, Config: mc}).(*observer)
			if c.warn != "" && !strings.Contains(logs.String(), c.warn) {
				t.Errorf("log lacks %q:\n%s", c.warn, logs.String())
			}

			// At load: every series exists with nothing observed. The labels
			// are sorted by name except le and quantile, which the text
			// format puts last, as Triton's output does.
			text := observerText(t, o)
			for _, f := range summaryFamilies {
				if got := labelValues(text, f.name, "quantile"); !slices.Equal(got, c.quantiles) {
					t.Errorf("%s quantiles %v, want %v", f.name, got, c.quantiles)
				}
				if c.quantiles != nil && !strings.Contains(text, f.name+"_count{"+labels+"} 0\n") {
					t.Errorf("%s_count{%s} 0 missing:\n%s", f.name, labels, text)
				}
			}
			if got := labelValues(text, firstResponseFamily+"_bucket", "le"); !slices.Equal(got, c.buckets) {
				t.Errorf("buckets %v, want %v", got, c.buckets)
			}

			o.ObserveSuccess(core.RequestDurations{RequestUs: 10, QueueUs: 20, ComputeInputUs: 30, ComputeInferUs: 40, ComputeOutputUs: 50})
			o.ObserveSuccess(core.RequestDurations{RequestUs: 1, QueueUs: 2, ComputeInputUs: 3, ComputeInferUs: 4, ComputeOutputUs: 5})
			o.ObserveFirstResponse(3)
			o.ObserveFirstResponse(7000)
			text = observerText(t, o)
			for i, f := range summaryFamilies {
				if c.quantiles == nil {
					if strings.Contains(text, f.name) {
						t.Errorf("%s present without summary_latencies", f.name)
					}
					continue
				}
				for series, want := range map[string]string{
					f.name + "_count{" + labels + "}":                                  "2",
					f.name + "_sum{" + labels + "}":                                    strconv.Itoa(11 * (i + 1)),
					f.name + `{_a="b",_team="x",model="m",version="3",quantile="0.5"}`: strconv.Itoa(i + 1),
				} {
					if !strings.Contains(text, series+" "+want+"\n") {
						t.Errorf("want %s %s in\n%s", series, want, text)
					}
				}
			}
			if c.buckets == nil {
				if strings.Contains(text, firstResponseFamily) {
					t.Errorf("%s present without histogram_latencies", firstResponseFamily)
				}
				return
			}
			for series, want := range map[string]string{
				firstResponseFamily + "_count{" + labels + "}":                                                                   "2",
				firstResponseFamily + "_sum{" + labels + "}":                                                                     "7003",
				firstResponseFamily + `_bucket{_a="b",_team="x",model="m",version="3",le="+Inf"}`:                                "2",
				firstResponseFamily + `_bucket{_a="b",_team="x",model="m",version="3",le="` + c.buckets[len(c.buckets)-2] + `"}`: "1",
			} {
				if !strings.Contains(text, series+" "+want+"\n") {
					t.Errorf("want %s %s in\n%s", series, want, text)
				}
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	srv := httptest.NewServer(NewHandler(noModels{}, DefaultConfig()))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/metrics", 200}, {"GET", "/metrics/", 200}, {"POST", "/metrics", 405}, {"GET", "/other", 404},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		if c.status == 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; charset=utf-8") {
			t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
		}
	}
}
