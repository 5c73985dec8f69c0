package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sloSimple is Triton's `simple` with dynamic batching set to wait 30 ms
// for batches of 8, which its latency target cannot afford.
const sloSimple = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 30000 preferred_batch_size: [ 8 ] }
parameters { key: "slo_p99_ms" value { string_value: "100" } }
`

// TestAutopilotServed: a model with a latency target in its config, the
// command line's --model-slo winning, served over HTTP: the statistics
// carry the slo block, the config shows the batching in force once the
// autopilot changed it, the metrics carry the capacity and headroom.
func TestAutopilotServed(t *testing.T) {
	root := t.TempDir()
	model, err := os.ReadFile("../../examples/model_repository/simple/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	writeModel(t, root, "simple", sloSimple, model)
	r := start(t, "--model-repository="+root, "--model-slo=simple,p99_ms=20,period_ms=200")

	// Ten clients in turn for a second: 30 ms of delay for a batch of 8
	// they never fill breaks the 20 ms target, so the autopilot takes
	// the delay away.
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if code, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); code != 200 {
					t.Errorf("infer: %d %s", code, body)
					return
				}
			}
		}()
	}
	wg.Wait()

	_, body := get(t, r.http+"/v2/models/simple/stats")
	var stats struct {
		ModelStats []struct {
			SLO *struct {
				TargetP99Us int64   `json:"target_p99_us"`
				Measured    int64   `json:"measured_p99_us"`
				Capacity    float64 `json:"capacity_infer_per_sec"`
				Delay       int64   `json:"max_queue_delay_us"`
				Decisions   []struct {
					From   int64  `json:"from_max_queue_delay_us"`
					Delay  int64  `json:"max_queue_delay_us"`
					Reason string `json:"reason"`
				} `json:"decisions"`
			} `json:"slo"`
		} `json:"model_stats"`
	}
	if err := json.Unmarshal([]byte(body), &stats); err != nil || len(stats.ModelStats) != 1 || stats.ModelStats[0].SLO == nil {
		t.Fatalf("stats without an slo block (%v): %s", err, body)
	}
	slo := stats.ModelStats[0].SLO
	if slo.TargetP99Us != 20000 || slo.Measured == 0 || slo.Capacity <= 0 {
		t.Errorf("slo block: %s", body)
	}
	if slo.Delay != 0 || len(slo.Decisions) == 0 || slo.Decisions[0].From != 30000 || slo.Decisions[0].Reason == "" {
		t.Fatalf("the 30 ms delay is still there or undecided: %s", body)
	}

	_, cfg := get(t, r.http+"/v2/models/simple/config")
	if !strings.Contains(cfg, `"max_queue_delay_microseconds":"0"`) && !strings.Contains(cfg, `"max_queue_delay_microseconds":0`) {
		t.Errorf("config does not show the delay in force: %s", cfg)
	}
	_, metrics := get(t, r.metrics+"/metrics")
	capacity, err := strconv.ParseFloat(metricValue(t, metrics, `inferd_model_capacity_infer_per_second{model="simple",version="1"}`), 64)
	if err != nil || capacity <= 0 {
		t.Errorf("capacity metric %v %v", capacity, err)
	}
	metricValue(t, metrics, `inferd_model_slo_headroom_ratio{model="simple",version="1"}`)
}

// TestModelSLOFlag: a malformed --model-slo stops the start with the
// option named.
func TestModelSLOFlag(t *testing.T) {
	for _, v := range []string{"simple", "simple,p99_ms=0", "simple,p99=5"} {
		_, err := parseFlags([]string{"--model-repository=/tmp", "--model-slo=" + v}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "model-slo") {
			t.Errorf("--model-slo=%s: %v", v, err)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "..", "docs", "autopilot.md")); err != nil {
		t.Errorf("the option's help names docs/autopilot.md: %v", err)
	}
}
