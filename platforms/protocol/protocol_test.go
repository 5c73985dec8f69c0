package protocol_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/protocol"
)

const simpleConfig = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

// start runs a core over `simple`; `two` (versions 1 and 2, version 2
// unloadable so it is not at ready state); `id1` (FP32 identity, no
// batching); and `decoupled` (identity backend).
func start(t *testing.T) *core.Server {
	t.Helper()
	addSub := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: simpleConfig, ONNX: addSub},
		"two":    {Config: simpleConfig[len(`name: "simple"`)+1:] + "version_policy: { all {} }\n", ONNX: addSub, Versions: []string{"1", "2"}},
		"id1": {Config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1))},
		"decoupled": {Config: `max_batch_size: 8
backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
model_transaction_policy { decoupled: true }
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))},
	})
	servertest.Must(t, os.WriteFile(filepath.Join(root, "two", "2", "model.onnx"), []byte("not onnx"), 0o644))
	return servertest.Start(t, servertest.Options{Repo: root, AllowFailures: true})
}

func TestServerMetadata(t *testing.T) {
	got := protocol.ServerMetadata("triton")
	want := protocol.ServerMeta{Name: "triton", Version: protocol.TritonVersion, Extensions: []string{
		"classification", "sequence", "model_repository", "model_repository(unload_dependents)", "schedule_policy", "model_configuration",
		"system_shared_memory", "cuda_shared_memory", "binary_tensor_data", "parameters", "statistics", "trace", "logging"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got.Extensions[0] = "changed" // a caller's copy
	if protocol.ServerMetadata("x").Extensions[0] != "classification" {
		t.Fatal("ServerMetadata shares its extension list")
	}
}

func TestModelMetadata(t *testing.T) {
	c := start(t)
	simpleTensors := func(prefix string) []protocol.TensorMeta {
		return []protocol.TensorMeta{
			{Name: prefix + "0", Datatype: "INT32", Shape: []int64{-1, 16}},
			{Name: prefix + "1", Datatype: "INT32", Shape: []int64{-1, 16}},
		}
	}
	for _, tc := range []struct {
		name    string
		model   string
		version int64
		want    *protocol.ModelMeta
	}{
		{"simple latest", "simple", core.LatestVersion, &protocol.ModelMeta{Name: "simple", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
			Inputs: simpleTensors("INPUT"), Outputs: simpleTensors("OUTPUT")}},
		{"simple version 1", "simple", 1, &protocol.ModelMeta{Name: "simple", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
			Inputs: simpleTensors("INPUT"), Outputs: simpleTensors("OUTPUT")}},
		{"two lists its ready versions only", "two", core.LatestVersion, &protocol.ModelMeta{Name: "two", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
			Inputs: simpleTensors("INPUT"), Outputs: simpleTensors("OUTPUT")}},
		{"no batching, no leading -1", "id1", core.LatestVersion, &protocol.ModelMeta{Name: "id1", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
			Inputs: []protocol.TensorMeta{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{-1}}}, Outputs: []protocol.TensorMeta{{Name: "OUTPUT0", Datatype: "FP32", Shape: []int64{-1}}}}},
		{"platform falls back to the backend", "decoupled", core.LatestVersion, &protocol.ModelMeta{Name: "decoupled", Versions: []string{"1"}, Platform: "identity",
			Inputs: []protocol.TensorMeta{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{-1, -1}}}, Outputs: []protocol.TensorMeta{{Name: "OUTPUT0", Datatype: "FP32", Shape: []int64{-1, -1}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.ModelMetadata(c, tc.model, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLookupErrors checks the lookup errors every model call answers.
func TestLookupErrors(t *testing.T) {
	c := start(t)
	errDecoupled := core.Errorf(core.CodeUnsupported, "refused")
	calls := map[string]func(name string, version int64) error{
		"ModelMetadata": func(n string, v int64) error { _, err := protocol.ModelMetadata(c, n, v); return err },
		"ModelConfig":   func(n string, v int64) error { _, err := protocol.ModelConfig(c, n, v); return err },
		"Lookup":        func(n string, v int64) error { _, err := protocol.Lookup(c, n, v, errDecoupled); return err },
	}
	for _, tc := range []struct {
		name    string
		model   string
		version int64
		code    core.Code
		msg     string
	}{
		{"unknown model", "nope", core.LatestVersion, core.CodeNotFound, "Request for unknown model: 'nope' is not found"},
		{"unknown version", "simple", 7, core.CodeNotFound, "Request for unknown model: 'simple' version 7 is not found"},
		{"version not ready", "two", 2, core.CodeUnavailable, "Request for unknown model: 'two' version 2 is not at ready state"},
	} {
		for call, f := range calls {
			t.Run(tc.name+"/"+call, func(t *testing.T) {
				err := f(tc.model, tc.version)
				if err == nil || protocol.ClassOf(err) != tc.code || err.Error() != tc.msg {
					t.Fatalf("got %v (%v), want %v %q", err, protocol.ClassOf(err), tc.code, tc.msg)
				}
			})
		}
		t.Run(tc.name+"/ModelReady", func(t *testing.T) {
			if protocol.ModelReady(c, tc.model, tc.version) {
				t.Fatal("ready")
			}
		})
	}
	t.Run("decoupled refused", func(t *testing.T) {
		if _, err := protocol.Lookup(c, "decoupled", core.LatestVersion, errDecoupled); err != errDecoupled {
			t.Fatalf("got %v", err)
		}
		_, release, err := protocol.Acquire(c, "decoupled", core.LatestVersion, nil)
		if err != nil {
			t.Fatalf("decoupled allowed: %v", err)
		}
		release()
	})
	if !protocol.ModelReady(c, "two", 1) || !protocol.ModelReady(c, "simple", core.LatestVersion) {
		t.Fatal("ready versions reported not ready")
	}
}

func TestModelConfig(t *testing.T) {
	c := start(t)
	cfg, err := protocol.ModelConfig(c, "simple", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetMaxBatchSize() != 8 || !reflect.DeepEqual(cfg.GetInput()[0].GetDims(), []int64{16}) {
		t.Fatalf("config %v", cfg)
	}
}

func TestModelStatistics(t *testing.T) {
	c := start(t)
	mv, release, err := protocol.Acquire(c, "simple", core.LatestVersion, nil)
	servertest.Must(t, err)
	in := func(name string) *core.Tensor {
		return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: make([]byte, 64)}
	}
	_, err = mv.Infer(context.Background(), &core.InferRequest{ModelName: "simple", ModelVersion: 1, Inputs: []*core.Tensor{in("INPUT0"), in("INPUT1")}})
	release()
	servertest.Must(t, err)

	t.Run("after an inference", func(t *testing.T) {
		stats, err := protocol.ModelStatistics(c, "simple", core.LatestVersion)
		servertest.Must(t, err)
		if len(stats) != 1 {
			t.Fatalf("%d entries", len(stats))
		}
		st := stats[0]
		if st.Name != "simple" || st.Version != "1" || st.InferenceCount != 1 || st.ExecutionCount != 1 ||
			st.Inference.Success.Count != 1 || st.Inference.Fail.Count != 0 || st.LastInference == 0 ||
			len(st.Batches) != 1 || st.Batches[0].BatchSize != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("every ready version", func(t *testing.T) {
		stats, err := protocol.ModelStatistics(c, "", core.LatestVersion)
		servertest.Must(t, err)
		var got []string
		for _, st := range stats {
			got = append(got, st.Name+"/"+st.Version)
		}
		want := []string{"decoupled/1", "id1/1", "simple/1", "two/1"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	for _, tc := range []struct {
		name, model string
		version     int64
		msg         string
	}{
		{"unknown model", "nope", core.LatestVersion, "requested model 'nope' is not available"},
		{"unknown version", "simple", 3, "requested model version is not available for model 'simple'"},
		{"version not ready", "two", 2, "requested model version is not available for model 'two'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.ModelStatistics(c, tc.model, tc.version)
			if err == nil || protocol.ClassOf(err) != core.CodeInvalidArg || err.Error() != tc.msg {
				t.Fatalf("got %v, want INVALID_ARG %q", err, tc.msg)
			}
		})
	}
}

func TestRepositoryIndex(t *testing.T) {
	c := start(t)
	ready := []protocol.IndexEntry{
		{Name: "decoupled", Version: "1", State: "READY"},
		{Name: "id1", Version: "1", State: "READY"},
		{Name: "simple", Version: "1", State: "READY"},
		{Name: "two", Version: "1", State: "READY"},
	}
	for _, tc := range []struct {
		name      string
		readyOnly bool
		want      []protocol.IndexEntry
	}{
		{"ready only", true, ready},
		{"all", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.RepositoryIndex(context.Background(), c, tc.readyOnly)
			servertest.Must(t, err)
			if tc.want != nil {
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if len(got) != 5 || got[4].Name != "two" || got[4].Version != "2" || got[4].State != "UNAVAILABLE" || got[4].Reason == "" {
				t.Fatalf("got %+v", got)
			}
		})
	}
	t.Run("never loaded has only a name", func(t *testing.T) {
		root := servertest.WriteRepo(t, map[string]servertest.Model{"simple": {Config: simpleConfig, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))}})
		c := servertest.Start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit})
		got, err := protocol.RepositoryIndex(context.Background(), c, false)
		servertest.Must(t, err)
		if want := []protocol.IndexEntry{{Name: "simple"}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		servertest.Must(t, protocol.Load(context.Background(), c, "simple", nil))
		if !protocol.ModelReady(c, "simple", 1) {
			t.Fatal("not loaded")
		}
		servertest.Must(t, protocol.Unload(context.Background(), c, "simple", false))
		servertest.Must(t, protocol.Unload(context.Background(), c, "never", false))
		got, err = protocol.RepositoryIndex(context.Background(), c, false)
		servertest.Must(t, err)
		if want := []protocol.IndexEntry{{Name: "simple", Version: "1", State: "UNAVAILABLE", Reason: "unloaded"}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}

func TestLoadNotExplicit(t *testing.T) {
	c := servertest.Start(t, servertest.Options{})
	for name, err := range map[string]error{
		"CheckExplicit": protocol.CheckExplicit(c),
		"Load":          protocol.Load(context.Background(), c, "simple", nil),
		"Unload":        protocol.Unload(context.Background(), c, "simple", false),
	} {
		if err != protocol.ErrNotExplicit {
			t.Errorf("%s: got %v, want %v", name, err, protocol.ErrNotExplicit)
		}
	}
}

func TestHealth(t *testing.T) {
	c := servertest.Start(t, servertest.Options{})
	for _, tc := range []struct {
		name    string
		f       func(*core.Server, bool) (bool, error)
		exiting bool
		want    bool
		err     error
	}{
		{"live", protocol.ServerLive, false, true, nil},
		{"live while exiting", protocol.ServerLive, true, false, protocol.ErrExiting},
		{"ready", protocol.ServerReady, false, true, nil},
		{"ready while exiting", protocol.ServerReady, true, false, protocol.ErrExiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f(c, tc.exiting)
			if got != tc.want || err != tc.err {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
	if protocol.ClassOf(protocol.ErrExiting) != core.CodeUnavailable || protocol.ErrExiting.Error() != "Server exiting" {
		t.Fatal(protocol.ErrExiting)
	}
}

// TestModelReadiness: gRPC's ModelReady answer (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelReady) is
// ModelReady's while serving and UNAVAILABLE "Server not ready" while
// exiting.
func TestModelReadiness(t *testing.T) {
	c := start(t)
	if ready, err := protocol.ModelReadiness(c, "simple", core.LatestVersion, false); !ready || err != nil {
		t.Fatalf("serving: %v %v", ready, err)
	}
	if ready, err := protocol.ModelReadiness(c, "nope", core.LatestVersion, false); ready || err != nil {
		t.Fatalf("unknown: %v %v", ready, err)
	}
	ready, err := protocol.ModelReadiness(c, "simple", core.LatestVersion, true)
	if ready || err == nil || err.Error() != "Server not ready" || protocol.ClassOf(err) != core.CodeUnavailable {
		t.Fatalf("exiting: %v %v", ready, err)
	}
}
