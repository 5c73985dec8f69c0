package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// seqEnsembleModels: `pair`, a stateless AddSub over [1] (OUTPUT0 = sum,
// OUTPUT1 = difference), the implicit-state accumulator `acc`, and
// `seq_ens`, an ensemble of the two: pair(IN0, IN1) → acc(sum) → RUNNING,
// the running sum of IN0+IN1 over the sequence, with DIFF beside it.
func seqEnsembleModels() map[string]testModel {
	return map[string]testModel{
		"pair": {config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, onnx: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 1))},
		"acc": {config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), onnx: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"seq_ens": {config: servertest.EnsembleConfig("seq_ens", 8,
			[]string{"IN0:TYPE_INT32:[ 1 ]", "IN1:TYPE_INT32:[ 1 ]"}, []string{"RUNNING:TYPE_INT32:[ 1 ]", "DIFF:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "pair", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=sum", "OUTPUT1=DIFF"}},
			servertest.Step{Model: "acc", In: []string{"INPUT=sum"}, Out: []string{"OUTPUT=RUNNING"}}),
			files: map[string]string{"1/.keep": ""}},
	}
}

// pairBody is a JSON request of IN0 = a and IN1 = b, with extra members.
func pairBody(rid string, a, b int32, extra string) string {
	return fmt.Sprintf(`{"id":%q,"inputs":[{"name":"IN0","shape":[1,1],"datatype":"INT32","data":[%d]},`+
		`{"name":"IN1","shape":[1,1],"datatype":"INT32","data":[%d]}]%s}`, rid, a, b, extra)
}

// TestSequenceEnsembleOverHTTP: 16 interleaved sequences through an
// ensemble whose second step is the stateful accumulator. The ensemble
// passes each request's correlation id and flags to its steps
// (triton-inference-server/core src/ensemble_scheduler/ensemble_scheduler.cc
// sets them on every step's request), so each reply is its own sequence's
// running sum. A step's sequence error reaches the client in Triton's
// words, named by the ensemble, and counts as one failure of the ensemble
// (OTHER) but none of the accumulator, which refused it before queueing it.
func TestSequenceEnsembleOverHTTP(t *testing.T) {
	base, srv := startServer(t, writeRepo(t, seqEnsembleModels()), serverOpts{})
	url := base + "/v2/models/seq_ens/infer"
	const sequences, steps = 16, 6
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sequences}}
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Go(func() {
			var id any = uint64(1000 + i)
			if i%2 == 1 {
				id = fmt.Sprintf("ens-%d", i)
			}
			sum := int64(0)
			for step := range steps {
				a, b := int32(i*10+step), int32(step+1)
				sum += int64(a + b)
				rid := fmt.Sprintf("%v/%d", id, step)
				code, r, err := postJSON(client, url, pairBody(rid, a, b, seqParams(id, step == 0, step == steps-1)))
				if err != nil || code != http.StatusOK {
					t.Errorf("sequence %v step %d: %d %q %v", id, step, code, r.Error, err)
					return
				}
				if got := r.output(t, "RUNNING"); r.ID != rid || got != strconv.FormatInt(sum, 10) {
					t.Errorf("sequence %v step %d: id %q RUNNING %v, want %q %d", id, step, r.ID, got, rid, sum)
					return
				}
				if got := r.output(t, "DIFF"); got != strconv.Itoa(int(a-b)) {
					t.Errorf("sequence %v step %d: DIFF %v, want %d", id, step, got, a-b)
				}
			}
		})
	}
	wg.Wait()

	for _, tc := range []struct {
		name, params, msg string
	}{
		{"no START", seqParams(77, false, false),
			"in ensemble 'seq_ens', inference request for sequence 77 to model 'acc' must specify the START flag on the first request of the sequence"},
		{"no correlation id", "",
			"in ensemble 'seq_ens', inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
	} {
		code, _, body := post(t, url, pairBody("bad", 1, 2, tc.params))
		if want := `{"error":"` + tc.msg + `"}`; code != http.StatusBadRequest || string(body) != want {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, code, body, want)
		}
	}

	const ok = sequences * steps
	for _, tc := range []struct {
		model           string
		success, failed uint64
	}{
		{"seq_ens", ok, 2},
		{"pair", ok + 2, 0}, // the failed requests' first step ran
		{"acc", ok, 0},
	} {
		st := statsOverHTTP(t, base, tc.model).ModelStats[0]
		if st.InferenceStats.Success.Count != tc.success || st.InferenceStats.Fail.Count != tc.failed || st.InferenceCount != tc.success {
			t.Errorf("%s: %d successes, %d failures, %d inferences; want %d, %d, %d", tc.model,
				st.InferenceStats.Success.Count, st.InferenceStats.Fail.Count, st.InferenceCount, tc.success, tc.failed, tc.success)
		}
	}
	text := scrape(t, srv)
	for _, want := range []string{
		`nv_inference_request_failure{model="seq_ens",reason="OTHER",version="1"} 2`,
		`nv_inference_request_failure{model="seq_ens",reason="BACKEND",version="1"} 0`,
		`nv_inference_request_failure{model="acc",reason="OTHER",version="1"} 0`,
		fmt.Sprintf(`nv_inference_request_success{model="acc",version="1"} %d`, ok),
		fmt.Sprintf(`nv_inference_request_success{model="seq_ens",version="1"} %d`, ok),
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}
