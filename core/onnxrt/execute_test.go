package onnxrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// ioConfig writes a config for one model: inputs and outputs of one type
// and dims.
func ioConfig(mbs int, elem ob.DataType, dims string, inputs, outputs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "max_batch_size: %d\n", mbs)
	for _, n := range inputs {
		fmt.Fprintf(&b, "input { name: %q data_type: %s dims: %s }\n", n, coreType(elem).ConfigName(), dims)
	}
	for _, n := range outputs {
		fmt.Fprintf(&b, "output { name: %q data_type: %s dims: %s }\n", n, coreType(elem).ConfigName(), dims)
	}
	return b.String()
}

// execute runs one batch, failing the test on error.
func execute(t testing.TB, in core.BatchInstance, outputs []string, inputs ...*core.Tensor) []*core.Tensor {
	t.Helper()
	b := &core.ConcatBatch{Inputs: inputs, Outputs: outputs}
	if err := in.Execute(context.Background(), b); err != nil {
		t.Fatalf("execute: %v", err)
	}
	if len(b.Results) != len(outputs) {
		t.Fatalf("%d results for %d outputs", len(b.Results), len(outputs))
	}
	for i, r := range b.Results {
		if r.Name != outputs[i] {
			t.Errorf("result %d is %q, want %q", i, r.Name, outputs[i])
		}
	}
	return b.Results
}

// decode returns a result's values.
func decode(t testing.TB, elem ob.DataType, r *core.Tensor) []float64 {
	t.Helper()
	if r.DataType != coreType(elem) {
		t.Fatalf("%s: datatype %s, want %s", r.Name, r.DataType, coreType(elem))
	}
	v, err := ob.Decode(elem, r.Data)
	if err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	return v
}

func equalShape(a, b []int64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestExecuteAddSub(t *testing.T) {
	for _, elem := range ob.AddSubTypes {
		t.Run(elem.String(), func(t *testing.T) {
			t.Parallel()
			v := version(t, "simple", ob.Must(ob.AddSub(elem, -1, 16)))
			in := load(t, v, config(t, ioConfig(8, elem, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
			a, b := make([]float64, 32), make([]float64, 32)
			for i := range a {
				a[i], b[i] = float64(i%7+7), float64(i%7)
			}
			shape := []int64{2, 16}
			res := execute(t, in, []string{"OUTPUT1", "OUTPUT0"},
				tensor(t, "INPUT0", elem, shape, a), tensor(t, "INPUT1", elem, shape, b))
			diff, sum := decode(t, elem, res[0]), decode(t, elem, res[1])
			for i := range a {
				if sum[i] != a[i]+b[i] || diff[i] != a[i]-b[i] {
					t.Fatalf("element %d: sum %v diff %v, want %v %v", i, sum[i], diff[i], a[i]+b[i], a[i]-b[i])
				}
			}
			for _, r := range res {
				if !equalShape(r.Shape, shape) {
					t.Errorf("%s shape %v, want %v", r.Name, r.Shape, shape)
				}
			}
		})
	}
}

// stringTensor builds a BYTES tensor.
func stringTensor(name string, shape []int64, vals ...string) *core.Tensor {
	var data []byte
	for _, s := range vals {
		data = core.AppendBytesElement(data, []byte(s))
	}
	return &core.Tensor{Name: name, DataType: core.TypeBytes, Shape: shape, Data: data}
}

// sample returns a tensor of n values of elem that survive a round trip.
func sample(t testing.TB, name string, elem ob.DataType, shape []int64) *core.Tensor {
	n := core.ElementCount(shape)
	if elem == ob.String {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = strings.Repeat("ab", i) + "é"
		}
		return stringTensor(name, shape, vals...)
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = float64(i % 2)
		if elem != ob.Bool {
			vals[i] = float64(i%5) + 0.5*float64(isFloat(elem))
		}
	}
	return tensor(t, name, elem, shape, vals)
}

func isFloat(e ob.DataType) int {
	switch e {
	case ob.Float, ob.Double, ob.Float16, ob.BFloat16:
		return 1
	}
	return 0
}

func TestExecuteIdentity(t *testing.T) {
	for _, elem := range ob.AllTypes {
		t.Run(elem.String(), func(t *testing.T) {
			t.Parallel()
			cases := []struct {
				name   string
				model  []byte
				config string
				shape  []int64
			}{
				// batch dim from the inputs; pre-allocated outputs
				{"batched", ob.Must(ob.Identity(elem, -1, 3)), ioConfig(4, elem, "3", []string{"INPUT0"}, []string{"OUTPUT0"}), []int64{2, 3}},
				// dynamic dims: ORT allocates (FP16/BF16: traced from the input)
				{"dynamic", ob.Must(ob.Identity(elem, -1, -1)), ioConfig(0, elem, "[-1, -1]", []string{"INPUT0"}, []string{"OUTPUT0"}), []int64{3, 2}},
				{"fixed", ob.Must(ob.Identity(elem, 2, 2)), ioConfig(0, elem, "[2, 2]", []string{"INPUT0"}, []string{"OUTPUT0"}), []int64{2, 2}},
				{"empty", ob.Must(ob.Identity(elem, -1, 4)), ioConfig(0, elem, "[-1, 4]", []string{"INPUT0"}, []string{"OUTPUT0"}), []int64{0, 4}},
				{"empty batch", ob.Must(ob.Identity(elem, -1, 4)), ioConfig(4, elem, "4", []string{"INPUT0"}, []string{"OUTPUT0"}), []int64{0, 4}},
			}
			for _, tc := range cases {
				in := load(t, version(t, "identity", tc.model), config(t, tc.config))
				x := sample(t, "INPUT0", elem, tc.shape)
				r := execute(t, in, []string{"OUTPUT0"}, x)[0]
				if r.DataType != x.DataType || !equalShape(r.Shape, x.Shape) || !bytes.Equal(r.Data, x.Data) {
					t.Errorf("%s: got %s%v % x, want %s%v % x", tc.name, r.DataType, r.Shape, r.Data, x.DataType, x.Shape, x.Data)
				}
			}
		})
	}
}

func TestExecuteMatMul(t *testing.T) {
	const k, n = 3, 2
	w := ob.MatMulWeights(k, n)
	for _, elem := range ob.MatMulTypes {
		t.Run(elem.String(), func(t *testing.T) {
			t.Parallel()
			v := version(t, "matmul", ob.Must(ob.MatMul(elem, -1, k, n)))
			cfg := fmt.Sprintf(`max_batch_size: 4
				input { name: "x" data_type: %[1]s dims: %[2]d }
				output { name: "y" data_type: %[1]s dims: %[3]d }`, coreType(elem).ConfigName(), k, n)
			in := load(t, v, config(t, cfg))
			x := []float64{1, 2, 3, 0, 1, 2}
			y := decode(t, elem, execute(t, in, []string{"y"}, tensor(t, "x", elem, []int64{2, k}, x))[0])
			for r := range 2 {
				for c := range n {
					want := 0.0
					for i := range k {
						want += x[r*k+i] * w[i*n+c]
					}
					if y[r*n+c] != want {
						t.Fatalf("y[%d][%d] = %v, want %v", r, c, y[r*n+c], want)
					}
				}
			}
		})
	}
}

// testData returns a model from onnxruntime_go's test_data.
func testData(t *testing.T, name string) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yalue/onnxruntime_go").Output()
	if err != nil {
		t.Fatalf("locate onnxruntime_go: %v", err)
	}
	return readFile(t, filepath.Join(strings.TrimSpace(string(out)), "test_data", name))
}

// TestExecuteFloat16File runs onnxruntime_go's example_float16.onnx: FP16 in,
// BF16 out (x*3), both static shapes, so the output is pre-allocated.
func TestExecuteFloat16File(t *testing.T) {
	v := version(t, "f16", testData(t, "example_float16.onnx"))
	in := load(t, v, config(t, `
		input { name: "InputA" data_type: TYPE_FP16 dims: [1, 2, 2, 2] }
		output { name: "OutputA" data_type: TYPE_BF16 dims: [1, 2, 2, 2] }`))
	x := []float64{0.5, -1, 2.25, 3, 0, 100, -0.125, 7}
	y := decode(t, ob.BFloat16, execute(t, in, []string{"OutputA"}, tensor(t, "InputA", ob.Float16, []int64{1, 2, 2, 2}, x))[0])
	for i := range x {
		if want := x[i] * 3; math.Abs(y[i]-want) > math.Abs(want)/100 {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

// TestExecuteHalfOutputs covers FP16/BF16 outputs that ORT must allocate
// (shape unknown before the run), which take the raw C API path, next to
// outputs of other kinds: pre-allocated, ORT-allocated numbers and strings.
func TestExecuteHalfOutputs(t *testing.T) {
	for _, elem := range []ob.DataType{ob.Float16, ob.BFloat16} {
		t.Run(elem.String(), func(t *testing.T) {
			g := ob.NewGraph("mixed")
			g.Input("H", elem, -1, -1)
			g.Input("S", ob.String, -1)
			g.Input("F", ob.Float, 2)
			g.Output("H_OUT", elem, -1, -1)  // ORT allocates: raw read
			g.Output("S_OUT", ob.String, -1) // ORT allocates: raw read
			g.Output("F_OUT", ob.Float, 2)   // pre-allocated
			g.Output("HH", elem, -1, -1)     // Concat, twice as long
			g.Node("Identity", []string{"H"}, []string{"H_OUT"})
			g.Node("Identity", []string{"S"}, []string{"S_OUT"})
			g.Node("Identity", []string{"F"}, []string{"F_OUT"})
			g.Node("Concat", []string{"H", "H"}, []string{"HH"}, ob.AttrInt("axis", 0))
			cfg := fmt.Sprintf(`
				input { name: "H" data_type: %[1]s dims: [-1, -1] }
				input { name: "S" data_type: TYPE_STRING dims: [-1] }
				input { name: "F" data_type: TYPE_FP32 dims: [2] }
				output { name: "H_OUT" data_type: %[1]s dims: [-1, -1] }
				output { name: "S_OUT" data_type: TYPE_STRING dims: [-1] }
				output { name: "F_OUT" data_type: TYPE_FP32 dims: [2] }
				output { name: "HH" data_type: %[1]s dims: [-1, -1] }`, coreType(elem).ConfigName())
			in := load(t, version(t, "mixed", ob.Must(ob.Model(g, ob.DefaultOpset))), config(t, cfg))
			for _, rows := range []int64{3, 0} {
				h := sample(t, "H", elem, []int64{rows, 5})
				s := stringTensor("S", []int64{2}, "x", "")
				f := tensor(t, "F", ob.Float, []int64{2}, []float64{1.5, -2})
				res := execute(t, in, []string{"HH", "F_OUT", "H_OUT", "S_OUT"}, h, s, f)
				want := []*core.Tensor{
					{Shape: []int64{2 * rows, 5}, Data: append(bytes.Clone(h.Data), h.Data...)},
					f, h, s,
				}
				for i, r := range res {
					if !equalShape(r.Shape, want[i].Shape) || !bytes.Equal(r.Data, want[i].Data) {
						t.Errorf("rows %d: %s = %v % x, want %v % x", rows, r.Name, r.Shape, r.Data, want[i].Shape, want[i].Data)
					}
				}
			}
		})
	}
}

// TestExecuteZeroDimOutput runs onnxruntime_go's example_0_dim_output.onnx,
// whose output [2, N, 8] has N = 0 for zero input, allocated by ORT.
func TestExecuteZeroDimOutput(t *testing.T) {
	v := version(t, "zero", testData(t, "example_0_dim_output.onnx"))
	in := load(t, v, config(t, `
		input { name: "x" data_type: TYPE_FP32 dims: [2, 8] }
		output { name: "y" data_type: TYPE_FP32 dims: [-1, -1, 8] }`))
	r := execute(t, in, []string{"y"}, tensor(t, "x", ob.Float, []int64{2, 8}, make([]float64, 16)))[0]
	if !equalShape(r.Shape, []int64{2, 0, 8}) || len(r.Data) != 0 {
		t.Errorf("y = %v with %d bytes, want [2 0 8] and none", r.Shape, len(r.Data))
	}
}

func TestExecuteScalar(t *testing.T) {
	for _, elem := range []ob.DataType{ob.Int32, ob.Float, ob.Bool, ob.Uint8, ob.Int64, ob.Double, ob.Int8, ob.Uint16, ob.Int16, ob.Uint32, ob.Uint64} {
		v := version(t, "scalar", ob.Must(ob.Identity(elem)))
		in := load(t, v, config(t, ioConfig(0, elem, "1", []string{"INPUT0"}, []string{"OUTPUT0"})))
		x := tensor(t, "INPUT0", elem, []int64{1}, []float64{1})
		r := execute(t, in, []string{"OUTPUT0"}, x)[0]
		if !equalShape(r.Shape, []int64{1}) || !bytes.Equal(r.Data, x.Data) {
			t.Errorf("%v: got %v % x, want [1] % x", elem, r.Shape, r.Data, x.Data)
		}
	}
	for _, elem := range []ob.DataType{ob.String, ob.Float16} {
		v := version(t, "scalar", ob.Must(ob.Identity(elem)))
		_, err := loadKind(v, config(t, ioConfig(0, elem, "1", []string{"INPUT0"}, []string{"OUTPUT0"})), 2)
		if err == nil || !strings.Contains(err.Error(), "is not supported") || core.CodeOf(err) != core.CodeUnsupported {
			t.Errorf("%v scalar: error %v, want unsupported", elem, err)
		}
	}
}

func TestExecuteOutputSelection(t *testing.T) {
	v := version(t, "three", ob.Must(ob.ThreeOutputs(ob.Int32, -1, 2)))
	in := load(t, v, config(t, ioConfig(4, ob.Int32, "2", []string{"INPUT0"}, []string{"OUTPUT0", "OUTPUT1", "OUTPUT2"})))
	x := tensor(t, "INPUT0", ob.Int32, []int64{1, 2}, []float64{10, 20})
	for _, outs := range [][]string{{"OUTPUT1"}, {"OUTPUT2", "OUTPUT0"}, {"OUTPUT0", "OUTPUT1", "OUTPUT2"}, {}} {
		res := execute(t, in, outs, x)
		for i, name := range outs {
			k := float64(name[len(name)-1] - '0')
			if got := decode(t, ob.Int32, res[i]); got[0] != 10+k || got[1] != 20+k {
				t.Errorf("%s = %v, want [%v %v]", name, got, 10+k, 20+k)
			}
		}
	}
}

func TestExecuteErrors(t *testing.T) {
	v := version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 16)))
	in := load(t, v, config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
	x := func(name string) *core.Tensor { return tensor(t, name, ob.Int32, []int64{1, 16}, make([]float64, 16)) }
	tests := []struct {
		name    string
		batch   core.ConcatBatch
		wantErr string
	}{
		{"missing input", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0")}}, "expected input 'INPUT1' for model 'simple' is missing"},
		{"unknown input", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), x("INPUT1"), x("INPUT9")}}, "unexpected inference input 'INPUT9'"},
		{"input twice", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), x("INPUT0")}}, "input 'INPUT0' given twice"},
		{"unknown output", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), x("INPUT1")}, Outputs: []string{"OUTPUT7"}}, "unexpected inference output 'OUTPUT7'"},
		{"wrong type", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), tensor(t, "INPUT1", ob.Float, []int64{1, 16}, make([]float64, 16))}}, "input 'INPUT1' has datatype FP32, model expects INT32"},
		{"short data", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), {Name: "INPUT1", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: make([]byte, 7)}}}, "input 'INPUT1' holds 7 bytes"},
		{"wrong shape", core.ConcatBatch{Inputs: []*core.Tensor{x("INPUT0"), tensor(t, "INPUT1", ob.Int32, []int64{2, 8}, make([]float64, 16))}, Outputs: []string{"OUTPUT0"}}, "onnx runtime error"},
	}
	for _, tc := range tests {
		b := tc.batch
		err := in.Execute(context.Background(), &b)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	// The instance still works afterwards.
	res := execute(t, in, []string{"OUTPUT0"}, x("INPUT0"), x("INPUT1"))
	if len(res[0].Data) != 64 {
		t.Errorf("after errors: %d bytes", len(res[0].Data))
	}
}

func TestExecuteTimestampsAndClose(t *testing.T) {
	v := version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 16)))
	in, err := loadKind(v, config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})), 2)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor(t, "INPUT0", ob.Int32, []int64{1, 16}, make([]float64, 16))
	y := tensor(t, "INPUT1", ob.Int32, []int64{1, 16}, make([]float64, 16))
	b := &core.ConcatBatch{Inputs: []*core.Tensor{x, y}, Outputs: []string{"OUTPUT0"}}
	if err := in.Execute(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	ts := []time.Time{b.ComputeStart, b.InferStart, b.InferEnd, b.ComputeEnd}
	for i, tm := range ts {
		if tm.IsZero() || i > 0 && tm.Before(ts[i-1]) {
			t.Fatalf("timestamps out of order: %v", ts)
		}
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	if err := in.Execute(context.Background(), b); err == nil || core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("execute after close: %v", err)
	}
}

// slowModel chains 480 MatMuls of a square matrix with itself:
// milliseconds for a 2x2 input, seconds for 512x512. Many short nodes
// rather than a few long ones: ONNX Runtime checks the terminate flag
// between nodes, so one node's time (a few ms here, tens on a machine
// several times slower and busy) is what a cancellation waits for.
func slowModel(t *testing.T) []byte {
	const nodes = 480
	g := ob.NewGraph("slow")
	g.Input("x", ob.Float, -1, -1)
	g.Output("y", ob.Float, -1, -1)
	prev := "x"
	for i := range nodes {
		out := fmt.Sprintf("m%d", i)
		if i == nodes-1 {
			out = "y"
		}
		g.Node("MatMul", []string{prev, "x"}, []string{out})
		prev = out
	}
	return ob.Must(ob.Model(g, ob.DefaultOpset))
}

func TestExecuteCancel(t *testing.T) {
	in := load(t, version(t, "slow", slowModel(t)), config(t, ioConfig(0, ob.Float, "[-1, -1]", []string{"x"}, []string{"y"})))
	small := tensor(t, "x", ob.Float, []int64{2, 2}, []float64{0, 0, 0, 0})
	big := &core.Tensor{Name: "x", DataType: core.TypeFP32, Shape: []int64{512, 512}, Data: make([]byte, 4*512*512)}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := in.Execute(ctx, &core.ConcatBatch{Inputs: []*core.Tensor{small}, Outputs: []string{"y"}}); !errors.Is(err, context.Canceled) || core.CodeOf(err) != core.CodeCancelled {
		t.Fatalf("cancelled before: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err := in.Execute(ctx, &core.ConcatBatch{Inputs: []*core.Tensor{big}, Outputs: []string{"y"}})
	// An error at all means ONNX Runtime stopped the run: a run left to
	// finish returns none (run reports the context only after a failure).
	if !errors.Is(err, context.Canceled) || core.CodeOf(err) != core.CodeCancelled {
		t.Fatalf("cancelled during run: %v (after %v)", err, time.Since(start))
	}
	// Cancelled at 50 ms, it ends within a node or so (about 100 ms on a
	// busy 2-core machine); the whole run takes seconds.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancellation took %v", d)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := in.Execute(ctx, &core.ConcatBatch{Inputs: []*core.Tensor{big}, Outputs: []string{"y"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}

	// The run options are reset: the next run completes.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	b := &core.ConcatBatch{Inputs: []*core.Tensor{small}, Outputs: []string{"y"}}
	if err := in.Execute(ctx, b); err != nil {
		t.Fatalf("run after cancellation: %v", err)
	}
}

func TestExecuteConcurrent(t *testing.T) {
	const instances, runs = 8, 40
	v := version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 16)))
	cfg := config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"}))
	var wg sync.WaitGroup
	errs := make(chan error, instances)
	for k := range instances {
		in := load(t, v, cfg)
		wg.Go(func() {
			for r := range runs {
				a, b := make([]float64, 16*(r%3+1)), make([]float64, 16*(r%3+1))
				for i := range a {
					a[i], b[i] = float64(k*1000+r), float64(i)
				}
				shape := []int64{int64(r%3 + 1), 16}
				batch := &core.ConcatBatch{
					Inputs:  []*core.Tensor{tensor(t, "INPUT0", ob.Int32, shape, a), tensor(t, "INPUT1", ob.Int32, shape, b)},
					Outputs: []string{"OUTPUT0", "OUTPUT1"},
				}
				if err := in.Execute(context.Background(), batch); err != nil {
					errs <- err
					return
				}
				sum, _ := ob.Decode(ob.Int32, batch.Results[0].Data)
				diff, _ := ob.Decode(ob.Int32, batch.Results[1].Data)
				for i := range a {
					if sum[i] != a[i]+b[i] || diff[i] != a[i]-b[i] {
						errs <- fmt.Errorf("instance %d run %d element %d: %v %v", k, r, i, sum[i], diff[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
