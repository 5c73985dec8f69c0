package onnxrt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

func TestAutoComplete(t *testing.T) {
	b1, err := New(Options{DefaultMaxBatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	bNeg, err := New(Options{DefaultMaxBatchSize: -3})
	if err != nil {
		t.Fatal(err)
	}
	defer bNeg.Close()

	addSub := ob.Must(ob.AddSub(ob.Float, -1, 16))
	tests := []struct {
		name    string
		backend *Backend
		model   []byte
		config  string
		want    string // expected config after auto-complete, prototext
		wantErr string
	}{{
		// Triton's auto-complete (onnxruntime_backend src/onnxruntime.cc).
		name:  "batchable model gets max_batch_size 4 and dynamic batching",
		model: addSub,
		want: `max_batch_size: 4 dynamic_batching {}
			input { name: "INPUT0" data_type: TYPE_FP32 dims: 16 }
			input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }`,
	}, {
		// --backend-config=onnxruntime,default-max-batch-size=1.
		name:    "default-max-batch-size=1 gives max_batch_size 1 and no dynamic batching",
		backend: b1,
		model:   addSub,
		want: `max_batch_size: 1
			input { name: "INPUT0" data_type: TYPE_FP32 dims: 16 }
			input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }`,
	}, {
		name:    "negative default-max-batch-size counts as 0",
		backend: bNeg,
		model:   addSub,
		want: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1, 16] }
			input { name: "INPUT1" data_type: TYPE_FP32 dims: [-1, 16] }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, 16] }
			output { name: "OUTPUT1" data_type: TYPE_FP32 dims: [-1, 16] }`,
	}, {
		name:    "non-batchable model with max_batch_size fails",
		model:   ob.Must(ob.Identity(ob.Float, 2, 3)),
		config:  `max_batch_size: 8`,
		wantErr: "autofill failed for model 'm': model does not support batching while non-zero max_batch_size is specified",
	}, {
		name:  "non-batchable model keeps its full dims",
		model: ob.Must(ob.Identity(ob.Int32, 2, -1)),
		want: `input { name: "INPUT0" data_type: TYPE_INT32 dims: [2, -1] }
			output { name: "OUTPUT0" data_type: TYPE_INT32 dims: [2, -1] }`,
	}, {
		// Listed I/O skips everything, max_batch_size included
		name:  "inputs and outputs present: skipped",
		model: addSub,
		config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1, 16] }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, 16] }`,
		want: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1, 16] }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, 16] }`,
	}, {
		name:   "only outputs missing: outputs generated, inputs kept",
		model:  addSub,
		config: `max_batch_size: 2 input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }`,
		want: `max_batch_size: 2 dynamic_batching {}
			input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
			output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }`,
	}, {
		name:  "rank-1 batchable tensors get dims [1] and an empty reshape",
		model: ob.Must(ob.Identity(ob.Int64, -1)),
		want: `max_batch_size: 4 dynamic_batching {}
			input { name: "INPUT0" data_type: TYPE_INT64 dims: 1 reshape {} }
			output { name: "OUTPUT0" data_type: TYPE_INT64 dims: 1 reshape {} }`,
	}, {
		name:  "scalars get dims [1] without reshape",
		model: ob.Must(ob.Identity(ob.Bool)),
		want: `input { name: "INPUT0" data_type: TYPE_BOOL dims: 1 }
			output { name: "OUTPUT0" data_type: TYPE_BOOL dims: 1 }`,
	}, {
		name:   "a configured sequence batcher is not joined by a dynamic one",
		model:  ob.Must(ob.Identity(ob.String, -1, 2)),
		config: `max_batch_size: 8 sequence_batching {}`,
		want: `max_batch_size: 8 sequence_batching {}
			input { name: "INPUT0" data_type: TYPE_STRING dims: 2 }
			output { name: "OUTPUT0" data_type: TYPE_STRING dims: 2 }`,
	}, {
		name:  "graph declaration order, not name order",
		model: ob.Must(ob.ThreeOutputs(ob.Float16, 3)),
		want: `input { name: "INPUT0" data_type: TYPE_FP16 dims: 3 }
			output { name: "OUTPUT2" data_type: TYPE_FP16 dims: 3 }
			output { name: "OUTPUT0" data_type: TYPE_FP16 dims: 3 }
			output { name: "OUTPUT1" data_type: TYPE_FP16 dims: 3 }`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.backend
			if b == nil {
				b = testBackend
			}
			v := version(t, "m", tc.model)
			cfg := config(t, tc.config)
			err := b.AutoComplete(context.Background(), v, cfg)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				if core.CodeOf(err) != core.CodeInvalidArg {
					t.Errorf("code = %v, want INVALID_ARG", core.CodeOf(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := config(t, tc.want)
			if got, w := prototext.Format(cfg), prototext.Format(want); got != w {
				t.Errorf("config =\n%s\nwant\n%s", got, w)
			}
		})
	}
}

func TestAutoCompleteModelFile(t *testing.T) {
	model := ob.Must(ob.Identity(ob.Float, 4))
	want := `input { name: "INPUT0" data_type: TYPE_FP32 dims: 4 }
		output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 4 }`
	tests := []struct {
		name    string
		file    string // where the model goes, under the version dir
		config  string
		wantErr string
	}{
		{name: "default name", file: "model.onnx"},
		{name: "default_model_filename", file: "net.onnx", config: `default_model_filename: "net.onnx"`},
		{name: "directory named model.onnx", file: "model.onnx/model.onnx"},
		{name: "directory uses the fixed inner name", file: "net.onnx/model.onnx", config: `default_model_filename: "net.onnx"`},
		{name: "missing file", file: "other.onnx", wantErr: "unable to find '"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			v := core.VersionFiles{ModelName: "m", Version: 1, ModelDir: root, VersionDir: filepath.Join(root, "1")}
			if err := ob.WriteFile(filepath.Join(v.VersionDir, tc.file), model); err != nil {
				t.Fatal(err)
			}
			cfg := config(t, tc.config)
			err := testBackend.AutoComplete(context.Background(), v, cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := config(t, want)
			w.DefaultModelFilename = cfg.DefaultModelFilename
			if got, w := prototext.Format(cfg), prototext.Format(w); got != w {
				t.Errorf("config =\n%s\nwant\n%s", got, w)
			}
		})
	}
}

// TestAutoCompleteCache shows the graph is read once per model file, and
// again when the file changes.
func TestAutoCompleteCache(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := version(t, "m", ob.Must(ob.Identity(ob.Float, 4)))
	if err := b.AutoComplete(context.Background(), v, &modelconfig.ModelConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := b.AutoComplete(context.Background(), v, &modelconfig.ModelConfig{}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.infos.entries); n != 1 {
		t.Fatalf("%d cache entries, want 1", n)
	}
	if err := os.WriteFile(filepath.Join(v.VersionDir, "model.onnx"), ob.Must(ob.Identity(ob.Float, 5, 5)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &modelconfig.ModelConfig{}
	if err := b.AutoComplete(context.Background(), v, cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Input[0].Dims; len(got) != 2 {
		t.Errorf("dims after rewrite = %v, want [5 5]", got)
	}
}
