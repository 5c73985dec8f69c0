package openai

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/inferd/inferd/core"
	mc "github.com/inferd/inferd/repo/modelconfig"
)

func genConfig(decoupled bool, maxBatch int32, extra ...*mc.ModelInput) *mc.ModelConfig {
	in := []*mc.ModelInput{{Name: "text_input", DataType: mc.DataType_TYPE_STRING, Dims: []int64{1}}}
	return &mc.ModelConfig{Name: "m", MaxBatchSize: maxBatch, Input: append(in, extra...),
		ModelTransactionPolicy: &mc.ModelTransactionPolicy{Decoupled: decoupled}}
}

func optBool(name string) *mc.ModelInput {
	return &mc.ModelInput{Name: name, DataType: mc.DataType_TYPE_BOOL, Dims: []int64{1}, Optional: true}
}

// TestCoreRequest checks the inputs a generation fills, and their shapes,
// against the model's configuration.
func TestCoreRequest(t *testing.T) {
	vllm := []*mc.ModelInput{optBool("stream"), optBool("exclude_input_in_output"), optBool("return_num_input_tokens"),
		optBool("return_num_output_tokens"), {Name: "sampling_parameters", DataType: mc.DataType_TYPE_STRING, Dims: []int64{1}, Optional: true}}
	tests := []struct {
		name    string
		cfg     *mc.ModelConfig
		req     genRequest
		want    string // each input as name shape value
		wantErr bool
	}{
		{name: "vLLM's inputs, decoupled", cfg: genConfig(true, 0, vllm...), req: genRequest{prompt: "hi", stream: true, sampling: []byte(`{"seed":1}`)},
			want: `text_input[1]"hi" stream[1]1 exclude_input_in_output[1]1 return_num_input_tokens[1]1 return_num_output_tokens[1]1 sampling_parameters[1]"{\"seed\":1}"`},
		{name: "echo, no sampling", cfg: genConfig(true, 0, vllm...), req: genRequest{prompt: "", echo: true},
			want: `text_input[1]"" stream[1]0 exclude_input_in_output[1]0 return_num_input_tokens[1]1 return_num_output_tokens[1]1`},
		{name: "not decoupled: stream false", cfg: genConfig(false, 4, optBool("stream")), req: genRequest{prompt: "x", stream: true},
			want: `text_input[1 1]"x" stream[1 1]0`},
		{name: "variable dims", cfg: &mc.ModelConfig{Input: []*mc.ModelInput{{Name: "text_input", DataType: mc.DataType_TYPE_STRING, Dims: []int64{-1}}}},
			req: genRequest{prompt: "é"}, want: `text_input[1]"é"`},
		{name: "optional input left out", cfg: genConfig(false, 0, &mc.ModelInput{Name: "lora", DataType: mc.DataType_TYPE_STRING, Dims: []int64{1}, Optional: true}),
			req: genRequest{prompt: "x"}, want: `text_input[1]"x"`},
		{name: "required unknown input", cfg: genConfig(false, 0, &mc.ModelInput{Name: "max_tokens", DataType: mc.DataType_TYPE_INT32, Dims: []int64{1}}),
			req: genRequest{prompt: "x"}, wantErr: true},
		{name: "two elements", cfg: &mc.ModelConfig{Input: []*mc.ModelInput{{Name: "text_input", DataType: mc.DataType_TYPE_STRING, Dims: []int64{2}}}},
			req: genRequest{prompt: "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.req.coreRequest(tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range req.Inputs {
				v := fmt.Sprint(in.Data)
				if in.DataType == core.TypeBytes {
					elems, err := core.BytesElements(in.Data)
					if err != nil || len(elems) != 1 {
						t.Fatalf("%s: %d elements, %v", in.Name, len(elems), err)
					}
					v = fmt.Sprintf("%q", elems[0])
				} else if len(in.Data) == 1 {
					v = fmt.Sprint(in.Data[0])
				}
				got = append(got, fmt.Sprintf("%s%v%s", in.Name, in.Shape, v))
			}
			if s := fmt.Sprint(got); s != "["+tt.want+"]" {
				t.Fatalf("inputs %s\nwant [%s]", s, tt.want)
			}
		})
	}
}

// TestReadOutput checks what is read from a model's response.
func TestReadOutput(t *testing.T) {
	u32 := func(name string, v uint32) *core.Tensor {
		return &core.Tensor{Name: name, DataType: core.TypeUint32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, v)}
	}
	text := func(elems ...string) *core.Tensor {
		var d []byte
		for _, e := range elems {
			d = core.AppendBytesElement(d, []byte(e))
		}
		return &core.Tensor{Name: "text_output", DataType: core.TypeBytes, Shape: []int64{int64(len(elems))}, Data: d}
	}
	tests := []struct {
		name    string
		outs    []*core.Tensor
		want    genOutput
		wantErr error
	}{
		{"text alone", []*core.Tensor{text("héllo")}, genOutput{"héllo", -1, -1}, nil},
		{"elements joined, counts", []*core.Tensor{u32("num_output_tokens", 2), text("a", "b"), u32("num_input_tokens", 7)}, genOutput{"ab", 7, 2}, nil},
		{"no text", []*core.Tensor{u32("num_input_tokens", 7)}, genOutput{}, errNoText},
		{"broken framing", []*core.Tensor{{Name: "text_output", DataType: core.TypeBytes, Data: []byte{9, 0, 0, 0, 'a'}}}, genOutput{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readOutput(&core.InferResponse{Outputs: tt.outs})
			switch {
			case tt.name == "broken framing":
				if err == nil {
					t.Fatal("no error for a length past the data")
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
