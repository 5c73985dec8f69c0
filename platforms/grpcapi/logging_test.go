package grpcapi

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/protocol"
)

func boolSetting(v bool) *pb.LogSettingsRequest_SettingValue {
	return &pb.LogSettingsRequest_SettingValue{ParameterChoice: &pb.LogSettingsRequest_SettingValue_BoolParam{BoolParam: v}}
}

func uintSetting(v uint32) *pb.LogSettingsRequest_SettingValue {
	return &pb.LogSettingsRequest_SettingValue{ParameterChoice: &pb.LogSettingsRequest_SettingValue_Uint32Param{Uint32Param: v}}
}

func stringSetting(v string) *pb.LogSettingsRequest_SettingValue {
	return &pb.LogSettingsRequest_SettingValue{ParameterChoice: &pb.LogSettingsRequest_SettingValue_StringParam{StringParam: v}}
}

// logState reads a LogSettings answer back, checking that it has exactly
// the six keys, each with its type.
func logState(t *testing.T, resp *pb.LogSettingsResponse) (file string, st logging.State) {
	t.Helper()
	s := resp.GetSettings()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range s {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, []string{"log_error", "log_file", "log_format", "log_info", "log_verbose_level", "log_warning"}) {
		t.Fatalf("keys %v", keys)
	}
	flag := func(k string) bool {
		p, ok := s[k].GetParameterChoice().(*pb.LogSettingsResponse_SettingValue_BoolParam)
		if !ok {
			t.Fatalf("%s is %T", k, s[k].GetParameterChoice())
		}
		return p.BoolParam
	}
	str := func(k string) string {
		p, ok := s[k].GetParameterChoice().(*pb.LogSettingsResponse_SettingValue_StringParam)
		if !ok {
			t.Fatalf("%s is %T", k, s[k].GetParameterChoice())
		}
		return p.StringParam
	}
	v, ok := s["log_verbose_level"].GetParameterChoice().(*pb.LogSettingsResponse_SettingValue_Uint32Param)
	if !ok {
		t.Fatalf("log_verbose_level is %T", s["log_verbose_level"].GetParameterChoice())
	}
	f, ok := logging.ParseFormat(str("log_format"))
	if !ok {
		t.Fatalf("log_format %q", str("log_format"))
	}
	return str("log_file"), logging.State{Info: flag("log_info"), Warning: flag("log_warning"), Error: flag("log_error"), Verbose: v.Uint32Param, Format: f}
}

// conformanceLog31: LogSettings{} answers the
// six settings, typed.
func conformanceLog31(t *testing.T, c context.Context, h *harness) {
	resp, err := h.client.LogSettings(c, &pb.LogSettingsRequest{})
	servertest.Must(t, err)
	if file, st := logState(t, resp); file != "" || st != logging.Default() {
		t.Fatalf("settings %q %+v", file, st)
	}
}

// conformanceLog32: the json format is refused over the network.
func conformanceLog32(t *testing.T, c context.Context, h *harness) {
	_, err := h.client.LogSettings(c, &pb.LogSettingsRequest{Settings: map[string]*pb.LogSettingsRequest_SettingValue{"log_format": stringSetting("json")}})
	wantStatus(t, err, codes.InvalidArgument, "invalid argument for log_format, got: json")
}

// conformanceLog33: a switch given as a string.
func conformanceLog33(t *testing.T, c context.Context, h *harness) {
	_, err := h.client.LogSettings(c, &pb.LogSettingsRequest{Settings: map[string]*pb.LogSettingsRequest_SettingValue{"log_info": stringSetting("true")}})
	wantStatus(t, err, codes.InvalidArgument, "expect boolean for 'log_info'")
}

// LogSettings changes the settings the server's logger obeys, in Triton's
// key order, keeping the keys applied before an error.
func TestLogSettings(t *testing.T) {
	out := &servertest.LogBuffer{}
	logs := logging.New("/var/log/inferd.log", logging.Default())
	h := start(t, servertest.Options{}, Options{Logs: logs, Logger: slog.New(logs.Handler(out))})
	type settings = map[string]*pb.LogSettingsRequest_SettingValue
	defaults := logging.Default()
	for _, tt := range []struct {
		name     string
		settings settings
		code     codes.Code
		msg      string
		want     logging.State // after the call
	}{
		{name: "empty reports", want: defaults},
		{name: "unknown keys ignored", settings: settings{"log_colour": boolSetting(true)}, want: defaults},
		{name: "log_file refused", settings: settings{"log_file": stringSetting("x"), "log_info": boolSetting(false)},
			code: codes.Unimplemented, msg: "log file location can not be updated through network protocol", want: defaults},
		{name: "log_file refused whatever its type", settings: settings{"log_file": {}},
			code: codes.Unimplemented, msg: "log file location can not be updated through network protocol", want: defaults},
		{name: "every setting", settings: settings{"log_info": boolSetting(false), "log_warning": boolSetting(false), "log_error": boolSetting(false),
			"log_verbose_level": uintSetting(2), "log_format": stringSetting("ISO8601")},
			want: logging.State{Verbose: 2, Format: logging.FormatISO8601}},
		{name: "order: earlier keys stay applied", settings: settings{"log_info": boolSetting(true), "log_warning": uintSetting(1), "log_format": stringSetting("default")},
			code: codes.InvalidArgument, msg: "expect boolean for 'log_warning'", want: logging.State{Info: true, Verbose: 2, Format: logging.FormatISO8601}},
		{name: "no choice set is the wrong type", settings: settings{"log_error": {}},
			code: codes.InvalidArgument, msg: "expect boolean for 'log_error'", want: logging.State{Info: true, Verbose: 2, Format: logging.FormatISO8601}},
		{name: "verbose must be uint32", settings: settings{"log_verbose_level": boolSetting(true)},
			code: codes.InvalidArgument, msg: "expect int32 for 'log_verbose_level'", want: logging.State{Info: true, Verbose: 2, Format: logging.FormatISO8601}},
		{name: "format must be a string", settings: settings{"log_format": uintSetting(1)},
			code: codes.InvalidArgument, msg: "expect string for 'log_format'", want: logging.State{Info: true, Verbose: 2, Format: logging.FormatISO8601}},
		{name: "format names are case-sensitive", settings: settings{"log_format": stringSetting("iso8601")},
			code: codes.InvalidArgument, msg: "invalid argument for log_format, got: iso8601", want: logging.State{Info: true, Verbose: 2, Format: logging.FormatISO8601}},
		{name: "largest verbose level", settings: settings{"log_verbose_level": uintSetting(math.MaxUint32), "log_format": stringSetting("default"),
			"log_warning": boolSetting(true), "log_error": boolSetting(true)},
			want: logging.State{Info: true, Warning: true, Error: true, Verbose: math.MaxUint32}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client.LogSettings(ctx(t), &pb.LogSettingsRequest{Settings: tt.settings})
			if tt.code != codes.OK {
				wantStatus(t, err, tt.code, tt.msg)
			} else {
				servertest.Must(t, err)
				if file, st := logState(t, resp); file != "/var/log/inferd.log" || st != tt.want {
					t.Fatalf("answered %q %+v, want %+v", file, st, tt.want)
				}
			}
			if got := logs.Load(); got != tt.want {
				t.Fatalf("settings %+v, want %+v", got, tt.want)
			}
		})
	}

	// The verbose request line, on both inference RPCs.
	out.Take()
	_, err := h.client.ModelInfer(ctx(t), simpleRequest(true))
	servertest.Must(t, err)
	stream, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	servertest.Must(t, stream.Send(simpleRequest(true)))
	_, err = stream.Recv()
	servertest.Must(t, err)
	servertest.Must(t, stream.CloseSend())
	got := out.Take()
	for _, want := range []string{"protocol=GRPC path=ModelInfer model=simple version=1", "protocol=GRPC path=ModelStreamInfer model=simple version=1",
		`] "Process for ModelInferHandler, rpc_ok=1, `, `] "Process for ModelStreamInferHandler, rpc_ok=1, `,
		`inputs="INPUT0 INT32 [1,16], INPUT1 INT32 [1,16]"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	_, err = h.client.LogSettings(ctx(t), &pb.LogSettingsRequest{Settings: map[string]*pb.LogSettingsRequest_SettingValue{"log_verbose_level": uintSetting(0)}})
	servertest.Must(t, err)
	out.Take() // the LogSettings call's own line, logged while verbose was on
	_, err = h.client.ModelInfer(ctx(t), simpleRequest(true))
	servertest.Must(t, err)
	if got := out.Take(); got != "" {
		t.Errorf("verbose 0 logged %q", got)
	}
}

// The logging category of --grpc-restricted-protocol guards LogSettings.
func TestLogSettingsRestricted(t *testing.T) {
	h := start(t, servertest.Options{}, Options{Restricted: map[string]Restriction{"logging": {Key: "log-key", Value: "v"}}})
	_, err := h.client.LogSettings(ctx(t), &pb.LogSettingsRequest{})
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-log-key'")
	_, err = h.client.LogSettings(metadata.AppendToOutgoingContext(ctx(t), "triton-grpc-protocol-log-key", "v"), &pb.LogSettingsRequest{})
	servertest.Must(t, err)
	_, err = h.client.ModelInfer(ctx(t), simpleRequest(true))
	servertest.Must(t, err)
}

// paramsRequest asks the params model (servertest.WriteParamsModel).
func paramsRequest(id string, params map[string]*pb.InferParameter) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "params", Id: id, Parameters: params,
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))}}
}

// modelParams is what the params model saw: its one BYTES element, JSON.
func modelParams(t *testing.T, resp *pb.ModelInferResponse) map[string]any {
	t.Helper()
	raw := resp.GetRawOutputContents()
	if len(raw) != 1 || len(raw[0]) < 4 {
		t.Fatalf("answer %v", resp)
	}
	var params map[string]any
	servertest.Must(t, json.Unmarshal(raw[0][4:], &params))
	return params
}

// forwardHarness serves the params model.py with
// --grpc-header-forward-pattern=pattern and the inference category
// restricted to infer-key.
func forwardHarness(t *testing.T, pattern string) *harness {
	t.Helper()
	root := t.TempDir()
	servertest.WriteParamsModel(t, root, "params")
	fw, err := protocol.NewHeaderForwarder(pattern, "triton-grpc-protocol-infer-key")
	servertest.Must(t, err)
	py := python.New(python.Options{Executable: servertest.Python(t), ArenaBytes: python.DefaultArenaBytes})
	t.Cleanup(func() { _ = py.Close() })
	return start(t, servertest.Options{Repo: root, Backends: []core.Backend{py}},
		Options{HeaderForward: fw, Restricted: map[string]Restriction{"inference": {Key: "infer-key", Value: "secret"}}})
}

// conformanceForward67: with --grpc-header-forward-pattern=my-.*, metadata
// my-key reaches the model as a string parameter; with .*, a triton_ key
// is refused as reserved (triton-inference-server/server
// docs/protocol/extension_parameters.md).
func conformanceForward67(t *testing.T, c context.Context) {
	h := forwardHarness(t, "my-.*")
	c = metadata.AppendToOutgoingContext(c, "triton-grpc-protocol-infer-key", "secret")
	resp, err := h.client.ModelInfer(metadata.AppendToOutgoingContext(c, "my-key", "v"), paramsRequest("", nil))
	servertest.Must(t, err)
	if p := modelParams(t, resp); p["my-key"] != "v" || len(p) != 1 {
		t.Fatalf("model saw %v", p)
	}
	h = forwardHarness(t, ".*")
	_, err = h.client.ModelInfer(metadata.AppendToOutgoingContext(c, "triton_x", "1"), paramsRequest("", nil))
	wantStatus(t, err, codes.InvalidArgument, "Header 'triton_x' is reserved for Triton usage and cannot be forwarded.")
}

// --grpc-header-forward-pattern on both inference RPCs: matching metadata
// reaches a model.py's request.parameters() as strings beside the
// request's own parameters, the last value of a repeated key winning; the
// restricted-protocol key, pseudo-headers and grpc- keys are never
// forwarded; a reserved key is refused, in-band for each request of a
// stream, which stays open.
func TestHeaderForwarding(t *testing.T) {
	h := forwardHarness(t, ".*")
	md := metadata.Pairs("triton-grpc-protocol-infer-key", "secret", "my-key", "first", "my-key", "second", "x-other", "o")
	c := metadata.NewOutgoingContext(ctx(t), md)
	own := map[string]*pb.InferParameter{"p": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}}}
	check := func(where string, p map[string]any) {
		t.Helper()
		if p["my-key"] != "second" || p["x-other"] != "o" || p["p"] != 1.0 {
			t.Errorf("%s: model saw %v", where, p)
		}
		for k, v := range p {
			if k == "triton-grpc-protocol-infer-key" || strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
				t.Errorf("%s: forwarded %s=%v", where, k, v)
			}
			if _, ok := v.(string); !ok && k != "p" {
				t.Errorf("%s: %s=%v is not a string", where, k, v)
			}
		}
	}
	resp, err := h.client.ModelInfer(c, paramsRequest("", own))
	servertest.Must(t, err)
	check("ModelInfer", modelParams(t, resp))

	stream, err := h.client.ModelStreamInfer(c)
	servertest.Must(t, err)
	for _, id := range []string{"a", "b"} {
		servertest.Must(t, stream.Send(paramsRequest(id, own)))
		r, err := stream.Recv()
		servertest.Must(t, err)
		if r.GetErrorMessage() != "" {
			t.Fatalf("stream %s: %s", id, r.GetErrorMessage())
		}
		check("stream "+id, modelParams(t, r.GetInferResponse()))
	}
	servertest.Must(t, stream.CloseSend())

	bad := metadata.AppendToOutgoingContext(c, "sequence_id", "7")
	_, err = h.client.ModelInfer(bad, paramsRequest("", nil))
	wantStatus(t, err, codes.InvalidArgument, "Header 'sequence_id' is reserved for Triton usage and cannot be forwarded.")
	stream, err = h.client.ModelStreamInfer(bad)
	servertest.Must(t, err)
	for _, id := range []string{"a", "b"} {
		servertest.Must(t, stream.Send(paramsRequest(id, nil)))
		r, err := stream.Recv()
		servertest.Must(t, err)
		if r.GetErrorMessage() != "Header 'sequence_id' is reserved for Triton usage and cannot be forwarded." || r.GetInferResponse().GetId() != id {
			t.Fatalf("stream %s: %v", id, r)
		}
	}
	servertest.Must(t, stream.CloseSend())
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
}

// Triton's per-call line names each RPC (its inference handlers by their
// handler names) and numbers the calls; other services get none.
func TestLogCall(t *testing.T) {
	out := &servertest.LogBuffer{}
	logs := logging.New("", logging.State{Verbose: 1})
	s := New(nil, Options{Logs: logs, Logger: slog.New(logs.Handler(out))})
	s.logCall(context.Background(), "/inference.GRPCInferenceService/ServerLive")
	s.logCall(context.Background(), "/inference.GRPCInferenceService/ModelInfer")
	s.logCall(context.Background(), "/grpc.health.v1.Health/Check")
	got := out.Take()
	for _, want := range []string{`] "Process for ServerLive, rpc_ok=1, 0 step START"` + "\n", `] "Process for ModelInferHandler, rpc_ok=1, 1 step START"` + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if strings.Count(got, "\n") != 2 {
		t.Errorf("log %q", got)
	}
	logs.Update(func(st *logging.State) { st.Verbose = 0 })
	if n := testing.AllocsPerRun(100, func() { s.logCall(context.Background(), "/inference.GRPCInferenceService/ModelInfer") }); n != 0 {
		t.Errorf("%v allocations per call with verbose logging off", n)
	}
	if got := out.Take(); got != "" {
		t.Errorf("verbose 0 logged %q", got)
	}
}
