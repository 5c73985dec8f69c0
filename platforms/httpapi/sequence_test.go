package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// sequenceModels are stateful models over the real ONNX Runtime: `acc`
// keeps each sequence's running sum in implicit state (8 slots, so 64
// sequences go through the backlog), `controls` and `controls_str` echo
// the control inputs the sequence batcher feeds them (a UINT64 and a
// STRING CORRID), and `simple` has no sequence batching.
func sequenceModels(t testing.TB) map[string]testModel {
	return map[string]testModel{
		"acc": {config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), onnx: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"controls": {config: onnxbuild.SequenceControlsConfig(onnxbuild.Int32, onnxbuild.Uint64),
			onnx: onnxbuild.Must(onnxbuild.SequenceControls(onnxbuild.Int32, onnxbuild.Uint64))},
		"controls_str": {config: onnxbuild.SequenceControlsConfig(onnxbuild.Int32, onnxbuild.String),
			onnx: onnxbuild.Must(onnxbuild.SequenceControls(onnxbuild.Int32, onnxbuild.String))},
		"simple": standardModels(t)["simple"],
	}
}

// seqParams is an infer request's "parameters" member for one step of a
// sequence, as Triton's Python client writes it: the id (a JSON number or
// string), then both flags.
func seqParams(id any, start, end bool) string {
	b, _ := json.Marshal(id)
	return fmt.Sprintf(`,"parameters":{"sequence_id":%s,"sequence_start":%t,"sequence_end":%t}`, b, start, end)
}

// seqBody is a JSON request of one INT32 value to a model whose input is
// INPUT [1], with request id rid and extra members appended.
func seqBody(rid string, v int32, extra string) string {
	return fmt.Sprintf(`{"id":%q,"inputs":[{"name":"INPUT","shape":[1,1],"datatype":"INT32","data":[%d]}]%s}`, rid, v, extra)
}

// seqReply is a JSON infer reply whose outputs may be numbers or strings.
type seqReply struct {
	ID      string `json:"id"`
	Error   string `json:"error"`
	Outputs []struct {
		Name  string  `json:"name"`
		Shape []int64 `json:"shape"`
		Data  []any   `json:"data"` // json.Number or string
	} `json:"outputs"`
}

// output is the one element of the named output as text, or fails t.
func (r seqReply) output(t testing.TB, name string) string {
	t.Helper()
	for _, o := range r.Outputs {
		if o.Name == name {
			if len(o.Data) != 1 || len(o.Shape) != 2 || o.Shape[0] != 1 || o.Shape[1] != 1 {
				t.Fatalf("%s: shape %v data %v, want one element of shape [1 1]", name, o.Shape, o.Data)
			}
			return fmt.Sprint(o.Data[0])
		}
	}
	t.Fatalf("no output %s in %+v", name, r)
	return ""
}

// postJSON posts body over client and returns the status and the decoded
// reply.
func postJSON(client *http.Client, url, body string) (int, seqReply, error) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, seqReply{}, err
	}
	defer resp.Body.Close()
	var r seqReply
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		err = d.Decode(&r)
	}
	if err != nil {
		return resp.StatusCode, r, fmt.Errorf("reply %q: %w", b, err)
	}
	return resp.StatusCode, r, nil
}

// TestSequencesInterleavedOverHTTP runs 64 sequences at once against the
// implicit-state accumulator, each client sending its next step when the
// last is answered: every reply is that sequence's running sum, whatever
// the other sequences did, with uint64 ids (one past int64's range) and
// with string ids.
func TestSequencesInterleavedOverHTTP(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, sequenceModels(t)), serverOpts{})
	url := base + "/v2/models/acc/infer"
	const sequences, steps = 64, 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sequences}}
	for _, kind := range []struct {
		name string
		id   func(i int) any
	}{
		{"uint64 ids", func(i int) any { return uint64(1)<<63 + uint64(i) }},
		{"string ids", func(i int) any { return fmt.Sprintf("sequence-%d", i) }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range sequences {
				wg.Go(func() {
					id, sum := kind.id(i), int64(0)
					for step := range steps {
						v := int32(i*100 + step + 1)
						sum += int64(v)
						rid := fmt.Sprintf("%v/%d", id, step)
						code, r, err := postJSON(client, url, seqBody(rid, v, seqParams(id, step == 0, step == steps-1)))
						if err != nil || code != http.StatusOK {
							t.Errorf("sequence %v step %d: %d %q %v", id, step, code, r.Error, err)
							return
						}
						if got := r.output(t, "OUTPUT"); r.ID != rid || got != strconv.FormatInt(sum, 10) {
							t.Errorf("sequence %v step %d: id %q OUTPUT %v, want %q %d", id, step, r.ID, got, rid, sum)
							return
						}
						for _, o := range r.Outputs {
							if o.Name != "OUTPUT" {
								t.Errorf("sequence %v step %d: the state output %s reached the client", id, step, o.Name)
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
	st := statsOverHTTP(t, base, "acc").ModelStats[0]
	if n := st.InferenceStats.Success.Count; n != 2*sequences*steps {
		t.Errorf("%d successful inferences, want %d", n, 2*sequences*steps)
	}
	if st.ExecutionCount > st.InferenceCount || st.InferenceCount != 2*sequences*steps {
		t.Errorf("%d executions for %d inferences", st.ExecutionCount, st.InferenceCount)
	}
}

// TestSequenceControlsOverHTTP: the control inputs the model sees for each
// step of a sequence sent over HTTP, a number id and a string id: START on
// the first, END on the last, READY on every one, and the id as CORRID.
func TestSequenceControlsOverHTTP(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, sequenceModels(t)), serverOpts{})
	for _, tc := range []struct {
		model string
		id    any
	}{
		{"controls", uint64(18446744073709551615)},
		{"controls_str", "a-string-id"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			for step := range 3 {
				code, r, err := postJSON(http.DefaultClient, base+"/v2/models/"+tc.model+"/infer", seqBody("r", int32(step+5), seqParams(tc.id, step == 0, step == 2)))
				if err != nil || code != http.StatusOK {
					t.Fatalf("step %d: %d %q %v", step, code, r.Error, err)
				}
				flag := func(b bool) string {
					if b {
						return "1"
					}
					return "0"
				}
				for name, want := range map[string]string{
					"OUTPUT": strconv.Itoa(step + 5), "OUTPUT_START": flag(step == 0), "OUTPUT_END": flag(step == 2),
					"OUTPUT_READY": "1", "OUTPUT_CORRID": fmt.Sprint(tc.id),
				} {
					if got := r.output(t, name); got != want {
						t.Errorf("step %d: %s = %v, want %v", step, name, got, want)
					}
				}
			}
		})
	}
}

// TestSequenceLikeTritonsClient sends what Triton's
// simple_http_sequence_sync_infer_client.py sends (triton-inference-server/client
// src/python/examples): two number sequences and a string one, one after
// the other, each step a binary INT32 input with the output asked for in
// binary, and the sequence's parameters.
func TestSequenceLikeTritonsClient(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, sequenceModels(t)), serverOpts{})
	infer := binaryInferer()
	for _, sq := range servertest.ClientSequences() {
		id, _ := json.Marshal(sq.ID)
		for i, v := range sq.Steps {
			header := fmt.Sprintf(`{"inputs":[{"name":"INPUT","shape":[1,1],"datatype":"INT32","parameters":{"binary_data_size":4}}],"outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}}],"parameters":{"sequence_id":%s,"sequence_start":%t,"sequence_end":%t}}`,
				id, i == 0, i == len(sq.Steps)-1)
			outs, err := infer(base+"/v2/models/acc/infer", header, int32Bytes(v))
			if err != nil {
				t.Fatalf("sequence %v step %d: %v", sq.ID, i, err)
			}
			if got := outs["OUTPUT"]; len(got) != 4 || int32(binary.LittleEndian.Uint32(got)) != sq.Sums[i] {
				t.Fatalf("sequence %v step %d: OUTPUT %v, want %d", sq.ID, i, got, sq.Sums[i])
			}
		}
	}
}

// TestSequenceErrorsOverHTTP: each way a request can miss a sequence,
// answered with Triton's text and status; the model keeps serving.
func TestSequenceErrorsOverHTTP(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, sequenceModels(t)), serverOpts{})
	long := strings.Repeat("x", 129)
	for _, tc := range []struct {
		name, model, body string
		code              int
		msg               string
	}{
		{"no correlation id", "acc", seqBody("r", 1, ""), 400,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"zero id", "acc", seqBody("r", 1, seqParams(0, true, false)), 400,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"empty string id", "acc", seqBody("r", 1, seqParams("", true, false)), 400,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"no START for an unknown number id", "acc", seqBody("r", 1, seqParams(77, false, false)), 400,
			"inference request for sequence 77 to model 'acc' must specify the START flag on the first request of the sequence"},
		{"no START for an unknown string id", "acc", seqBody("r", 1, seqParams("abc", false, true)), 400,
			"inference request for sequence abc to model 'acc' must specify the START flag on the first request of the sequence"},
		{"a batch of two", "acc", `{"inputs":[{"name":"INPUT","shape":[2,1],"datatype":"INT32","data":[1,2]}]` + seqParams(5, true, false) + `}`, 400,
			"inference request to model 'acc' must specify batch-size 1 due to requirements of sequence batcher"},
		{"a string id for a UINT64 CORRID", "controls", seqBody("r9", 1, seqParams("abc", true, false)), 400,
			"[request id: r9] sequence batching control 'CORRID' data-type is 'BYTES', but model 'controls' expects 'UINT64'"},
		{"a number id for a STRING CORRID", "controls_str", seqBody("", 1, seqParams(3, true, false)), 400,
			"[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'controls_str' expects 'BYTES'"},
		{"a string id over 128 bytes", "acc", seqBody("r", 1, seqParams(long, true, false)), 501,
			"string correlation ID cannot be longer than 128 characters"},
		{"a bool id", "acc", seqBody("r", 1, `,"parameters":{"sequence_id":true}`), 500,
			"Unable to parse 'sequence_id': attempt to access JSON non-string as string"},
		{"a negative id", "acc", seqBody("r", 1, `,"parameters":{"sequence_id":-3}`), 500,
			"Unable to parse 'sequence_id': attempt to access JSON non-string as string"},
		{"a number START", "acc", seqBody("r", 1, `,"parameters":{"sequence_id":3,"sequence_start":1}`), 500,
			"Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"},
		{"a string END", "acc", seqBody("r", 1, `,"parameters":{"sequence_id":3,"sequence_end":"true"}`), 500,
			"Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := post(t, base+"/v2/models/"+tc.model+"/infer", tc.body)
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			must(t, enc.Encode(map[string]string{"error": tc.msg}))
			if code != tc.code || !bytes.Equal(body, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
				t.Fatalf("got %d %s, want %d %s", code, body, tc.code, want.Bytes())
			}
		})
	}

	t.Run("a sequence that ended needs a new START", func(t *testing.T) {
		url := base + "/v2/models/acc/infer"
		for _, step := range []struct {
			start, end bool
			code       int
			want       string
		}{
			{true, false, 200, `"data":[4]`},
			{false, true, 200, `"data":[8]`},
			{false, false, 400, `{"error":"inference request for sequence 42 to model 'acc' must specify the START flag on the first request of the sequence"}`},
			{true, true, 200, `"data":[4]`}, // a new sequence under the same id starts from zero
		} {
			code, _, body := post(t, url, seqBody("r", 4, seqParams(42, step.start, step.end)))
			if code != step.code || !strings.Contains(string(body), step.want) {
				t.Fatalf("start %t end %t: %d %s, want %d with %s", step.start, step.end, code, body, step.code, step.want)
			}
		}
	})

	t.Run("a model without sequence batching ignores the parameters", func(t *testing.T) {
		for _, params := range []string{seqParams(7, true, false), seqParams("s", false, false), seqParams(0, false, true)} {
			code, _, body := post(t, base+"/v2/models/simple/infer", simpleBody(3, params))
			if code != 200 || !strings.Contains(string(body), `"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[4,`) {
				t.Fatalf("%s: %d %s", params, code, body)
			}
		}
	})
}

// TestSequenceBacklogTimeoutOverHTTP: with the one slot held by an open
// sequence, a new sequence waits in the backlog, and its request's
// "timeout" passing there answers Triton's 503; the held sequence goes on.
func TestSequenceBacklogTimeoutOverHTTP(t *testing.T) {
	cfg := onnxbuild.AccumulatorConfig(onnxbuild.Int32)
	if !strings.Contains(cfg, "max_batch_size: 8") {
		t.Fatalf("the accumulator's config has no max_batch_size 8:\n%s", cfg)
	}
	base, _ := startServer(t, writeRepo(t, map[string]testModel{"acc1": {
		config: strings.Replace(cfg, "max_batch_size: 8", "max_batch_size: 1", 1),
		onnx:   onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)),
	}}), serverOpts{})
	url := base + "/v2/models/acc1/infer"
	if code, _, body := post(t, url, seqBody("a", 5, seqParams(1, true, false))); code != 200 {
		t.Fatalf("sequence 1: %d %s", code, body)
	}
	code, _, body := post(t, url, seqBody("b", 5, `,"parameters":{"sequence_id":2,"sequence_start":true,"timeout":1000}`))
	if want := `{"error":"timeout of the corresponding sequence has been expired"}`; code != 503 || string(body) != want {
		t.Fatalf("backlogged sequence: %d %s, want 503 %s", code, body, want)
	}
	if code, _, body := post(t, url, seqBody("a", 6, seqParams(1, false, true))); code != 200 || !strings.Contains(string(body), `"data":[11]`) {
		t.Fatalf("sequence 1 after: %d %s", code, body)
	}
}
