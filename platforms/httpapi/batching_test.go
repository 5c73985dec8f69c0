package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// simpleWith is Triton's `simple` model (AddSub over INT32 [16]) with the
// given scheduling lines.
func simpleWith(sched string) testModel {
	return testModel{
		config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
` + sched,
		onnx: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)),
	}
}

// simpleBody is a batch-1 request whose INPUT0 is all v and INPUT1 all 1,
// with extra JSON members (e.g. parameters) appended.
func simpleBody(v int, extra string) string {
	row := strings.TrimSuffix(strings.Repeat(fmt.Sprint(v)+",", 16), ",")
	ones := strings.TrimSuffix(strings.Repeat("1,", 16), ",")
	return fmt.Sprintf(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[%s]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[%s]}]%s}`, row, ones, extra)
}

type inferReply struct {
	Error   string `json:"error"`
	Outputs []struct {
		Name  string  `json:"name"`
		Shape []int64 `json:"shape"`
		Data  []int64 `json:"data"`
	} `json:"outputs"`
}

// concurrently posts bodies at once and returns the status and reply of each.
func concurrently(t *testing.T, url string, bodies []string) ([]int, []inferReply) {
	t.Helper()
	codes := make([]int, len(bodies))
	replies := make([]inferReply, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			if err := json.NewDecoder(resp.Body).Decode(&replies[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return codes, replies
}

type statsReply struct {
	ModelStats []struct {
		InferenceCount uint64 `json:"inference_count"`
		ExecutionCount uint64 `json:"execution_count"`
		BatchStats     []struct {
			BatchSize uint64 `json:"batch_size"`
		} `json:"batch_stats"`
		InferenceStats struct {
			Success struct{ Count uint64 } `json:"success"`
			Fail    struct{ Count uint64 } `json:"fail"`
		} `json:"inference_stats"`
	} `json:"model_stats"`
}

func statsOverHTTP(t *testing.T, base, model string) statsReply {
	t.Helper()
	code, _, body := do(t, http.MethodGet, base+"/v2/models/"+model+"/stats", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("stats: %d %s", code, body)
	}
	var st statsReply
	must(t, json.Unmarshal(body, &st))
	return st
}

// TestDynamicBatchingOverHTTP runs four concurrent clients through the
// real ONNX Runtime: one execution of batch 4, each client its own sums.
func TestDynamicBatchingOverHTTP(t *testing.T) {
	root := writeRepo(t, map[string]testModel{
		// The preferred size is reached by the fourth request; the long
		// delay only matters if batching is broken (the test then hangs
		// for 20 s and fails on the counts).
		"batched": simpleWith("dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 20000000 }\n"),
	})
	base, _ := startServer(t, root, serverOpts{})
	bodies := []string{simpleBody(10, ""), simpleBody(20, ""), simpleBody(30, ""), simpleBody(40, "")}
	codes, replies := concurrently(t, base+"/v2/models/batched/infer", bodies)
	for i, r := range replies {
		if codes[i] != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, codes[i], r.Error)
		}
		for _, o := range r.Outputs {
			want := int64(10*(i+1) + 1)
			if o.Name == "OUTPUT1" {
				want -= 2
			}
			if len(o.Shape) != 2 || o.Shape[0] != 1 || o.Data[0] != want || o.Data[15] != want {
				t.Fatalf("request %d %s: shape %v data %v, want [1 16] of %d", i, o.Name, o.Shape, o.Data, want)
			}
		}
	}
	st := statsOverHTTP(t, base, "batched").ModelStats[0]
	if st.InferenceCount != 4 || st.ExecutionCount != 1 || len(st.BatchStats) != 1 || st.BatchStats[0].BatchSize != 4 {
		t.Fatalf("stats %+v, want 4 inferences in one execution of batch 4", st)
	}
}

func TestQueuePolicyOverHTTP(t *testing.T) {
	root := writeRepo(t, map[string]testModel{
		// Requests wait up to 300 ms for a preferred batch of 8 that never
		// comes, so they stay queued long enough to fill the queue.
		"small_queue": simpleWith("dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 300000 default_queue_policy { max_queue_size: 2 } }\n"),
		"timeouts":    simpleWith("dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 2000000 default_queue_policy { default_timeout_microseconds: 5000000 allow_timeout_override: true } }\n"),
	})
	base, _ := startServer(t, root, serverOpts{})

	t.Run("queue full", func(t *testing.T) {
		codes, replies := concurrently(t, base+"/v2/models/small_queue/infer", []string{simpleBody(1, ""), simpleBody(2, ""), simpleBody(3, "")})
		full := 0
		for i, c := range codes {
			switch {
			case c == http.StatusServiceUnavailable && replies[i].Error == "Exceeds maximum queue size":
				full++
			case c != http.StatusOK:
				t.Fatalf("request %d: %d %q", i, c, replies[i].Error)
			}
		}
		if full != 1 {
			t.Fatalf("%d requests refused for a full queue, want 1 of 3", full)
		}
		st := statsOverHTTP(t, base, "small_queue").ModelStats[0]
		if st.InferenceStats.Success.Count != 2 || st.InferenceStats.Fail.Count != 0 {
			t.Fatalf("stats %+v: a refused request is not a failure", st)
		}
	})

	t.Run("request timeout", func(t *testing.T) {
		codes, replies := concurrently(t, base+"/v2/models/timeouts/infer", []string{simpleBody(1, `,"parameters":{"timeout":20000}`)})
		if codes[0] != http.StatusServiceUnavailable || replies[0].Error != "Request timeout expired" {
			t.Fatalf("got %d %q, want 503 Request timeout expired", codes[0], replies[0].Error)
		}
		if st := statsOverHTTP(t, base, "timeouts").ModelStats[0]; st.InferenceStats.Fail.Count != 1 {
			t.Fatalf("stats %+v, want one failure", st)
		}
	})
}

func TestWarmupOverHTTP(t *testing.T) {
	// A warmup sample counts in the statistics (one success, one execution)
	// before any client request.
	root := writeRepo(t, map[string]testModel{
		"warm": simpleWith(`model_warmup [ { name: "w" batch_size: 1 count: 1 inputs [
  { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 16 ] random_data: true } },
  { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } } ] } ]
`),
	})
	base, _ := startServer(t, root, serverOpts{})
	st := statsOverHTTP(t, base, "warm").ModelStats[0]
	if st.InferenceStats.Success.Count != 1 || st.ExecutionCount != 1 {
		t.Fatalf("after load: %+v, want one warmup request in one execution", st)
	}
}
