package grpcapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/platforms/trace/tracetest"
)

type traceValues map[string][]string

func traceSetting(c context.Context, h *harness, model string, settings traceValues) (traceValues, error) {
	req := &pb.TraceSettingRequest{ModelName: model, Settings: map[string]*pb.TraceSettingRequest_SettingValue{}}
	for k, v := range settings {
		req.Settings[k] = &pb.TraceSettingRequest_SettingValue{Value: v}
	}
	resp, err := h.client.TraceSetting(c, req)
	if err != nil {
		return nil, err
	}
	out := traceValues{}
	for k, v := range resp.GetSettings() {
		out[k] = v.GetValue()
	}
	return out, nil
}

func wantSettings(t *testing.T, got traceValues, want traceValues) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("settings %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Fatalf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

var defaultTraceSettings = traceValues{"trace_level": {"OFF"}, "trace_rate": {"1000"}, "trace_count": {"-1"},
	"log_frequency": {"0"}, "trace_file": {""}, "trace_mode": {"triton"}}

func conformanceTrace27(t *testing.T, c context.Context, h *harness) {
	got, err := traceSetting(c, h, "", nil)
	servertest.Must(t, err)
	wantSettings(t, got, defaultTraceSettings)
}

func conformanceTrace28(t *testing.T, c context.Context, h *harness) {
	_, err := traceSetting(c, h, "", traceValues{"trace_file": {"x"}})
	wantStatus(t, err, codes.Unimplemented, "trace file location can not be updated through network protocol")
}

func conformanceTrace29(t *testing.T, c context.Context, h *harness) {
	_, err := traceSetting(c, h, "", traceValues{"trace_rate": {"1", "2"}})
	wantStatus(t, err, codes.InvalidArgument, "expect only 1 value for 'trace_rate'")
	_, err = traceSetting(c, h, "", traceValues{"trace_rate": {"x"}})
	wantStatus(t, err, codes.InvalidArgument, "Unable to parse 'trace_rate', got: x")
}

func conformanceTrace30(t *testing.T, c context.Context, h *harness) {
	_, err := traceSetting(c, h, "nope", traceValues{"trace_rate": {"5"}})
	wantStatus(t, err, codes.InvalidArgument, "Request for unknown model : nope")
}

// TestTraceSetting walks TraceSetting's rules beyond TestConformance's cases, in
// order on one server: each error, empty lists falling back, unknown keys
// and levels ignored, a model's own values, and the restriction.
func TestTraceSetting(t *testing.T) {
	cfg := trace.DefaultConfig()
	cfg.File = filepath.Join(t.TempDir(), "trace.json")
	m, err := trace.New(cfg, nil)
	servertest.Must(t, err)
	defer m.Close(context.Background())
	h := start(t, servertest.Options{}, Options{Trace: m})
	c := ctx(t)
	for _, tc := range []struct {
		name     string
		model    string
		settings traceValues
		code     codes.Code
		msg      string
		want     traceValues // checked when set
	}{
		{name: "unknown model, no settings", model: "nope", code: codes.InvalidArgument, msg: "Request for unknown model : nope"},
		{name: "OFF with another", settings: traceValues{"trace_level": {"OFF", "TENSORS"}}, code: codes.InvalidArgument, msg: "Expect only one trace level 'OFF' is specified"},
		{name: "count below -1", settings: traceValues{"trace_count": {"-2"}}, code: codes.InvalidArgument, msg: "Unable to parse 'trace_count'. Expecting value >= -1, got: -2"},
		{name: "count out of range", settings: traceValues{"trace_count": {"2147483648"}}, code: codes.InvalidArgument, msg: "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 2147483648"},
		{name: "log_frequency out of range", settings: traceValues{"log_frequency": {"-99999999999"}}, code: codes.InvalidArgument, msg: "Unable to parse 'log_frequency', value is out of range [ 0, 4294967295 ], got: -99999999999"},
		{name: "two log frequencies", settings: traceValues{"log_frequency": {"1", "2"}}, code: codes.InvalidArgument, msg: "expect only 1 value for 'log_frequency'"},
		{name: "two counts", settings: traceValues{"trace_count": {"1", "2"}}, code: codes.InvalidArgument, msg: "expect only 1 value for 'trace_count'"},
		{name: "file checked first", settings: traceValues{"trace_file": nil, "trace_rate": {"x"}}, code: codes.Unimplemented, msg: "trace file location can not be updated through network protocol"},
		{name: "unknown keys and levels", settings: traceValues{"colour": {"red"}, "trace_level": {"LOUD"}},
			want: traceValues{"trace_level": {"OFF"}, "trace_rate": {"1000"}, "trace_count": {"-1"}, "log_frequency": {"0"}, "trace_file": {cfg.File}, "trace_mode": {"triton"}}},
		{name: "levels and values", settings: traceValues{"trace_level": {"TENSORS", "TIMESTAMPS"}, "trace_rate": {"3 per"}, "trace_count": {"9"}, "log_frequency": {"2"}},
			want: traceValues{"trace_level": {"TIMESTAMPS", "TENSORS"}, "trace_rate": {"3"}, "trace_count": {"9"}, "log_frequency": {"2"}, "trace_file": {cfg.File}, "trace_mode": {"triton"}}},
		{name: "a model follows the global setting", model: "simple", settings: traceValues{"trace_rate": {"4"}},
			want: traceValues{"trace_level": {"TIMESTAMPS", "TENSORS"}, "trace_rate": {"4"}, "trace_count": {"9"}, "log_frequency": {"2"}, "trace_file": {cfg.File}, "trace_mode": {"triton"}}},
		{name: "an empty list clears the model's value", model: "simple", settings: traceValues{"trace_rate": nil},
			want: traceValues{"trace_level": {"TIMESTAMPS", "TENSORS"}, "trace_rate": {"3"}, "trace_count": {"9"}, "log_frequency": {"2"}, "trace_file": {cfg.File}, "trace_mode": {"triton"}}},
		{name: "count 0 while tracing is refused", settings: traceValues{"trace_count": {"0"}}, code: codes.InvalidArgument, msg: "Attempting to set invalid trace setting :"},
		{name: "empty lists put back the start-up values", settings: traceValues{"trace_level": nil, "trace_rate": nil, "trace_count": nil, "log_frequency": nil},
			want: traceValues{"trace_level": {"OFF"}, "trace_rate": {"1000"}, "trace_count": {"-1"}, "log_frequency": {"0"}, "trace_file": {cfg.File}, "trace_mode": {"triton"}}},
	} {
		got, err := traceSetting(c, h, tc.model, tc.settings)
		if tc.msg != "" {
			wantStatus(t, err, tc.code, tc.msg)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantSettings(t, got, tc.want)
	}

	restricted := start(t, servertest.Options{}, Options{Restricted: map[string]Restriction{"trace": {Key: "admin", Value: "1"}}})
	_, err = traceSetting(c, restricted, "", nil)
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-admin'")
	_, err = traceSetting(metadata.AppendToOutgoingContext(c, "triton-grpc-protocol-admin", "1"), restricted, "", nil)
	servertest.Must(t, err)
}

func chainRequest() *pb.ModelInferRequest {
	a, b := simpleInputs()
	return &pb.ModelInferRequest{ModelName: "chain", Id: "req-7", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "IN0", Datatype: "INT32", Shape: []int64{1, 16}},
		{Name: "IN1", Datatype: "INT32", Shape: []int64{1, 16}},
	}, RawInputContents: [][]byte{int32s(a), int32s(b)}}
}

func traceRepo(t *testing.T) string {
	return servertest.WriteRepo(t, map[string]servertest.Model{"simple": simpleModel(), "chain": servertest.Chain("chain")})
}

// TestTraceOpenTelemetry continues a client's trace, sent as gRPC
// metadata, through an ensemble, as an OTLP/HTTP receiver decoding the
// real protobuf sees it.
func TestTraceOpenTelemetry(t *testing.T) {
	rc := tracetest.Start(t)
	cfg, err := trace.ParseConfig([]string{"mode=opentelemetry", "level=TIMESTAMPS", "rate=1000", "opentelemetry,url=" + rc.URL}, trace.Deprecated{})
	servertest.Must(t, err)
	m, err := trace.New(cfg, nil)
	servertest.Must(t, err)
	h := start(t, servertest.Options{Repo: traceRepo(t)}, Options{Trace: m})
	c := ctx(t)
	const traceID, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	md := metadata.AppendToOutgoingContext(c, "traceparent", "00-"+traceID+"-"+parentSpan+"-01")
	if _, err := h.client.ModelInfer(md, chainRequest()); err != nil {
		t.Fatal(err)
	}
	// The rate (1 in 1000) does not sample a request without a context.
	if _, err := h.client.ModelInfer(c, simpleRequest(true)); err != nil {
		t.Fatal(err)
	}
	servertest.Must(t, m.Close(context.Background()))
	spans := rc.Wait(6, 5*time.Second)
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6: %+v", len(spans), spans)
	}
	ids := map[string]tracetest.Span{}
	for _, s := range spans {
		ids[s.SpanID] = s
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, want the caller's %s", s.Name, s.TraceID, traceID)
		}
		if s.Resource["service.name"] != trace.DefaultServiceName {
			t.Errorf("resource %v", s.Resource)
		}
	}
	// Each span's ancestry leads to the caller's span: compute → simple →
	// chain → InferRequest → caller.
	want := map[string]string{"compute": "simple", "simple": "chain", "chain": "InferRequest"}
	for _, s := range spans {
		p, ok := ids[s.ParentID]
		switch {
		case s.Name == "InferRequest":
			if s.ParentID != parentSpan || !slices.Equal(s.Events, []string{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"}) {
				t.Errorf("InferRequest %+v", s)
			}
		case !ok || p.Name != want[s.Name]:
			t.Errorf("span %s's parent is %q, want %s", s.Name, p.Name, want[s.Name])
		}
	}
}

// TestTraceStream traces ModelStreamInfer requests in triton mode: each
// request of the stream is sampled on its own and finished when its
// response is written.
func TestTraceStream(t *testing.T) {
	cfg := trace.DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = filepath.Join(t.TempDir(), "trace.json"), trace.LevelTimestamps, 1
	m, err := trace.New(cfg, nil)
	servertest.Must(t, err)
	h := start(t, servertest.Options{Repo: traceRepo(t)}, Options{Trace: m})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	for range 3 {
		servertest.Must(t, st.Send(simpleRequest(true)))
		resp, err := st.Recv()
		servertest.Must(t, err)
		if resp.GetErrorMessage() != "" {
			t.Fatal(resp.GetErrorMessage())
		}
	}
	servertest.Must(t, st.CloseSend())
	servertest.Must(t, m.Close(context.Background()))
	b, err := os.ReadFile(cfg.File)
	servertest.Must(t, err)
	var recs []struct {
		ID         uint64  `json:"id"`
		Model      *string `json:"model_name"`
		Timestamps []struct {
			Name string `json:"name"`
		} `json:"timestamps"`
	}
	servertest.Must(t, json.Unmarshal(b, &recs))
	stamps := map[uint64][]string{}
	models := 0
	for _, r := range recs {
		if r.Model != nil {
			models++
		}
		for _, ts := range r.Timestamps {
			stamps[r.ID] = append(stamps[r.ID], ts.Name)
		}
	}
	want := []string{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"}
	if models != 3 || len(stamps) != 3 {
		t.Fatalf("%d model records over %d traces, want 3: %s", models, len(stamps), b)
	}
	for id, s := range stamps {
		if !slices.Equal(s, want) {
			t.Errorf("trace %d: %v, want %v", id, s, want)
		}
	}
}
