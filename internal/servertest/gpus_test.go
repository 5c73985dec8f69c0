package servertest

import (
	"context"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

// Options.GPUs reaches the core: a KIND_GPU group loads only on a server
// given a GPU (on a host without one, the identity backend stands in for
// ONNX Runtime's CUDA provider). BenchmarkBatchingGPU once failed on a GPU
// host because its test server had been given none.
func TestGPUsReachTheCore(t *testing.T) {
	const cfg = `{"backend":"identity","max_batch_size":8,
		"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[4]}],
		"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[4]}],
		"instance_group":[{"kind":"KIND_GPU","count":1}]}`
	for _, tc := range []struct {
		name    string
		gpus    []int32
		refusal string // "" : it loads
	}{
		{"no GPUs", nil, "has kind KIND_GPU but no GPUs are available"},
		{"GPU 0", []int32{0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := Start(t, Options{Mode: core.ModeExplicit, GPUs: tc.gpus})
			err := srv.Load(context.Background(), "g", &core.LoadOverride{ConfigJSON: cfg, Files: map[string][]byte{"1/model.bin": {}}})
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("load: %v", err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("load: %v, want an error with %q", err, tc.refusal)
			case tc.refusal != "":
				return
			}
			resp, err := srv.Infer(context.Background(), &core.InferRequest{ModelName: "g", ModelVersion: core.LatestVersion,
				Inputs: []*core.Tensor{{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1, 4}, Data: make([]byte, 16)}}})
			if err != nil {
				t.Fatalf("infer: %v", err)
			}
			if len(resp.Outputs) != 1 || len(resp.Outputs[0].Data) != 16 {
				t.Fatalf("outputs %+v", resp.Outputs)
			}
		})
	}
}
