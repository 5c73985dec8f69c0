package modelconfig

import (
	"slices"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name     string
		dir      string
		text     string
		hasONNX  bool // first subdirectory holds model.onnx
		wantErr  string
		backend  string
		platform string
		file     string
		check    func(t *testing.T, cfg *ModelConfig)
	}{
		{
			name: "empty name takes the directory name",
			dir:  "resnet", text: `platform: "onnxruntime_onnx"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.Name != "resnet" {
					t.Errorf("name = %q", cfg.Name)
				}
			},
		},
		{
			name: "explicit name is kept even when it differs",
			dir:  "dir", text: `name: "other" backend: "onnxruntime"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.Name != "other" {
					t.Errorf("name = %q", cfg.Name)
				}
			},
		},
		{
			name: "backend onnxruntime fills platform and file",
			dir:  "m", text: `backend: "onnxruntime"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
		},
		{
			name: "default_model_filename model.onnx selects onnxruntime",
			dir:  "m", text: `default_model_filename: "model.onnx"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
		},
		{
			name: "no config, first subdirectory has model.onnx",
			dir:  "m", text: ``, hasONNX: true,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
		},
		{
			name: "non-default onnx file name without platform or backend is rejected",
			dir:  "m", text: `default_model_filename: "x.onnx"`, hasONNX: true,
			wantErr: "unexpected platform type '' for m",
		},
		{
			name: "custom file name with explicit backend is fine",
			dir:  "m", text: `backend: "onnxruntime" default_model_filename: "x.onnx"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "x.onnx",
		},
		{
			name: "ensemble stays backend-less",
			dir:  "e", text: `platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" } ] }`, hasONNX: true,
			backend: "", platform: "ensemble", file: "",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.Optimization != nil {
					t.Error("ensembles must not get pinned-memory optimization defaults")
				}
			},
		},
		{
			name: "model without config and without a detectable file needs <name>.<backend>",
			dir:  "plain", text: ``,
			wantErr: "Could not determine backend for model 'plain'",
		},
		{
			name: "custom backend from directory name",
			dir:  "my.identity", text: ``,
			backend: "identity", platform: "", file: "model.identity",
		},
		{
			name: "tensorrt precedence over onnx detection",
			dir:  "m", text: `default_model_filename: "model.plan"`, hasONNX: true,
			backend: "tensorrt", platform: "tensorrt_plan", file: "model.plan",
		},
		{
			name: "tensorflow savedmodel",
			dir:  "m", text: `default_model_filename: "model.savedmodel"`,
			backend: "tensorflow", platform: "tensorflow_savedmodel", file: "model.savedmodel",
		},
		{
			name: "pytorch by file name",
			dir:  "m", text: `default_model_filename: "model.pt"`,
			backend: "pytorch", platform: "pytorch_libtorch", file: "model.pt",
		},
		{
			name: "python", dir: "m", text: `default_model_filename: "model.py"`,
			backend: "python", platform: "", file: "model.py",
		},
		{
			name: "openvino", dir: "m", text: `default_model_filename: "model.xml"`,
			backend: "openvino", platform: "", file: "model.xml",
		},
		{
			name: "unknown platform without backend",
			dir:  "m", text: `platform: "caffe2_netdef"`, hasONNX: true,
			wantErr: "unexpected platform type 'caffe2_netdef' for m",
		},
		{
			name: "defaults: version policy, pinned memory",
			dir:  "m", text: `backend: "onnxruntime"`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.GetVersionPolicy().GetLatest().GetNumVersions() != 1 {
					t.Errorf("version_policy = %v", cfg.VersionPolicy)
				}
				o := cfg.GetOptimization()
				if !o.GetInputPinnedMemory().GetEnable() || !o.GetOutputPinnedMemory().GetEnable() {
					t.Errorf("optimization = %v", o)
				}
			},
		},
		{
			name: "explicit latest {} is kept (selects nothing later)",
			dir:  "m", text: `backend: "onnxruntime" version_policy: { latest: {} }`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if l := cfg.GetVersionPolicy().GetLatest(); l == nil || l.NumVersions != 0 {
					t.Errorf("version_policy = %v", cfg.VersionPolicy)
				}
			},
		},
		{
			name: "explicit pinned memory off is kept",
			dir:  "m", text: `backend: "onnxruntime" optimization { input_pinned_memory { enable: false } }`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.Optimization.InputPinnedMemory.Enable || !cfg.Optimization.OutputPinnedMemory.Enable {
					t.Errorf("optimization = %v", cfg.Optimization)
				}
			},
		},
		{
			name: "dynamic_batching {} with max_batch_size 8 prefers [8]",
			dir:  "m", text: `backend: "onnxruntime" max_batch_size: 8 dynamic_batching {}`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if got := cfg.GetDynamicBatching().GetPreferredBatchSize(); !slices.Equal(got, []int32{8}) {
					t.Errorf("preferred_batch_size = %v", got)
				}
			},
		},
		{
			name: "dynamic_batching {} without batching keeps preferred sizes empty",
			dir:  "m", text: `backend: "onnxruntime" dynamic_batching {}`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if got := cfg.GetDynamicBatching().GetPreferredBatchSize(); len(got) != 0 {
					t.Errorf("preferred_batch_size = %v", got)
				}
			},
		},
		{
			name: "explicit preferred sizes are kept",
			dir:  "m", text: `backend: "onnxruntime" max_batch_size: 8 dynamic_batching { preferred_batch_size: [4, 8] }`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if got := cfg.GetDynamicBatching().GetPreferredBatchSize(); !slices.Equal(got, []int32{4, 8}) {
					t.Errorf("preferred_batch_size = %v", got)
				}
			},
		},
		{
			name: "sequence batching idle default and oldest preferred size",
			dir:  "m", text: `backend: "onnxruntime" max_batch_size: 4 sequence_batching { oldest {} }`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				sb := cfg.GetSequenceBatching()
				if sb.MaxSequenceIdleMicroseconds != 1000000 {
					t.Errorf("idle = %d", sb.MaxSequenceIdleMicroseconds)
				}
				if got := sb.GetOldest().GetPreferredBatchSize(); !slices.Equal(got, []int32{4}) {
					t.Errorf("oldest preferred = %v", got)
				}
			},
		},
		{
			name: "sequence idle explicit value kept",
			dir:  "m", text: `backend: "onnxruntime" sequence_batching { max_sequence_idle_microseconds: 5 }`,
			backend: "onnxruntime", platform: "onnxruntime_onnx", file: "model.onnx",
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.GetSequenceBatching().MaxSequenceIdleMicroseconds != 5 {
					t.Error("explicit idle overwritten")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.text)
			err := Normalize(cfg, tc.dir, tc.hasONNX)
			wantErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			if cfg.Backend != tc.backend || cfg.Platform != tc.platform || cfg.DefaultModelFilename != tc.file {
				t.Errorf("backend/platform/file = %q/%q/%q, want %q/%q/%q",
					cfg.Backend, cfg.Platform, cfg.DefaultModelFilename, tc.backend, tc.platform, tc.file)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestNormalizeIsIdempotent(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			once := normalizedFromGolden(t, tc.name, tc.gpus)
			twice := mustParse(t, string(readTestdata(t, "golden/"+tc.name+".pbtxt")))
			for range 2 {
				if err := Normalize(twice, tc.name, false); err != nil {
					t.Fatal(err)
				}
				if err := NormalizeInstanceGroups(twice, tc.gpus); err != nil {
					t.Fatal(err)
				}
			}
			a, _ := MarshalJSON(once)
			b, _ := MarshalJSON(twice)
			if string(a) != string(b) {
				t.Fatalf("second normalisation changed the config:\n%s\n%s", a, b)
			}
		})
	}
}

func TestNormalizeNil(t *testing.T) {
	if Normalize(nil, "m", false) == nil {
		t.Fatal("Normalize(nil) must fail")
	}
}
