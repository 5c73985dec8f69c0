package modelconfig

import (
	"reflect"
	"testing"
)

func TestNormalizeInstanceGroups(t *testing.T) {
	type group struct {
		name  string
		kind  ModelInstanceGroup_Kind
		count int32
		gpus  []int32
	}
	const (
		auto  = ModelInstanceGroup_KIND_AUTO
		gpu   = ModelInstanceGroup_KIND_GPU
		cpu   = ModelInstanceGroup_KIND_CPU
		model = ModelInstanceGroup_KIND_MODEL
	)
	tests := []struct {
		name    string
		text    string // appended to a valid config named "m"
		backend string // defaults to onnxruntime
		gpus    []int32
		want    []group
		wantErr string
	}{
		{name: "no group on CPU-only host: one KIND_CPU group named after the model, count 2",
			want: []group{{"m", cpu, 2, nil}}},
		{name: "no group with GPUs: KIND_GPU on all GPUs, count 1",
			gpus: []int32{1, 0}, want: []group{{"m", gpu, 1, []int32{0, 1}}}},
		{name: "KIND_CPU without count gets 2 for onnxruntime",
			text: `instance_group [ { kind: KIND_CPU } ]`, want: []group{{"m_0", cpu, 2, nil}}},
		{name: "KIND_CPU without count gets 1 for other backends", backend: "python",
			text: `instance_group [ { kind: KIND_CPU } ]`, want: []group{{"m_0", cpu, 1, nil}}},
		{name: "KIND_CPU count 2 for tensorflow too", backend: "tensorflow",
			text: `platform: "tensorflow_graphdef" instance_group [ { kind: KIND_CPU count: -3 } ]`, want: []group{{"m_0", cpu, 2, nil}}},
		{name: "KIND_GPU with explicit gpus", gpus: []int32{0, 1},
			text: `instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1 ] } ]`, want: []group{{"m_0", gpu, 2, []int32{0, 1}}}},
		{name: "KIND_GPU without gpus gets all", gpus: []int32{0, 1, 2},
			text: `instance_group [ { name: "g" kind: KIND_GPU } ]`, want: []group{{"g", gpu, 1, []int32{0, 1, 2}}}},
		{name: "unnamed groups use config index", gpus: []int32{0},
			text: `instance_group [ { name: "first" kind: KIND_CPU count: 1 }, { kind: KIND_GPU }, { kind: KIND_MODEL } ]`,
			want: []group{{"first", cpu, 1, nil}, {"m_1", gpu, 1, []int32{0}}, {"m_2", model, 1, nil}}},
		{name: "KIND_AUTO with usable listed gpu becomes GPU", gpus: []int32{0, 1},
			text: `instance_group [ { gpus: [ 1 ] } ]`, want: []group{{"m_0", gpu, 1, []int32{1}}}},
		{name: "KIND_AUTO with unusable listed gpu falls back to CPU and then fails", gpus: []int32{0},
			text:    `instance_group [ { gpus: [ 3 ] } ]`,
			wantErr: "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs"},
		{name: "KIND_GPU on a host without GPUs fails",
			text:    `instance_group [ { kind: KIND_GPU } ]`,
			wantErr: "instance group m_0 of model m has kind KIND_GPU but no GPUs are available"},
		{name: "KIND_GPU with unknown gpu id fails", gpus: []int32{0, 1},
			text:    `instance_group [ { kind: KIND_GPU gpus: [ 2 ] } ]`,
			wantErr: "instance group m_0 of model m specifies invalid or unsupported gpu id 2. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: 0, 1"},
		{name: "KIND_CPU listing gpus fails", gpus: []int32{0},
			text:    `instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]`,
			wantErr: "has kind KIND_CPU but specifies one or more GPUs"},
		{name: "KIND_MODEL listing gpus fails", gpus: []int32{0},
			text:    `instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]`,
			wantErr: "has kind KIND_MODEL but specifies one or more GPUs"},
		{name: "profile on onnx fails",
			text:    `instance_group [ { kind: KIND_CPU profile: [ "0" ] } ]`,
			wantErr: "instance group m_0 of model m and platform onnxruntime_onnxspecifies profile field which is only supported for TensorRT models"},
		{name: "profile on tensorrt is fine", backend: "tensorrt", gpus: []int32{0},
			text: `instance_group [ { kind: KIND_GPU profile: [ "0", "1" ] } ]`, want: []group{{"m_0", gpu, 1, []int32{0}}}},
		{name: "negative profile on tensorrt fails", backend: "tensorrt", gpus: []int32{0},
			text:    `instance_group [ { kind: KIND_GPU profile: [ "-1" ] } ]`,
			wantErr: "specifies invalid profile -1"},
		{name: "non-numeric profile on tensorrt fails", backend: "tensorrt", gpus: []int32{0},
			text:    `instance_group [ { kind: KIND_GPU profile: [ "abc" ] } ]`,
			wantErr: "unable to parse 'abc'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backend := tc.backend
			if backend == "" {
				backend = "onnxruntime"
			}
			cfg := mustParse(t, `name: "m" backend: "`+backend+`" `+tc.text)
			if err := Normalize(cfg, "m", false); err != nil {
				t.Fatal(err)
			}
			err := NormalizeInstanceGroups(cfg, tc.gpus)
			wantErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			var got []group
			for _, g := range cfg.InstanceGroup {
				got = append(got, group{g.Name, g.Kind, g.Count, g.Gpus})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("groups = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNormalizeInstanceGroupsEnsemble(t *testing.T) {
	cfg := mustParse(t, ensembleWith(""))
	if err := Normalize(cfg, "m", false); err != nil {
		t.Fatal(err)
	}
	if err := NormalizeInstanceGroups(cfg, []int32{0}); err != nil {
		t.Fatal(err)
	}
	if len(cfg.InstanceGroup) != 0 || Instances(cfg) != nil {
		t.Fatalf("ensemble got instance groups: %v", cfg.InstanceGroup)
	}
}

func TestInstances(t *testing.T) {
	cfg := mustParse(t, `name: "m" backend: "onnxruntime" instance_group [
  { name: "g" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] },
  { kind: KIND_CPU passive: true },
  { kind: KIND_MODEL host_policy: "numa1" }
]`)
	if err := Normalize(cfg, "m", false); err != nil {
		t.Fatal(err)
	}
	if err := NormalizeInstanceGroups(cfg, []int32{0, 1}); err != nil {
		t.Fatal(err)
	}
	got := Instances(cfg)
	gpu, cpu, model := ModelInstanceGroup_KIND_GPU, ModelInstanceGroup_KIND_CPU, ModelInstanceGroup_KIND_MODEL
	want := []InstanceRef{
		{GroupName: "g", GroupIndex: 0, Name: "g_0", Kind: gpu, DeviceID: 0, HostPolicy: "gpu_0"},
		{GroupName: "g", GroupIndex: 0, Name: "g_0", Kind: gpu, DeviceID: 1, HostPolicy: "gpu_1"},
		{GroupName: "g", GroupIndex: 0, Name: "g_1", Kind: gpu, DeviceID: 0, HostPolicy: "gpu_0"},
		{GroupName: "g", GroupIndex: 0, Name: "g_1", Kind: gpu, DeviceID: 1, HostPolicy: "gpu_1"},
		{GroupName: "m_1", GroupIndex: 1, Name: "m_1_0", Kind: cpu, HostPolicy: "cpu", Passive: true},
		{GroupName: "m_1", GroupIndex: 1, Name: "m_1_1", Kind: cpu, HostPolicy: "cpu", Passive: true},
		{GroupName: "m_2", GroupIndex: 2, Name: "m_2_0", Kind: model, HostPolicy: "numa1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Instances =\n%+v\nwant\n%+v", got, want)
	}
}

func TestNormalizeInstanceGroupsNil(t *testing.T) {
	if NormalizeInstanceGroups(nil, nil) == nil {
		t.Fatal("nil config must be rejected")
	}
}
