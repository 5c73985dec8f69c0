package padbatch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/inferd/inferd/core/padbatch"
	"github.com/inferd/inferd/repo/modelconfig"
)

const base = `name: "enc"
platform: "onnxruntime_onnx"
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "mask8" data_type: TYPE_UINT8 dims: [ -1 ] },
  { name: "fixed" data_type: TYPE_INT64 dims: [ 4 ] },
  { name: "scale" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "flat" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 8 ] } ]
`

func param(k, v string) string {
	return `parameters { key: "` + k + `" value { string_value: "` + v + `" } }` + "\n"
}

func TestParse(t *testing.T) {
	batching := "max_batch_size: 8\ndynamic_batching { }\n"
	for _, tc := range []struct {
		name, extra string
		want        *padbatch.Spec // nil with wantErr "": no opt-in
		wantErr     string
	}{
		{name: "none", extra: batching},
		{name: "pads only", extra: batching + param("pad_inputs", "input_ids=0, attention_mask=0"),
			want: &padbatch.Spec{Pad: map[string]int64{"input_ids": 0, "attention_mask": 0}}},
		{name: "pads and budget", extra: batching + param("pad_inputs", "input_ids=3,mask8=255") + param("token_budget", "4096"),
			want: &padbatch.Spec{Pad: map[string]int64{"input_ids": 3, "mask8": 255}, Budget: 4096}},
		{name: "budget alone", extra: batching + param("token_budget", "64"), wantErr: "needs pad_inputs"},
		{name: "bad budget", extra: batching + param("pad_inputs", "input_ids=0") + param("token_budget", "0"), wantErr: "positive integer"},
		{name: "no batching", extra: "max_batch_size: 8\n" + param("pad_inputs", "input_ids=0"), wantErr: "dynamic_batching"},
		{name: "max batch 0", extra: "dynamic_batching { }\n" + param("pad_inputs", "input_ids=0"), wantErr: "max_batch_size > 0"},
		{name: "unknown input", extra: batching + param("pad_inputs", "ids=0"), wantErr: "unknown input 'ids'"},
		{name: "fixed dim", extra: batching + param("pad_inputs", "fixed=0"), wantErr: "last dim must be variable"},
		{name: "float", extra: batching + param("pad_inputs", "scale=0"), wantErr: "only integer inputs"},
		{name: "ragged", extra: batching + param("pad_inputs", "flat=0"), wantErr: "ragged"},
		{name: "out of range", extra: batching + param("pad_inputs", "mask8=-1"), wantErr: "does not fit"},
		{name: "not a pair", extra: batching + param("pad_inputs", "input_ids"), wantErr: "not input=value"},
		{name: "not a number", extra: batching + param("pad_inputs", "input_ids=x"), wantErr: "not an integer"},
		{name: "twice", extra: batching + param("pad_inputs", "input_ids=0,input_ids=1"), wantErr: "twice"},
		{name: "empty", extra: batching + param("pad_inputs", " , "), wantErr: "names no input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := modelconfig.Parse([]byte(base + tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			got, err := padbatch.Parse(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, padbatch.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Budget != tc.want.Budget || len(got.Pad) != len(tc.want.Pad) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for k, v := range tc.want.Pad {
				if p, ok := got.Pads(k); !ok || p != v {
					t.Errorf("Pads(%q) = %d, %v; want %d", k, p, ok, v)
				}
			}
		})
	}
}

// FuzzParse: any pad_inputs and token_budget text gives a spec whose
// inputs are the config's padable ones, or ErrInvalid; never a panic.
func FuzzParse(f *testing.F) {
	for _, seed := range [][2]string{
		{"input_ids=0,attention_mask=0", "4096"}, {"input_ids=3,mask8=255", ""}, {"", "64"},
		{"input_ids", "x"}, {"=,=,", "-1"}, {"mask8=256", "99999999999999999999"}, {"input_ids=0,input_ids=0", "1"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pads, budget string) {
		extra := "max_batch_size: 8\ndynamic_batching { }\n"
		cfg, err := modelconfig.Parse([]byte(base + extra))
		if err != nil {
			t.Fatal(err)
		}
		params := map[string]*modelconfig.ModelParameter{}
		if pads != "" {
			params["pad_inputs"] = &modelconfig.ModelParameter{StringValue: pads}
		}
		if budget != "" {
			params["token_budget"] = &modelconfig.ModelParameter{StringValue: budget}
		}
		cfg.Parameters = params
		spec, err := padbatch.Parse(cfg)
		if err != nil {
			if !errors.Is(err, padbatch.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if spec == nil {
			if pads != "" || budget != "" {
				t.Fatalf("no spec and no error for %q %q", pads, budget)
			}
			return
		}
		for name := range spec.Pad {
			if name != "input_ids" && name != "attention_mask" && name != "mask8" {
				t.Fatalf("input %q accepted", name)
			}
		}
		if budget != "" && spec.Budget < 1 {
			t.Fatalf("budget %q gave %d", budget, spec.Budget)
		}
	})
}
