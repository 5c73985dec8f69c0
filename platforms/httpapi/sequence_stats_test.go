package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/platforms/metrics"
)

// seqStats is the part of /v2/models/<m>/stats a sequence model's test
// reads (triton-inference-server/server docs/protocol/extension_statistics.md).
type seqStats struct {
	ModelStats []struct {
		InferenceCount uint64 `json:"inference_count"`
		ExecutionCount uint64 `json:"execution_count"`
		InferenceStats struct {
			Success       struct{ Count uint64 } `json:"success"`
			Fail          struct{ Count uint64 } `json:"fail"`
			Queue         struct{ Count uint64 } `json:"queue"`
			ComputeInput  struct{ Count uint64 } `json:"compute_input"`
			ComputeInfer  struct{ Count uint64 } `json:"compute_infer"`
			ComputeOutput struct{ Count uint64 } `json:"compute_output"`
		} `json:"inference_stats"`
		BatchStats []struct {
			BatchSize    uint64                 `json:"batch_size"`
			ComputeInfer struct{ Count uint64 } `json:"compute_infer"`
		} `json:"batch_stats"`
	} `json:"model_stats"`
}

// TestSequenceStatisticsOverHTTP: the statistics and the nv_inference_*
// series of sequence models reflect what ran. Four sequences share every
// execution of `acc4` (direct, waiting for half its 8 slots to be ready),
// so there are a quarter as many executions as inferences, all of batch
// size 4; each request counts one success with its queue and compute
// times. Requests the sequence batcher refuses (no START, no correlation
// id) are not counted at all, as Triton's, whose Enqueue returns their
// error before the request is scheduled
// (triton-inference-server/core src/sequence_batch_scheduler/sequence_batch_scheduler.cc);
// a backlogged sequence whose timeout passes counts as a REJECTED failure.
func TestSequenceStatisticsOverHTTP(t *testing.T) {
	cfg := onnxbuild.AccumulatorConfig(onnxbuild.Int32)
	for _, want := range []string{"max_batch_size: 8", "sequence_batching {"} {
		if !strings.Contains(cfg, want) {
			t.Fatalf("the accumulator's config has no %q:\n%s", want, cfg)
		}
	}
	acc := onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))
	base, srv := startServer(t, writeRepo(t, map[string]testModel{
		"acc4": {config: strings.Replace(cfg, "sequence_batching {",
			"sequence_batching {\n  direct { max_queue_delay_microseconds: 20000000 minimum_slot_utilization: 0.5 }", 1), onnx: acc},
		"acc1": {config: strings.Replace(cfg, "max_batch_size: 8", "max_batch_size: 1", 1), onnx: acc},
	}), serverOpts{})

	const sequences, steps = 4, 5
	url := base + "/v2/models/acc4/infer"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sequences}}
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Go(func() {
			sum := 0
			for step := range steps {
				v := 10*i + step
				sum += v
				code, r, err := postJSON(client, url, seqBody("r", int32(v), seqParams(i+1, step == 0, step == steps-1)))
				if err != nil || code != http.StatusOK {
					t.Errorf("sequence %d step %d: %d %q %v", i+1, step, code, r.Error, err)
					return
				}
				if got := r.output(t, "OUTPUT"); got != strconv.Itoa(sum) {
					t.Errorf("sequence %d step %d: OUTPUT %v, want %d", i+1, step, got, sum)
				}
			}
		})
	}
	wg.Wait()
	for _, body := range []string{seqBody("r", 1, seqParams(99, false, false)), seqBody("r", 1, "")} {
		if code, _, out := post(t, url, body); code != http.StatusBadRequest {
			t.Fatalf("refused request: %d %s", code, out)
		}
	}

	// acc1's one slot is held by sequence 1; sequence 2 times out in the
	// backlog.
	url1 := base + "/v2/models/acc1/infer"
	for _, step := range []struct {
		body string
		code int
	}{
		{seqBody("a", 5, seqParams(1, true, false)), 200},
		{seqBody("b", 5, `,"parameters":{"sequence_id":2,"sequence_start":true,"timeout":1000}`), 503},
		{seqBody("a", 6, seqParams(1, false, true)), 200},
	} {
		if code, _, out := post(t, url1, step.body); code != step.code {
			t.Fatalf("acc1: %d %s, want %d", code, out, step.code)
		}
	}

	const n = sequences * steps
	var st seqStats
	code, _, body := do(t, http.MethodGet, base+"/v2/models/acc4/stats", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("stats: %d %s", code, body)
	}
	must(t, json.Unmarshal(body, &st))
	s := st.ModelStats[0]
	is := s.InferenceStats
	if s.InferenceCount != n || s.ExecutionCount != steps || is.Success.Count != n || is.Fail.Count != 0 ||
		is.Queue.Count != n || is.ComputeInput.Count != n || is.ComputeInfer.Count != n || is.ComputeOutput.Count != n {
		t.Errorf("acc4 stats %s: want %d inferences in %d executions, %d successes with queue and compute counts, no failures", body, n, steps, n)
	}
	if len(s.BatchStats) != 1 || s.BatchStats[0].BatchSize != sequences || s.BatchStats[0].ComputeInfer.Count != steps {
		t.Errorf("acc4 batch stats %+v, want %d executions of batch size %d", s.BatchStats, steps, sequences)
	}

	text := scrape(t, srv)
	for _, c := range []struct {
		series, model, label string
		want                 float64
	}{
		{"nv_inference_count", "acc4", "", n},
		{"nv_inference_exec_count", "acc4", "", steps},
		{"nv_inference_request_success", "acc4", "", n},
		{"nv_inference_pending_request_count", "acc4", "", 0},
		{"nv_inference_request_failure", "acc4", `reason="BACKEND"`, 0},
		{"nv_inference_request_failure", "acc4", `reason="OTHER"`, 0},
		{"nv_inference_request_failure", "acc4", `reason="REJECTED"`, 0},
		{"nv_inference_request_success", "acc1", "", 2},
		{"nv_inference_exec_count", "acc1", "", 2},
		{"nv_inference_request_failure", "acc1", `reason="REJECTED"`, 1},
		{"nv_inference_request_failure", "acc1", `reason="OTHER"`, 0},
		{"nv_inference_pending_request_count", "acc1", "", 0},
	} {
		if got := metricValue(t, text, c.series, c.model, c.label); got != c.want {
			t.Errorf("%s{model=%q %s} = %v, want %v", c.series, c.model, c.label, got, c.want)
		}
	}
}

// scrape reads the metrics endpoint over srv's models, served on a real
// listener.
func scrape(t *testing.T, srv metrics.Source) string {
	t.Helper()
	ms := httptest.NewServer(metrics.NewHandler(srv, metrics.DefaultConfig()))
	defer ms.Close()
	code, _, body := do(t, http.MethodGet, ms.URL+"/metrics", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("metrics: %d %s", code, body)
	}
	return string(body)
}

// metricValue is the value of the series name{model="<model>",...} in
// the metrics text, with the extra label (`reason="REJECTED"`) when set.
func metricValue(t *testing.T, text, name, model, label string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `model="`+model+`"`) || (label != "" && !strings.Contains(line, label)) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v
	}
	t.Fatalf("no series %s for model %s %s", name, model, label)
	return 0
}
