package infer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/repo/modelconfig"
)

const identityConfig = `backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`

// start runs a core over `id` (an identity model) and `decoupled` (the
// same, decoupled).
func start(t *testing.T) *core.Server {
	t.Helper()
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"id":        {Config: identityConfig},
		"decoupled": {Config: identityConfig + "model_transaction_policy { decoupled: true }\n"},
	})
	return servertest.Start(t, servertest.Options{Repo: root})
}

// headers is a call's metadata as a map, as both frontends hand it over.
type headers map[string][]string

func (h headers) Carrier(context.Context) propagation.TextMapCarrier {
	return propagation.HeaderCarrier(h)
}
func (h headers) Headers(context.Context) map[string][]string { return h }

func request() *core.InferRequest {
	return &core.InferRequest{ID: "r1", Inputs: []*core.Tensor{{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1}, Data: make([]byte, 4)}}}
}

func decodeRequest(*modelconfig.ModelConfig, *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
	return request(), nil, nil
}

var errDecoupled = core.Errorf(core.CodeUnsupported, "decoupled refused")

// TestPipelineSteps checks what each step lets through, for a call whose
// body is read by the decoder and for one already in memory: the lookup
// before the decoder, the decoder before (or, buffered, after) the
// acquisition, the forwarded headers at
// the decoder, the load report after the model answered.
func TestPipelineSteps(t *testing.T) {
	c := start(t)
	fwd, err := protocol.NewHeaderForwarder("x-.*")
	if err != nil {
		t.Fatal(err)
	}
	errDecode := core.Errorf(core.CodeInvalidArg, "bad body")
	for _, tc := range []struct {
		name      string
		model     string
		decoupled error
		decodeErr error
		meta      infer.Metadata
		// want
		decoded  bool
		err      string
		reported bool
		param    string // the forwarded x-tag parameter
	}{
		{name: "unknown model stops at the lookup", model: "nope", err: "Request for unknown model: 'nope' is not found"},
		{name: "decoupled refusal before the body", model: "decoupled", decoupled: errDecoupled, err: "decoupled refused"},
		{name: "decoupled accepted when the frontend streams", model: "decoupled", decoded: true, reported: true},
		{name: "decode error", model: "id", decodeErr: errDecode, decoded: true, err: "bad body"},
		{name: "served, headers forwarded", model: "id", meta: headers{"x-tag": {"v"}, "other": {"w"}}, decoded: true, reported: true, param: "v"},
	} {
		for _, buffered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/buffered=%v", tc.name, buffered), func(t *testing.T) {
				p := &infer.Pipeline{Core: c, Logs: nil, Log: slog.New(slog.DiscardHandler), Forward: fwd}
				var decoded bool
				var reported *core.ModelVersion
				call := &infer.Call{
					Protocol: infer.HTTP, Route: "/v2/models/" + tc.model + "/infer", Model: tc.model, Version: core.LatestVersion,
					Decoupled: tc.decoupled, Meta: tc.meta, Buffered: buffered,
				}
				var req *core.InferRequest
				decode := func(cfg *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
					decoded = true
					if cfg == nil || len(cfg.GetInput()) != 1 {
						t.Errorf("decoder got config %v", cfg)
					}
					if tc.decodeErr != nil {
						return nil, nil, tc.decodeErr
					}
					req = request()
					if fh != nil {
						if err := fh.Apply(req); err != nil {
							return nil, nil, err
						}
					}
					return req, nil, nil
				}
				report := func(mv *core.ModelVersion) { reported = mv }
				// A frontend that streams runs the decoupled model; the
				// other runs the identity model's one response.
				n := 0
				var err error
				send := func(resp *core.InferResponse, _ bool) error {
					if resp != nil {
						n++
					}
					return nil
				}
				p.Run(context.Background(), call, decode, infer.Reply{
					Shape: infer.ByPolicy, Report: report,
					Render: func(resp *core.InferResponse, rerr error) {
						err = rerr
						if rerr == nil && tc.model == "decoupled" && n != 1 {
							t.Errorf("%d responses", n)
						}
						if rerr == nil && tc.model == "id" && resp == nil {
							t.Error("no response")
						}
					},
				}, send)
				if req != nil && err == nil {
					if req.ModelName != tc.model || req.ModelVersion != 1 {
						t.Errorf("request names %s version %d", req.ModelName, req.ModelVersion)
					}
					if got, _ := req.Parameters["x-tag"].(string); got != tc.param {
						t.Errorf("forwarded x-tag %q, want %q", got, tc.param)
					}
					if _, ok := req.Parameters["other"]; ok {
						t.Error("a header outside the pattern was forwarded")
					}
				}
				if tc.err == "" && err != nil {
					t.Fatalf("err %v", err)
				}
				if tc.err != "" && (err == nil || err.Error() != tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if decoded != tc.decoded {
					t.Errorf("decoded %v, want %v", decoded, tc.decoded)
				}
				if (reported != nil) != tc.reported {
					t.Errorf("reported %v, want %v", reported != nil, tc.reported)
				}
				if tc.decodeErr != nil && !errors.Is(err, tc.decodeErr) {
					t.Errorf("decoder's error not returned as is: %v", err)
				}
			})
		}
	}
}

// TestPipelineReleases checks that the end releases the model: an unload
// waits for a held version and finishes once the call has ended.
func TestPipelineReleases(t *testing.T) {
	c := start(t)
	p := &infer.Pipeline{Core: c, Log: slog.New(slog.DiscardHandler)}
	unloaded := make(chan error, 1)
	var err error
	p.Dispatch(context.Background(), &infer.Call{Model: "id", Version: core.LatestVersion}, decodeRequest, infer.Reply{
		Render: func(_ *core.InferResponse, rerr error) { err = rerr },
	}, nil, func(_ *infer.Inference, run func(context.Context)) {
		go func() { unloaded <- c.Unload(context.Background(), "id") }()
		time.Sleep(100 * time.Millisecond) // time for the unload to reach the wait
		select {
		case err := <-unloaded:
			t.Fatalf("unload returned (%v) while the call held the model", err)
		default:
		}
		run(context.Background())
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineTraceStamps checks each protocol's timestamp names in a
// traced request's record (triton mode, rate 1): a call with one response
// stamps its send, a stream (and a one-response request of
// ModelStreamInfer, which its stream's writer sends) does not.
func TestPipelineTraceStamps(t *testing.T) {
	c := start(t)
	for _, tc := range []struct {
		protocol infer.Protocol
		shape    infer.Shape
		want     []string
		not      []string
	}{
		{infer.HTTP, infer.OneResponse, []string{"HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"}, nil},
		{infer.GRPC, infer.OneResponse, []string{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"}, nil},
		{infer.HTTP, infer.Streamed, []string{"HTTP_RECV_START", "HTTP_RECV_END"}, []string{"HTTP_SEND_START", "HTTP_SEND_END"}},
		{infer.GRPC, infer.ByPolicy, []string{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END"}, []string{"GRPC_SEND_START", "GRPC_SEND_END"}},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.protocol, tc.shape), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "trace.json")
			cfg, err := trace.ParseConfig([]string{"triton,file=" + file, "level=TIMESTAMPS", "rate=1"}, trace.Deprecated{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := trace.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			p := &infer.Pipeline{Core: c, Trace: m, Log: slog.New(slog.DiscardHandler)}
			var req *core.InferRequest
			p.Run(context.Background(), &infer.Call{Protocol: tc.protocol, Model: "id", Version: core.LatestVersion},
				func(*modelconfig.ModelConfig, *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
					req = request()
					return req, nil, nil
				}, infer.Reply{Shape: tc.shape,
					Render: func(_ *core.InferResponse, rerr error) {
						if rerr != nil {
							t.Fatal(rerr)
						}
						if req.Trace == nil {
							t.Fatal("a request sampled at rate 1 has no trace")
						}
					}}, func(*core.InferResponse, bool) error { return nil })
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range tc.want {
				if !strings.Contains(string(b), `"`+name+`"`) {
					t.Errorf("trace lacks %s: %s", name, b)
				}
			}
			for _, name := range tc.not {
				if strings.Contains(string(b), `"`+name+`"`) {
					t.Errorf("trace has %s: %s", name, b)
				}
			}
		})
	}
}
