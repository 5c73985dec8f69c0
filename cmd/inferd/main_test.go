package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
)

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &out)
	if err == nil {
		t.Fatal("--help returned no error")
	}
	for _, name := range []string{"model-repository", "http-port", "metrics-port", "allow-metrics", "model-control-mode", "load-model",
		"strict-model-config", "disable-auto-complete-config", "exit-on-error", "exit-timeout-secs", "log-verbose",
		"http-max-input-size", "backend-config", "http-restricted-api", "metrics-config", "strict-readiness"} {
		if !strings.Contains(out.String(), "-"+name) {
			t.Errorf("--help does not document --%s", name)
		}
	}
	bad := []struct {
		args []string
		want string
	}{
		{nil, "--model-repository must be specified"},
		{[]string{"--model-repository=x", "--load-model=a"}, "only allowed with --model-control-mode=explicit"},
		{[]string{"--model-repository=x", "--model-control-mode=explicit", "--load-model=*", "--load-model=a"}, "must be the only"},
		{[]string{"--model-repository=x", "--http-max-input-size=0"}, "greater than 0"},
		{[]string{"--model-repository=x", "extra"}, "unexpected argument"},
	}
	for _, c := range bad {
		_, err := parseFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	cfg, err := parseFlags([]string{"--model-repository=a", "--model-store=b", "--strict-model-config=true"}, io.Discard)
	if err != nil || len(cfg.repos) != 2 || cfg.autoComplete() {
		t.Fatalf("cfg %+v err %v", cfg, err)
	}
	cfg, _ = parseFlags([]string{"--model-repository=a", "--strict-model-config=false", "--disable-auto-complete-config"}, io.Discard)
	if cfg.autoComplete() {
		t.Error("--disable-auto-complete-config must win over --strict-model-config=false")
	}
}

type running struct {
	http, metrics string
	addrs         map[string]string // by service
	cancel        context.CancelFunc
	done          chan error
}

// start runs the server in-process on free ports, as main does.
func start(t *testing.T, args ...string) *running {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		r.done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(addrs map[string]string) {
			r.http, r.metrics = "http://"+addrs["HTTP"], "http://"+addrs["metrics"]
			r.addrs = addrs
			close(ready)
		})
	}()
	select {
	case <-ready:
	case err := <-r.done:
		cancel()
		r.done <- err
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) error {
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readmeExample is the curl example of the README.
const readmeExample = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

func TestExampleRepository(t *testing.T) {
	r := start(t, "--model-repository=../../examples/model_repository")
	if s, _ := get(t, r.http+"/v2/health/ready"); s != 200 {
		t.Fatalf("ready = %d", s)
	}
	s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample)
	want := `{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}`
	if s != 200 || body != want {
		t.Fatalf("README example: %d %s", s, body)
	}
	s, body = post(t, r.http+"/v2/models/identity_fp32/infer", `{"inputs":[{"name":"INPUT0","shape":[1,3],"datatype":"FP32","data":[1.5,-2,0.25]}]}`)
	if s != 200 || !strings.Contains(body, `"data":[1.5,-2.0,0.25]`) {
		t.Fatalf("identity_fp32: %d %s", s, body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
	if _, err := http.Get(r.http + "/v2/health/live"); err == nil {
		t.Error("listener still open after shutdown")
	}
}

// metricValue finds one sample line's value.
func metricValue(t *testing.T, text, series string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no series %s in\n%s", series, text)
	}
	return m[1]
}

// taggedSimple is Triton's `simple` model with a metric tag.
const taggedSimple = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
metric_tags { key: "team" value: "x" }
`

func TestMetrics(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	writeModel(t, root, "fails_at_run", `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, reshapeTo2x2(t))
	r := start(t, "--model-repository="+root, "--model-control-mode=explicit")

	s, text := get(t, r.metrics+"/metrics")
	if s != 200 || strings.Contains(text, "nv_inference_") {
		t.Fatalf("6: before any load: %d %q", s, text)
	}
	resp, err := http.Get(r.metrics + "/metrics/")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("1-2: %v %v", err, resp)
	}
	resp.Body.Close()
	if resp, err := http.Post(r.metrics+"/metrics", "text/plain", nil); err != nil || resp.StatusCode != 405 {
		t.Fatalf("3: POST /metrics = %v %v", resp, err)
	}
	if s, b := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("load: %d %s", s, b)
	}
	_, text = get(t, r.metrics+"/metrics")
	labels := `_team="x",model="simple",version="1"`
	for _, reason := range []string{"BACKEND", "CANCELED", "OTHER", "REJECTED"} {
		if v := metricValue(t, text, `nv_inference_request_failure{`+labels[:len(labels)-len(`,version="1"`)]+`,reason="`+reason+`",version="1"}`); v != "0" {
			t.Errorf("7: failure %s = %s", reason, v)
		}
	}
	if v := metricValue(t, text, "nv_model_load_duration_secs{"+labels+"}"); v == "0" {
		t.Error("31: load duration is 0")
	}

	ones := strings.TrimSuffix(strings.Repeat("1,", 128), ",")
	batch8 := `{"inputs":[{"name":"INPUT0","shape":[8,16],"datatype":"INT32","data":[` + ones + `]},{"name":"INPUT1","shape":[8,16],"datatype":"INT32","data":[` + ones + `]}]}`
	if s, b := post(t, r.http+"/v2/models/simple/infer", batch8); s != 200 {
		t.Fatalf("batch 8: %d %s", s, b)
	}
	_, text = get(t, r.metrics+"/metrics")
	for series, want := range map[string]string{"nv_inference_request_success": "1", "nv_inference_count": "8", "nv_inference_exec_count": "1"} {
		if got := metricValue(t, text, series+"{"+labels+"}"); got != want {
			t.Errorf("8: %s = %s, want %s", series, got, want)
		}
	}
	if s, _ := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatal("batch 1 failed")
	}
	bad := strings.Replace(readmeExample, `"datatype":"INT32"`, `"datatype":"FP32"`, 1)
	if s, _ := post(t, r.http+"/v2/models/simple/infer", bad); s != 400 {
		t.Fatal("bad shape accepted")
	}
	_, text = get(t, r.metrics+"/metrics")
	for series, want := range map[string]string{"nv_inference_request_success": "2", "nv_inference_count": "9", "nv_inference_exec_count": "2", "nv_inference_pending_request_count": "0"} {
		if got := metricValue(t, text, series+"{"+labels+"}"); got != want {
			t.Errorf("10: %s = %s, want %s", series, got, want)
		}
	}
	if v := metricValue(t, text, `nv_inference_request_failure{_team="x",model="simple",reason="OTHER",version="1"}`); v != "0" {
		t.Errorf("11: invalid shape counted as failure")
	}
	if v := metricValue(t, text, "nv_inference_request_duration_us{"+labels+"}"); v == "0" {
		t.Error("request duration counter is 0")
	}
	// 14: an ONNX Runtime execution error counts as reason BACKEND.
	if s, b := post(t, r.http+"/v2/repository/models/fails_at_run/load", ""); s != 200 {
		t.Fatalf("load fails_at_run: %d %s", s, b)
	}
	if s, b := post(t, r.http+"/v2/models/fails_at_run/infer", `{"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2,3]}]}`); s != 500 || !strings.Contains(b, "onnx runtime error") {
		t.Fatalf("run error: %d %s", s, b)
	}
	if s, b := post(t, r.http+"/v2/models/fails_at_run/infer", `{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1,2,3,4]}]}`); s != 200 {
		t.Fatalf("valid run: %d %s", s, b)
	}
	_, text = get(t, r.metrics+"/metrics")
	if v := metricValue(t, text, `nv_inference_request_failure{model="fails_at_run",reason="BACKEND",version="1"}`); v != "1" {
		t.Errorf("14: BACKEND failures = %s, want 1", v)
	}
	if v := metricValue(t, text, `nv_inference_request_success{model="fails_at_run",version="1"}`); v != "1" {
		t.Errorf("success after a failure = %s, want 1", v)
	}
	if s, b := get(t, r.http+"/v2/models/fails_at_run/stats"); s != 200 || !strings.Contains(b, `"fail":{"count":1,`) {
		t.Errorf("statistics fail count: %d %s", s, b)
	}

	if s, b := post(t, r.http+"/v2/repository/models/simple/unload", ""); s != 200 {
		t.Fatalf("unload: %d %s", s, b)
	}
	if _, text = get(t, r.metrics+"/metrics"); strings.Contains(text, `model="simple"`) {
		t.Errorf("44: series remain after unload:\n%s", text)
	}
}

func TestMetricsConfig(t *testing.T) {
	r := start(t, "--model-repository=../../examples/model_repository", "--metrics-config=counter_latencies=false")
	_, text := get(t, r.metrics+"/metrics")
	if strings.Contains(text, "_duration_us") || !strings.Contains(text, "nv_inference_request_success") {
		t.Errorf("18: counter_latencies=false:\n%s", text)
	}
	r2 := start(t, "--model-repository=../../examples/model_repository", "--metrics-config=counter_latencies=FALSE", "--allow-http=false")
	_, text = get(t, r2.metrics+"/metrics")
	if !strings.Contains(text, "nv_inference_queue_duration_us") {
		t.Error("19: counter_latencies=FALSE must keep the counters")
	}
	r3 := start(t, "--model-repository=../../examples/model_repository", "--allow-metrics=false")
	if r3.metrics != "http://" {
		t.Errorf("4: metrics listener open at %s", r3.metrics)
	}
	for _, bad := range []string{"foo", "a,b=c", "=x", "k="} {
		_, err := parseFlags([]string{"--model-repository=x", "--metrics-config=" + bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--metrics-config") {
			t.Errorf("25: --metrics-config=%s: %v", bad, err)
		}
	}
}

// sampleLabel lists, in output order, the values of label on the samples
// named series (e.g. x_bucket) that carry the given label prefix.
func sampleLabel(text, series, labels, label string) []string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series+"{"+labels+",") + label + `="([^"]*)"\} `)
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// Checklist 20-24, 26, 27, 44, 47 for the *_summary_us families and the
// first-response histogram, over the real listener.
func TestMetricsLatencyFamilies(t *testing.T) {
	summaries := []string{"nv_inference_request_summary_us", "nv_inference_queue_summary_us", "nv_inference_compute_input_summary_us",
		"nv_inference_compute_infer_summary_us", "nv_inference_compute_output_summary_us"}
	const histogram = "nv_inference_first_response_histogram_ms"
	const bucketsOverride = `model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 1, 2, 4, 8 ] } } ] }`
	cases := []struct {
		name        string
		settings    []string
		modelConfig string   // appended to the model's config
		quantiles   []string // nil: no summary family may appear
		buckets     []string // nil: no histogram text may appear
	}{
		{name: "20 summary_latencies", settings: []string{"summary_latencies=true"},
			quantiles: []string{"0.5", "0.9", "0.95", "0.99", "0.999"}},
		{name: "21 summary_quantiles", settings: []string{"summary_latencies=true", "summary_quantiles=0.5:0.05,0.9:0.01"},
			quantiles: []string{"0.5", "0.9"}},
		{name: "21 bad pairs skipped", settings: []string{"summary_latencies=true", "summary_quantiles=0.9:0.01,bad,0.5:x"},
			quantiles: []string{"0.9"}},
		{name: "22 histogram_latencies", settings: []string{"histogram_latencies=true"},
			buckets: []string{"100", "500", "2000", "5000", "+Inf"}},
		{name: "23 neither", settings: []string{"summary_quantiles=0.5:0.05"}},
		{name: "23 not literal true", settings: []string{"summary_latencies=TRUE", "histogram_latencies=1"}},
		{name: "23 buckets without the flag", modelConfig: bucketsOverride},
		{name: "24 model buckets", settings: []string{"histogram_latencies=true", "summary_latencies=true"}, modelConfig: bucketsOverride,
			quantiles: []string{"0.5", "0.9", "0.95", "0.99", "0.999"}, buckets: []string{"1", "2", "4", "8", "+Inf"}},
	}
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	const requests = 3
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeModel(t, root, "simple", taggedSimple+c.modelConfig, model)
			args := []string{"--model-repository=" + root, "--model-control-mode=explicit"}
			for _, s := range c.settings {
				args = append(args, "--metrics-config="+s)
			}
			r := start(t, args...)
			if s, b := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
				t.Fatalf("load: %d %s", s, b)
			}
			// 26, 27, 47: the model's labels, sorted by name; le and
			// quantile come last, as in Triton's output.
			const labels = `_team="x",model="simple",version="1"`
			check := func(text, want string) {
				t.Helper()
				for _, f := range summaries {
					if c.quantiles == nil {
						if strings.Contains(text, f) {
							t.Errorf("%s present without summary_latencies=true", f)
						}
						continue
					}
					if got := sampleLabel(text, f, labels, "quantile"); !slices.Equal(got, c.quantiles) {
						t.Errorf("%s quantiles %v, want %v", f, got, c.quantiles)
					}
					if got := metricValue(t, text, f+"_count{"+labels+"}"); got != want {
						t.Errorf("%s_count = %s, want %s", f, got, want)
					}
					metricValue(t, text, f+"_sum{"+labels+"}")
				}
				if c.buckets == nil {
					if strings.Contains(text, histogram) {
						t.Errorf("%s present without histogram_latencies=true", histogram)
					}
					return
				}
				if got := sampleLabel(text, histogram+"_bucket", labels, "le"); !slices.Equal(got, c.buckets) {
					t.Errorf("buckets %v, want %v", got, c.buckets)
				}
				for _, series := range []string{histogram + "_count{" + labels + "}", histogram + `_bucket{` + labels + `,le="+Inf"}`} {
					if got := metricValue(t, text, series); got != want {
						t.Errorf("%s = %s, want %s", series, got, want)
					}
				}
			}
			// The series exist from load on.
			_, text := get(t, r.metrics+"/metrics")
			check(text, "0")

			for range requests {
				if s, b := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
					t.Fatalf("infer: %d %s", s, b)
				}
			}
			_, text = get(t, r.metrics+"/metrics")
			success := metricValue(t, text, "nv_inference_request_success{"+labels+"}")
			if success != strconv.Itoa(requests) {
				t.Fatalf("success = %s, want %d", success, requests)
			}
			check(text, success)

			// 44: unload takes the new families along.
			if s, b := post(t, r.http+"/v2/repository/models/simple/unload", ""); s != 200 {
				t.Fatalf("unload: %d %s", s, b)
			}
			if _, text = get(t, r.metrics+"/metrics"); strings.Contains(text, "_summary_us") || strings.Contains(text, histogram) {
				t.Errorf("44: series remain after unload:\n%s", text)
			}
		})
	}
}

func TestExitOnError(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "good", "", onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4)))
	writeModel(t, root, "broken", "max_batch_size: nope", nil)
	cfg, err := parseFlags([]string{"--model-repository=" + root, "--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err == nil || !strings.Contains(err.Error(), "failed to load all models") {
		t.Fatalf("run = %v, want failed to load all models", err)
	}
	r := start(t, "--model-repository="+root, "--exit-on-error=false")
	if s, _ := get(t, r.http+"/v2/models/good/ready"); s != 200 {
		t.Error("good model not served with --exit-on-error=false")
	}
	if s, b := post(t, r.http+"/v2/repository/index", ""); s != 200 || !strings.Contains(b, `{"name":"broken","state":"UNAVAILABLE","reason":"`) {
		t.Errorf("index: %d %s", s, b)
	}
}

// TestAutoCompleteFlag: without config.pbtxt a model
// auto-completes from its ONNX file, unless auto-complete is disabled.
func TestAutoCompleteFlag(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "noconfig", "", onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4)))
	r := start(t, "--model-repository="+root)
	if s, body := get(t, r.http+"/v2/models/noconfig/config"); s != 200 ||
		!strings.Contains(body, `"platform":"onnxruntime_onnx"`) || !strings.Contains(body, `"backend":"onnxruntime"`) ||
		!strings.Contains(body, `"max_batch_size":4`) || !strings.Contains(body, `"preferred_batch_size":[4]`) {
		t.Errorf("auto-completed config: %d %s", s, body)
	}
	r2 := start(t, "--model-repository="+root, "--disable-auto-complete-config", "--exit-on-error=false")
	if s, _ := get(t, r2.http+"/v2/models/noconfig/ready"); s == 200 {
		t.Error("a model without config.pbtxt loaded with auto-complete disabled")
	}
	if _, body := post(t, r2.http+"/v2/repository/index", ""); !strings.Contains(body, "model configuration is not provided") {
		t.Errorf("index: %s", body)
	}
}

func TestDuplicateAcrossRepositories(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	model := onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4))
	writeModel(t, a, "dup", "", model)
	writeModel(t, b, "dup", "", model)
	writeModel(t, b, "only_b", "", model)
	cfg, err := parseFlags([]string{"--model-repository=" + a, "--model-repository=" + b, "--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err == nil || !strings.Contains(err.Error(), "duplicate model names across repositories: dup") {
		t.Fatalf("run = %v", err)
	}
	r := start(t, "--model-repository="+a, "--model-repository="+b, "--exit-on-error=false")
	if s, _ := get(t, r.http+"/v2/models/only_b/ready"); s != 200 {
		t.Error("the other model must serve")
	}
	if s, body := post(t, r.http+"/v2/repository/index", ""); !strings.Contains(body, `{"name":"dup","state":"UNAVAILABLE","reason":"model appears in more than one repository`) {
		t.Errorf("index: %d %s", s, body)
	}
}

func TestMissingLibrary(t *testing.T) {
	t.Setenv("ORT_LIB_PATH", "")
	cfg, _ := parseFlags([]string{"--model-repository=../../examples/model_repository", "--backend-config=onnxruntime,library-path=/nonexistent/libonnxruntime.so"}, io.Discard)
	err := run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "/nonexistent/libonnxruntime.so") {
		t.Fatalf("want a one-line error naming the path, got %v", err)
	}
}

// TestBrokenLibraryFailsStart checks that ONNX Runtime's load, which runs
// beside the repository's read, still fails the start when it fails, even
// with no ONNX model to load.
func TestBrokenLibraryFailsStart(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "libonnxruntime.so")
	if err := os.WriteFile(broken, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := parseFlags([]string{"--model-repository=" + t.TempDir(), "--backend-config=onnxruntime,library-path=" + broken,
		"--http-port=0", "--grpc-port=0", "--metrics-port=0"}, io.Discard)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	err := run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(map[string]string) {
		t.Error("served with a broken ONNX Runtime library")
		stop()
	})
	if err == nil || !strings.Contains(err.Error(), broken) {
		t.Fatalf("want the start to fail naming %s, got %v", broken, err)
	}
}

func writeModel(t *testing.T, root, name, config string, model []byte) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if model != nil {
		if err := os.WriteFile(filepath.Join(dir, "1", "model.onnx"), model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// reshapeTo2x2 is a model whose run fails unless x has exactly 4 elements:
// a Reshape to a constant [2,2].
func reshapeTo2x2(t *testing.T) []byte {
	t.Helper()
	g := onnxbuild.NewGraph("reshape")
	g.Input("x", onnxbuild.Float, -1)
	g.Output("y", onnxbuild.Float, 2, 2)
	shape, err := onnxbuild.Encode(onnxbuild.Int64, []float64{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	g.Initializer("shape", onnxbuild.Int64, []int64{2}, shape)
	g.Node("Reshape", []string{"x", "shape"}, []string{"y"})
	return onnxbuild.Must(onnxbuild.Model(g, onnxbuild.DefaultOpset))
}

// TestPollMode: with --model-control-mode=poll the running server picks up
// a model added to the repository within a few poll intervals.
func TestPollMode(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	r := start(t, "--model-repository="+root, "--model-control-mode=poll", "--repository-poll-secs=1")
	writeModel(t, root, "added", strings.Replace(taggedSimple, `name: "simple"`, `name: "added"`, 1), onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s, _ := get(t, r.http+"/v2/models/added/ready"); s == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("model added to the repository never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s, body := post(t, r.http+"/v2/models/added/infer", readmeExample); s != 200 {
		t.Fatalf("infer on the polled model: %d %s", s, body)
	}
}

// TestMetricsAcrossReloads: as in Triton, whose reporters are shared per
// label set (triton-inference-server/core src/metric_model_reporter.cc), a
// hot reload keeps
// the counters going (they may never go down), while the statistics
// endpoint starts over with the new copy; an explicit unload and load
// restarts the counters.
func TestMetricsAcrossReloads(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	r := start(t, "--model-repository="+root, "--model-control-mode=explicit", "--load-model=simple")
	success := func() string {
		t.Helper()
		_, text := get(t, r.metrics+"/metrics")
		return metricValue(t, text, `nv_inference_request_success{_team="x",model="simple",version="1"}`)
	}
	for range 2 {
		if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
			t.Fatalf("infer: %d %s", s, body)
		}
	}
	// A changed config makes the load a reload beside the serving copy.
	cfg := filepath.Join(root, "simple", "config.pbtxt")
	if err := os.WriteFile(cfg, []byte(taggedSimple+"# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, body := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("reload: %d %s", s, body)
	}
	if got := success(); got != "2" {
		t.Fatalf("success after a hot reload = %s, want 2 (counters continue)", got)
	}
	if _, stats := get(t, r.http+"/v2/models/simple/stats"); !strings.Contains(stats, `"inference_count":0`) {
		t.Fatalf("statistics of the new copy: %s, want them to start over", stats)
	}
	post(t, r.http+"/v2/models/simple/infer", readmeExample)
	if got := success(); got != "3" {
		t.Fatalf("success = %s, want 3", got)
	}
	if s, body := post(t, r.http+"/v2/repository/models/simple/unload", ""); s != 200 {
		t.Fatalf("unload: %d %s", s, body)
	}
	if s, body := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("load: %d %s", s, body)
	}
	if got := success(); got != "0" {
		t.Fatalf("success after unload and load = %s, want 0", got)
	}
}
