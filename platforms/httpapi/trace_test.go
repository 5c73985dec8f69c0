package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/platforms/trace/tracetest"
)

// traceRepo holds `simple` and `chain`, the two-step ensemble over it.
func traceRepo(t *testing.T) string {
	return servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple"), "chain": servertest.Chain("chain")})
}

func newTraceManager(t *testing.T, cfg trace.Config) *trace.Manager {
	t.Helper()
	m, err := trace.New(cfg, nil)
	must(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

const chainBody = `{"id":"req-7","inputs":[{"name":"IN0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"IN1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

const simpleTraceBody = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

// traceRecord is one triton-mode record.
type traceRecord struct {
	ID         uint64  `json:"id"`
	ModelName  *string `json:"model_name"`
	Version    int64   `json:"model_version"`
	RequestID  string  `json:"request_id"`
	ParentID   uint64  `json:"parent_id"`
	Timestamps []struct {
		Name string `json:"name"`
		Ns   int64  `json:"ns"`
	} `json:"timestamps"`
	Activity string `json:"activity"`
	Tensor   struct {
		Name, Data, Shape, Dtype string
	} `json:"tensor"`
}

func readTrace(t *testing.T, name string) []traceRecord {
	t.Helper()
	b, err := os.ReadFile(name)
	must(t, err)
	var recs []traceRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, b)
	}
	return recs
}

// byID groups records by trace id: the model record, the timestamp names
// in order (their ns must not go back) and the tensor activities.
type traced struct {
	model     string
	version   int64
	requestID string
	parent    uint64
	stamps    []string
	tensors   []string
}

func group(t *testing.T, recs []traceRecord) map[uint64]*traced {
	t.Helper()
	out := map[uint64]*traced{}
	last := map[uint64]int64{}
	for _, r := range recs {
		g := out[r.ID]
		if g == nil {
			g = &traced{}
			out[r.ID] = g
		}
		switch {
		case r.ModelName != nil:
			g.model, g.version, g.requestID, g.parent = *r.ModelName, r.Version, r.RequestID, r.ParentID
		case len(r.Timestamps) == 1:
			ts := r.Timestamps[0]
			if ts.Ns < last[r.ID] {
				t.Errorf("trace %d: %s at %d, before the previous timestamp %d", r.ID, ts.Name, ts.Ns, last[r.ID])
			}
			last[r.ID] = ts.Ns
			g.stamps = append(g.stamps, ts.Name)
		case r.Activity != "":
			g.tensors = append(g.tensors, r.Activity+" "+r.Tensor.Name+" "+r.Tensor.Shape+" "+r.Tensor.Dtype+" "+r.Tensor.Data)
		default:
			t.Errorf("unexpected record %+v", r)
		}
	}
	return out
}

// TestTraceTritonMode runs requests over HTTP with the triton mode on and
// reads the trace file: Triton's records and timestamp names in order, the
// ensemble's steps as child traces naming their parent, TENSORS records,
// and rotation by log frequency set through the settings route.
func TestTraceTritonMode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	cfg := trace.DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = file, trace.LevelTimestamps|trace.LevelTensors, 1
	m := newTraceManager(t, cfg)
	base, _ := startServer(t, traceRepo(t), serverOpts{api: Options{Trace: m}})

	if status, _, body := post(t, base+"/v2/models/chain/infer", chainBody); status != 200 {
		t.Fatalf("chain: %d %s", status, body)
	}
	// A request that fails in validation is not traced; one that is
	// refused by the core after sampling still gets its records.
	if status, _, _ := post(t, base+"/v2/models/simple/infer", `{"inputs":[]}`); status != 400 {
		t.Fatalf("bad request: %d", status)
	}
	must(t, m.Close(context.Background()))
	groups := group(t, readTrace(t, file))
	var top uint64
	var children []uint64
	for id, g := range groups {
		if g.model == "chain" {
			top = id
		} else if g.model == "simple" {
			children = append(children, id)
		}
	}
	if top == 0 || len(children) != 2 {
		t.Fatalf("want one chain trace and two simple children, got %+v", groups)
	}
	tg := groups[top]
	wantTop := []string{"HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"}
	if !slices.Equal(tg.stamps, wantTop) || tg.requestID != "req-7" || tg.version != 1 || tg.parent != 0 {
		t.Errorf("ensemble trace %+v, want stamps %v", tg, wantTop)
	}
	if len(tg.tensors) != 4 || !strings.HasPrefix(tg.tensors[0], "TENSOR_QUEUE_INPUT IN0 1,16 INT32 0,1,2,3") ||
		!strings.HasPrefix(tg.tensors[2], "TENSOR_BACKEND_OUTPUT OUT0 1,16 INT32 0,2,4,6") {
		t.Errorf("ensemble tensors %q", tg.tensors)
	}
	wantChild := []string{"REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"}
	for _, id := range children {
		c := groups[id]
		if c.parent != top || !slices.Equal(c.stamps, wantChild) || c.requestID != "req-7" || len(c.tensors) != 4 {
			t.Errorf("step trace %d: %+v, want parent %d and stamps %v", id, c, top, wantChild)
		}
	}
}

// TestTraceSequenceCompute: a request of a sequence model, which the
// sequence batcher runs on an instance, has the compute timestamps too.
func TestTraceSequenceCompute(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	cfg := trace.DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = file, trace.LevelTimestamps, 1
	m := newTraceManager(t, cfg)
	base, _ := startServer(t, writeRepo(t, sequenceModels(t)), serverOpts{api: Options{Trace: m}})
	if status, _, body := post(t, base+"/v2/models/acc/infer", seqBody("s-1", 5, seqParams(1, true, true))); status != 200 {
		t.Fatalf("acc: %d %s", status, body)
	}
	must(t, m.Close(context.Background()))
	want := []string{"HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
		"COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"}
	groups := group(t, readTrace(t, file))
	if len(groups) != 1 {
		t.Fatalf("%d traces, want 1: %+v", len(groups), groups)
	}
	for _, g := range groups {
		if g.model != "acc" || !slices.Equal(g.stamps, want) {
			t.Errorf("trace %+v, want acc with stamps %v", g, want)
		}
	}
}

// TestTraceRotation sets log_frequency over the settings route and checks
// the indexed files: every log_frequency traces go to <file>.<n>.
func TestTraceRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	cfg := trace.DefaultConfig()
	cfg.File = file
	m := newTraceManager(t, cfg)
	base, _ := startServer(t, traceRepo(t), serverOpts{api: Options{Trace: m}})
	status, _, body := post(t, base+"/v2/trace/setting", `{"trace_level":["TIMESTAMPS"],"trace_rate":"2","log_frequency":"2"}`)
	if status != 200 || !strings.Contains(string(body), `"trace_level":["TIMESTAMPS"],"trace_rate":"2","trace_count":"-1","log_frequency":"2"`) {
		t.Fatalf("%d %s", status, body)
	}
	// Every second request is traced: 8 requests, 4 traces, 2 files.
	for range 8 {
		if status, _, body := post(t, base+"/v2/models/simple/infer", simpleTraceBody); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	for i := range 2 {
		recs := readTrace(t, file+"."+strconv.Itoa(i))
		n := 0
		for _, g := range group(t, recs) {
			if g.model == "simple" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%s.%d holds %d traces, want 2", file, i, n)
		}
	}
	if _, err := os.Stat(file + ".2"); !os.IsNotExist(err) {
		t.Errorf("a third file: %v", err)
	}
	// A per-model level OFF stops the model's traces while the global
	// setting stays on.
	if status, _, body := post(t, base+"/v2/models/simple/trace/setting", `{"trace_level":["OFF"]}`); status != 200 || !strings.Contains(string(body), `"trace_level":["OFF"]`) {
		t.Fatalf("%d %s", status, body)
	}
	for range 4 {
		post(t, base+"/v2/models/simple/infer", simpleTraceBody)
	}
	must(t, m.Close(context.Background()))
	if _, err := os.Stat(file + ".2"); !os.IsNotExist(err) {
		t.Errorf("traces written with the model's level OFF: %v", err)
	}
}

// TestTraceRestricted: the settings routes belong to the trace category.
func TestTraceRestricted(t *testing.T) {
	restricted := map[string]Restriction{}
	must(t, ParseRestriction(restricted, "trace:admin-key=secret"))
	base, _ := startServer(t, traceRepo(t), serverOpts{api: Options{Restricted: restricted}})
	for _, path := range []string{"/v2/trace/setting", "/v2/models/simple/trace/setting"} {
		status, _, body := do(t, http.MethodGet, base+path, nil, nil)
		if status != 403 || string(body) != `{"error":"This API is restricted, expecting header 'admin-key'"}` {
			t.Errorf("%s without the header: %d %s", path, status, body)
		}
		status, _, _ = do(t, http.MethodGet, base+path, http.Header{"Admin-Key": {"secret"}}, nil)
		if status != 200 {
			t.Errorf("%s with the header: %d", path, status)
		}
	}
}

// TestTraceOpenTelemetry exports to an OTLP/HTTP receiver that decodes
// the real protobuf: a client's traceparent is continued through an
// ensemble (rate 0: only requests with a caller's context are traced),
// with Triton's spans, attributes and events.
func TestTraceOpenTelemetry(t *testing.T) {
	rc := tracetest.Start(t)
	cfg, err := trace.ParseConfig([]string{"mode=opentelemetry", "level=TIMESTAMPS", "rate=0",
		"opentelemetry,url=" + rc.URL, "opentelemetry,resource=service.name=inferd-test", "opentelemetry,bsp_schedule_delay=50"}, trace.Deprecated{})
	must(t, err)
	m := newTraceManager(t, cfg)
	base, _ := startServer(t, traceRepo(t), serverOpts{api: Options{Trace: m}})

	status, _, body := do(t, http.MethodGet, base+"/v2/trace/setting", nil, nil)
	if status != 200 || !strings.HasPrefix(string(body), `{"trace_level":["TIMESTAMPS"],"trace_rate":"0","trace_count":"-1","trace_mode":"opentelemetry","url":"`+rc.URL+`","resource":"service.name=inferd-test","bsp_schedule_delay":"50","bsp_max_queue_size":"2048","bsp_max_export_batch_size":"512"}`) {
		t.Fatalf("settings: %d %s", status, body)
	}
	const traceID, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := http.Header{"Traceparent": {"00-" + traceID + "-" + parentSpan + "-00"}, "Tracestate": {"vendor=1"}}
	if status, _, body := do(t, http.MethodPost, base+"/v2/models/chain/infer", h, strings.NewReader(chainBody)); status != 200 {
		t.Fatalf("chain: %d %s", status, body)
	}
	// Without a caller's context and at rate 0, nothing is traced.
	post(t, base+"/v2/models/simple/infer", simpleTraceBody)
	must(t, m.Close(context.Background()))
	spans := rc.Wait(6, 5*time.Second)
	checkEnsembleSpans(t, spans, traceID, parentSpan, "HTTP")
}

// checkEnsembleSpans checks the spans of one chain request: InferRequest
// under the caller's span, the ensemble's model span under it, and each
// step's model span under the ensemble's, with a compute span of its own.
func checkEnsembleSpans(t *testing.T, spans []tracetest.Span, traceID, parentSpan, proto string) {
	t.Helper()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6 (InferRequest, chain, 2 x simple, 2 x compute): %+v", len(spans), spans)
	}
	byName := map[string][]tracetest.Span{}
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, want the caller's %s", s.Name, s.TraceID, traceID)
		}
		if s.Resource["service.name"] != "inferd-test" {
			t.Errorf("resource %v", s.Resource)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	root, ens := byName["InferRequest"], byName["chain"]
	if len(root) != 1 || len(ens) != 1 || len(byName["simple"]) != 2 || len(byName["compute"]) != 2 {
		t.Fatalf("span names %v", byName)
	}
	if root[0].ParentID != parentSpan {
		t.Errorf("InferRequest's parent %s, want the caller's span %s", root[0].ParentID, parentSpan)
	}
	wantRecv := []string{proto + "_RECV_START", proto + "_RECV_END", proto + "_SEND_START", proto + "_SEND_END"}
	if proto == "GRPC" {
		wantRecv = []string{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"}
	}
	if !slices.Equal(root[0].Events, wantRecv) {
		t.Errorf("InferRequest events %v, want %v", root[0].Events, wantRecv)
	}
	e := ens[0]
	if e.ParentID != root[0].SpanID || e.Attrs["triton.model_name"] != "chain" || e.Attrs["triton.model_version"] != "1" ||
		e.Attrs["triton.request_id"] != "req-7" || e.Attrs["triton.trace_parent_id"] != "0" ||
		!slices.Equal(e.Events, []string{"REQUEST_START", "QUEUE_START", "REQUEST_END"}) {
		t.Errorf("ensemble span %+v", e)
	}
	steps := map[string]bool{}
	for _, s := range byName["simple"] {
		steps[s.SpanID] = true
		if s.ParentID != e.SpanID || s.Attrs["triton.trace_parent_id"] != e.Attrs["triton.trace_id"] || s.Start < e.Start || s.End > e.End {
			t.Errorf("step span %+v, want a child of %s within it", s, e.SpanID)
		}
	}
	for _, c := range byName["compute"] {
		if !steps[c.ParentID] || !slices.Equal(c.Events, []string{"COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"}) {
			t.Errorf("compute span %+v", c)
		}
	}
}

// blsPy calls `simple` through BLS, passing its request's trace() as
// Triton's model.py does to have the call traced as a child.
const blsPy = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            r = pb_utils.InferenceRequest(model_name="simple", requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0"), pb_utils.get_input_tensor_by_name(request, "INPUT1")],
                trace=request.trace()).exec()
            if r.has_error():
                raise pb_utils.TritonModelException(r.error().message())
            responses.append(pb_utils.InferenceResponse(r.output_tensors()))
        return responses
`

// TestTraceBLS: a BLS call made for a traced request is a child trace
// naming it as its parent.
func TestTraceBLS(t *testing.T) {
	root := traceRepo(t)
	must(t, os.MkdirAll(filepath.Join(root, "bls", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "bls", "1", "model.py"), []byte(blsPy), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "bls", "config.pbtxt"), []byte(`backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`), 0o644))
	file := filepath.Join(t.TempDir(), "trace.json")
	cfg := trace.DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = file, trace.LevelTimestamps, 1
	m := newTraceManager(t, cfg)
	base, _ := startServer(t, root, serverOpts{api: Options{Trace: m}, backends: []core.Backend{pythonBackendT(t)}})
	if status, _, body := post(t, base+"/v2/models/bls/infer", simpleTraceBody); status != 200 {
		t.Fatalf("bls: %d %s", status, body)
	}
	must(t, m.Close(context.Background()))
	groups := group(t, readTrace(t, file))
	var parent, child uint64
	for id, g := range groups {
		switch g.model {
		case "bls":
			parent = id
		case "simple":
			child = id
		}
	}
	if parent == 0 || child == 0 || groups[child].parent != parent {
		t.Fatalf("want a simple trace under the bls one: %+v", groups)
	}
	if c := groups[child]; !slices.Equal(c.stamps, []string{"REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"}) {
		t.Errorf("BLS child stamps %v", c.stamps)
	}
}

// FuzzTraceUpdate feeds settings bodies to the HTTP parser: it never
// panics, and every error carries a Triton class (a status).
func FuzzTraceUpdate(f *testing.F) {
	for _, s := range []string{`{}`, `{"trace_rate":"5"}`, `{"trace_rate":5}`, `{"trace_level":["OFF","TIMESTAMPS"]}`, `{"trace_level":null}`,
		`{"trace_file":"x"}`, `{"trace_count":"-2"}`, `{"log_frequency":"1e3"}`, `[]`, `{"trace_level":[1]}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := traceUpdate(body); err != nil && errorStatus(err) < 400 {
			t.Fatalf("%q: %v with status %d", body, err, errorStatus(err))
		}
	})
}
