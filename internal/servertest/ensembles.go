package servertest

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
)

// Ensemble test models, over AddSub's `simple` (INPUT0, INPUT1 INT32 [16],
// OUTPUT0 = sum, OUTPUT1 = difference, max_batch_size 8).

// SimpleConfig is `simple`'s config under the given name.
func SimpleConfig(name string) string {
	return `name: "` + name + `"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
}

// Simple is the `simple` model under the given name.
func Simple(name string) Model {
	return Model{Config: SimpleConfig(name), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))}
}

// Step is one ensemble step: the model, and its input and output maps as
// "composing=ensemble" pairs.
type Step struct {
	Model   string
	Version int64 // 0: -1 (latest)
	In, Out []string
}

// EnsembleConfig writes an ensemble config: inputs and outputs as
// "NAME:TYPE_X:[dims]" and the steps in order.
func EnsembleConfig(name string, maxBatch int, inputs, outputs []string, steps ...Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %q\nplatform: \"ensemble\"\nmax_batch_size: %d\n", name, maxBatch)
	tensors := func(kind string, list []string) {
		for _, t := range list {
			parts := strings.SplitN(t, ":", 3)
			fmt.Fprintf(&b, "%s [ { name: %q data_type: %s dims: %s } ]\n", kind, parts[0], parts[1], parts[2])
		}
	}
	tensors("input", inputs)
	tensors("output", outputs)
	b.WriteString("ensemble_scheduling { step [\n")
	for i, st := range steps {
		if i > 0 {
			b.WriteString(",\n")
		}
		v := st.Version
		if v == 0 {
			v = -1
		}
		fmt.Fprintf(&b, "  { model_name: %q model_version: %d", st.Model, v)
		for _, kv := range st.In {
			k, val, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, " input_map { key: %q value: %q }", k, val)
		}
		for _, kv := range st.Out {
			k, val, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, " output_map { key: %q value: %q }", k, val)
		}
		b.WriteString(" }")
	}
	b.WriteString("\n] }\n")
	return b.String()
}

// Ensemble is an ensemble model folder (an empty version 1).
func Ensemble(config string) Model { return Model{Config: config, ONNX: nil} }

// Chain is the two-step ensemble of `simple` the ensemble tests share:
// IN0, IN1 → simple → (sum, diff) → simple → OUT0 = 2·IN0, OUT1 = 2·IN1.
func Chain(name string) Model {
	return Ensemble(EnsembleConfig(name, 8,
		[]string{"IN0:TYPE_INT32:[ 16 ]", "IN1:TYPE_INT32:[ 16 ]"}, []string{"OUT0:TYPE_INT32:[ 16 ]", "OUT1:TYPE_INT32:[ 16 ]"},
		Step{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=sum", "OUTPUT1=diff"}},
		Step{Model: "simple", In: []string{"INPUT0=sum", "INPUT1=diff"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}}))
}

// Twice is an ensemble of ensembles: the Chain named inner, twice over
// (OUT0 = 4·IN0, OUT1 = 4·IN1).
func Twice(name, inner string) Model {
	return Ensemble(EnsembleConfig(name, 8,
		[]string{"IN0:TYPE_INT32:[ 16 ]", "IN1:TYPE_INT32:[ 16 ]"}, []string{"OUT0:TYPE_INT32:[ 16 ]", "OUT1:TYPE_INT32:[ 16 ]"},
		Step{Model: inner, In: []string{"IN0=IN0", "IN1=IN1"}, Out: []string{"OUT0=x", "OUT1=y"}},
		Step{Model: inner, In: []string{"IN0=x", "IN1=y"}, Out: []string{"OUT0=OUT0", "OUT1=OUT1"}}))
}

// IDBytes is a BYTES identity (INPUT0 → OUTPUT0, dims [-1], no batching).
func IDBytes(name string) Model {
	return Model{Config: `name: "` + name + `"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.String, -1))}
}

// BytesChain passes BYTES TEXT through the IDBytes named inner twice, to
// ECHO.
func BytesChain(name, inner string) Model {
	return Ensemble(EnsembleConfig(name, 0, []string{"TEXT:TYPE_STRING:[ -1 ]"}, []string{"ECHO:TYPE_STRING:[ -1 ]"},
		Step{Model: inner, In: []string{"INPUT0=TEXT"}, Out: []string{"OUTPUT0=mid"}},
		Step{Model: inner, In: []string{"INPUT0=mid"}, Out: []string{"OUTPUT0=ECHO"}}))
}

// SimpleInputs are an ensemble's inputs IN0 and IN1, shaped as `simple`'s.
var SimpleInputs = []string{"IN0:TYPE_INT32:[ 16 ]", "IN1:TYPE_INT32:[ 16 ]"}

// Int32Rows is an INT32 tensor of rows rows of 16 values, f(i) at column i.
func Int32Rows(name string, rows int, f func(i int) int32) *core.Tensor {
	data := make([]byte, 0, 64*rows)
	for i := range 16 * rows {
		data = binary.LittleEndian.AppendUint32(data, uint32(f(i%16)))
	}
	return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: []int64{int64(rows), 16}, Data: data}
}
