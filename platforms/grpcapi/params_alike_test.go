package grpcapi

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// everyParam holds a response parameter of each Go type a backend may
// set, with the value gRPC must carry for it (printed as kind:value).
var everyParam = []struct {
	name string
	v    any
	want string
}{
	{"bool", true, "bool:true"},
	{"string", "a \"quoted\" é\x01", "string:a \"quoted\" é\x01"},
	{"int", int(-7), "int64:-7"},
	{"int8", int8(-128), "int64:-128"},
	{"int16", int16(-32768), "int64:-32768"},
	{"int32", int32(math.MinInt32), "int64:-2147483648"},
	{"int64", int64(math.MinInt64), "int64:-9223372036854775808"},
	{"uint", uint(7), "uint64:7"},
	{"uint8", uint8(255), "uint64:255"},
	{"uint16", uint16(65535), "uint64:65535"},
	{"uint32", uint32(math.MaxUint32), "uint64:4294967295"},
	{"uint64", uint64(math.MaxUint64), "uint64:18446744073709551615"},
	{"float32", float32(0.1), "double:0.10000000149011612"},
	{"float64", 2.25, "double:2.25"},
	{"float64_integral", 3.0, "double:3"},
	{"float64_tiny", 5e-324, "double:5e-324"},
	{"float64_negative_zero", math.Copysign(0, -1), "double:-0"},
	{"float64_inf", math.Inf(-1), "double:-Inf"},
	{"float64_nan", math.NaN(), "double:NaN"},
}

// paramsBackend ("params") answers each request with one response: OUT is
// IN, and the parameters are those of the request's "case": "all" every
// parameter of everyParam, "bytes" a []byte one, "other" one of a type no
// transport takes.
type paramsBackend struct{}

const paramsConfig = `backend: "params"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`

func (paramsBackend) Name() string { return "params" }

func (paramsBackend) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

func (paramsBackend) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return paramsInstance{}, nil
}

type paramsInstance struct{}

func (paramsInstance) Execute(_ context.Context, e *core.Execution) error {
	now := time.Now()
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = now, now, now, now
	for _, r := range e.Requests {
		params := map[string]any{}
		switch r.Parameters["case"] {
		case "all":
			for _, p := range everyParam {
				params[p.name] = p.v
			}
		case "bytes":
			params["b"] = []byte("x")
		case "other":
			params["o"] = struct{}{}
		}
		resp := &core.ExecResponse{Parameters: params}
		for _, name := range r.Outputs {
			resp.Outputs = append(resp.Outputs, &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: []int64{1}, Data: r.Inputs[0].Data})
		}
		_ = r.Send(resp, true)
	}
	return nil
}

func (paramsInstance) Close() error { return nil }

// sameParam reports whether a JSON parameter value, read as Triton's JSON
// layer reads it, is the value gRPC carries (a double to the bit, NaN
// aside).
func sameParam(j tritonjson.Value, p *pb.InferParameter) bool {
	switch c := p.GetParameterChoice().(type) {
	case *pb.InferParameter_BoolParam:
		b, err := j.Bool()
		return err == nil && b == c.BoolParam
	case *pb.InferParameter_StringParam:
		s, err := j.Str()
		return err == nil && s == c.StringParam
	case *pb.InferParameter_Int64Param:
		i, err := j.Int64()
		return err == nil && i == c.Int64Param
	case *pb.InferParameter_Uint64Param:
		u, err := j.Uint64()
		return err == nil && u == c.Uint64Param
	case *pb.InferParameter_DoubleParam:
		f, err := j.Float64()
		if math.IsNaN(c.DoubleParam) {
			return err == nil && math.IsNaN(f)
		}
		return err == nil && math.Float64bits(f) == math.Float64bits(c.DoubleParam)
	}
	return false
}

// paramsHarness serves the params model over real gRPC and HTTP listeners.
type paramsHarness struct {
	grpc *harness
	http string // base URL
}

func startParams(t *testing.T) paramsHarness {
	t.Helper()
	root := servertest.WriteRepo(t, map[string]servertest.Model{"params": {Config: paramsConfig}})
	h := start(t, servertest.Options{Repo: root, Backends: []core.Backend{paramsBackend{}}}, Options{})
	hs := httptest.NewServer(httpapi.New(h.core, httpapi.Options{}))
	t.Cleanup(hs.Close)
	return paramsHarness{grpc: h, http: hs.URL}
}

// post sends body to the params model's route (infer or generate).
func (p paramsHarness) post(t *testing.T, route, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(p.http+"/v2/models/params/"+route, "application/json", bytes.NewBufferString(body))
	servertest.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return resp.StatusCode, b
}

func (p paramsHarness) infer(t *testing.T, kase string) (*pb.ModelInferResponse, error) {
	t.Helper()
	return p.grpc.client.ModelInfer(ctx(t), &pb.ModelInferRequest{
		ModelName:  "params",
		Parameters: map[string]*pb.InferParameter{"case": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: kase}}},
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "INT32", Shape: []int64{1},
			Contents: &pb.InferTensorContents{IntContents: []int32{1}}}},
	})
}

// TestResponseParametersAlikeOverListeners renders one core response with
// a parameter of every type over real listeners: gRPC's ModelInfer,
// HTTP's /infer and /generate must carry every parameter with the same
// value, and refuse the parameters no transport takes with the same error
// and class.
func TestResponseParametersAlikeOverListeners(t *testing.T) {
	p := startParams(t)

	g, err := p.infer(t, "all")
	servertest.Must(t, err)
	code, inferBody := p.post(t, "infer", `{"parameters":{"case":"all"},"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}]}`)
	if code != http.StatusOK {
		t.Fatalf("infer: %d %s", code, inferBody)
	}
	code, generateBody := p.post(t, "generate", `{"IN":1,"case":"all"}`)
	if code != http.StatusOK {
		t.Fatalf("generate: %d %s", code, generateBody)
	}
	inferDoc, err := tritonjson.ParseJSON(inferBody)
	servertest.Must(t, err)
	inferParams, _ := inferDoc.Root().Find("parameters")
	generateDoc, err := tritonjson.ParseJSON(generateBody)
	servertest.Must(t, err)

	var names []string
	for _, tc := range everyParam {
		names = append(names, tc.name)
		gp, ok := g.GetParameters()[tc.name]
		if !ok {
			t.Errorf("%s: not in the gRPC response", tc.name)
			continue
		}
		if got := grpcValue(gp); got != tc.want {
			t.Errorf("%s: gRPC %s, want %s", tc.name, got, tc.want)
		}
		for _, r := range []struct {
			route  string
			params tritonjson.Value
		}{{"infer", inferParams}, {"generate", generateDoc.Root()}} {
			j, ok := r.params.Find(tc.name)
			if !ok || !sameParam(j, gp) {
				t.Errorf("%s: HTTP %s wrote %s, gRPC %s", tc.name, r.route, j.Raw(), grpcValue(gp))
			}
		}
	}
	// Nothing more, on either transport.
	var grpcNames, httpNames []string
	for k := range g.GetParameters() {
		grpcNames = append(grpcNames, k)
	}
	for k := range inferParams.Members() {
		httpNames = append(httpNames, string(k))
	}
	slices.Sort(names)
	slices.Sort(grpcNames)
	if !slices.Equal(grpcNames, names) || !slices.Equal(httpNames, names) {
		t.Errorf("parameters: gRPC %v, HTTP %v, want %v", grpcNames, httpNames, names)
	}

	for _, tc := range []struct {
		kase string
		code core.Code
		msg  string
	}{
		{"bytes", core.CodeUnsupported, "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"},
		{"other", core.CodeInternal, "response parameter 'o' has unsupported type struct {}"},
	} {
		t.Run(tc.kase, func(t *testing.T) {
			_, err := p.infer(t, tc.kase)
			st, _ := status.FromError(err)
			if int(st.Code()) != int(protocol.GRPCStatus(tc.code)) || st.Message() != tc.msg {
				t.Errorf("gRPC: %v %q, want %v %q", st.Code(), st.Message(), protocol.GRPCStatus(tc.code), tc.msg)
			}
			want := string(tritonjson.AppendString([]byte(`{"error":`), tc.msg)) + "}"
			for route, body := range map[string]string{
				"infer":    `{"parameters":{"case":"` + tc.kase + `"},"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}]}`,
				"generate": `{"IN":1,"case":"` + tc.kase + `"}`,
			} {
				if code, got := p.post(t, route, body); code != protocol.HTTPStatus(tc.code) || string(got) != want {
					t.Errorf("HTTP %s: %d %s, want %d %s", route, code, got, protocol.HTTPStatus(tc.code), want)
				}
			}
		})
	}
}
