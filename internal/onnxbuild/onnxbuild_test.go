package onnxbuild

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/internal/onnxbuild/onnxpb"
)

func TestDataType(t *testing.T) {
	tests := []struct {
		dt   DataType
		name string
		size int
	}{
		{Float, "FLOAT", 4}, {Uint8, "UINT8", 1}, {Int8, "INT8", 1},
		{Uint16, "UINT16", 2}, {Int16, "INT16", 2}, {Int32, "INT32", 4},
		{Int64, "INT64", 8}, {String, "STRING", 0}, {Bool, "BOOL", 1},
		{Float16, "FLOAT16", 2}, {Double, "DOUBLE", 8}, {Uint32, "UINT32", 4},
		{Uint64, "UINT64", 8}, {BFloat16, "BFLOAT16", 2},
	}
	if len(tests) != len(AllTypes) {
		t.Fatalf("table has %d types, AllTypes %d", len(tests), len(AllTypes))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if AllTypes[i] != tt.dt {
				t.Errorf("AllTypes[%d] = %v", i, AllTypes[i])
			}
			if got := tt.dt.String(); got != tt.name {
				t.Errorf("String() = %q", got)
			}
			if got := tt.dt.Size(); got != tt.size {
				t.Errorf("Size() = %d, want %d", got, tt.size)
			}
			if !tt.dt.Valid() {
				t.Error("not Valid")
			}
		})
	}
	for _, bad := range []DataType{Undefined, 14, 15, 17, -1} {
		if bad.Valid() || bad.Size() != 0 {
			t.Errorf("%v: Valid %v Size %d", bad, bad.Valid(), bad.Size())
		}
	}
}

func TestModelProtoFields(t *testing.T) {
	g := NewGraph("g")
	g.Input("x", Float, -1, 3, -1)
	g.Output("y", Float, -1, 3, -1)
	g.Node("Relu", []string{"x"}, []string{"y"})
	b, err := Model(g, 15)
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.GetIrVersion() != IRVersion || m.GetProducerName() != Producer {
		t.Errorf("ir_version %d producer %q", m.GetIrVersion(), m.GetProducerName())
	}
	if len(m.OpsetImport) != 1 || m.OpsetImport[0].GetDomain() != "" || m.OpsetImport[0].GetVersion() != 15 {
		t.Errorf("opset_import = %v", m.OpsetImport)
	}
	in := m.GetGraph().GetInput()[0]
	tt := in.GetType().GetTensorType()
	if in.GetName() != "x" || tt.GetElemType() != int32(Float) {
		t.Errorf("input = %v", in)
	}
	dims := tt.GetShape().GetDim()
	if len(dims) != 3 || dims[0].GetDimParam() != "dim0" || dims[1].GetDimValue() != 3 || dims[2].GetDimParam() != "dim2" {
		t.Errorf("dims = %v", dims)
	}
	n := m.GetGraph().GetNode()[0]
	if n.GetOpType() != "Relu" || n.GetName() != "Relu_0" {
		t.Errorf("node = %v", n)
	}
	// A scalar still has a (zero-length) shape: no shape would mean unknown rank.
	s := Must(Identity(Float))
	if err := proto.Unmarshal(s, &m); err != nil {
		t.Fatal(err)
	}
	if sh := m.GetGraph().GetInput()[0].GetType().GetTensorType().GetShape(); sh == nil || len(sh.Dim) != 0 {
		t.Errorf("scalar shape = %v", sh)
	}
}

func TestAttrs(t *testing.T) {
	g := NewGraph("attrs")
	g.Input("x", Float, 2)
	g.Output("y", Float, 2)
	g.Node("Custom", []string{"x"}, []string{"y"},
		AttrInt("i", 7), AttrFloat("f", 1.5), AttrString("s", "hi"),
		AttrInts("is", 1, 2), AttrFloats("fs", 0.5), AttrStrings("ss", "a", "b"))
	mp, err := ModelProto(g, DefaultOpset)
	if err != nil {
		t.Fatal(err)
	}
	a := mp.GetGraph().GetNode()[0].GetAttribute()
	if len(a) != 6 {
		t.Fatalf("%d attributes", len(a))
	}
	type T = onnxpb.AttributeProto_AttributeType
	checks := []struct {
		typ T
		ok  bool
	}{
		{onnxpb.AttributeProto_INT, a[0].GetI() == 7},
		{onnxpb.AttributeProto_FLOAT, a[1].GetF() == 1.5},
		{onnxpb.AttributeProto_STRING, string(a[2].GetS()) == "hi"},
		{onnxpb.AttributeProto_INTS, len(a[3].GetInts()) == 2 && a[3].GetInts()[1] == 2},
		{onnxpb.AttributeProto_FLOATS, len(a[4].GetFloats()) == 1 && a[4].GetFloats()[0] == 0.5},
		{onnxpb.AttributeProto_STRINGS, len(a[5].GetStrings()) == 2 && string(a[5].GetStrings()[1]) == "b"},
	}
	for i, c := range checks {
		if a[i].GetType() != c.typ || !c.ok {
			t.Errorf("attribute %d = %v", i, a[i])
		}
	}
}

func TestGraphErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *Graph)
		want  string
	}{
		{"empty input name", func(g *Graph) { g.Input("", Float, 1) }, "empty name"},
		{"bad input type", func(g *Graph) { g.Input("x", Undefined, 1) }, "invalid element type"},
		{"bad output type", func(g *Graph) { g.Output("y", 99, 1) }, "invalid element type"},
		{"bad dim", func(g *Graph) { g.Input("x", Float, -2) }, "dimension 0 is -2"},
		{"no outputs", func(g *Graph) { g.Input("x", Float, 1) }, "no outputs"},
		{"undefined node input", func(g *Graph) {
			g.Output("y", Float, 1)
			g.Node("Relu", []string{"x"}, []string{"y"})
		}, `input "x" not defined`},
		{"unproduced output", func(g *Graph) {
			g.Input("x", Float, 1)
			g.Output("y", Float, 1)
		}, `output "y" is not produced`},
		{"duplicate input", func(g *Graph) {
			g.Input("x", Float, 1)
			g.Input("x", Float, 1)
			g.Output("x", Float, 1)
		}, `input "x" already defined`},
		{"node redefines input", func(g *Graph) {
			g.Input("x", Float, 1)
			g.Output("x", Float, 1)
			g.Node("Relu", []string{"x"}, []string{"x"})
		}, `already defined as input`},
		{"output twice", func(g *Graph) {
			g.Input("x", Float, 1)
			g.Output("x", Float, 1)
			g.Output("x", Float, 1)
		}, "declared twice"},
		{"duplicate initializer", func(g *Graph) {
			g.Initializer("w", Uint8, nil, []byte{1})
			g.Initializer("w", Uint8, nil, []byte{1})
			g.Output("w", Uint8)
		}, `initializer "w" already defined`},
		{"empty op", func(g *Graph) { g.Node("", nil, []string{"y"}) }, "empty op_type"},
		{"node without outputs", func(g *Graph) { g.Node("Relu", []string{"x"}, nil) }, "no outputs"},
		{"zero attr", func(g *Graph) { g.Node("Relu", []string{"x"}, []string{"y"}, Attr{}) }, "zero Attr"},
		{"initializer size", func(g *Graph) { g.Initializer("w", Float, []int64{2}, []byte{1, 2, 3}) }, "3 bytes of raw data"},
		{"initializer symbolic", func(g *Graph) { g.Initializer("w", Float, []int64{-1}, nil) }, "concrete dims"},
		{"initializer string", func(g *Graph) { g.Initializer("w", String, []int64{1}, []byte{1}) }, "StringInitializer"},
		{"initializer bad type", func(g *Graph) { g.Initializer("w", 0, []int64{1}, []byte{1}) }, "invalid element type"},
		{"string initializer count", func(g *Graph) { g.StringInitializer("w", []int64{2}, []string{"a"}) }, "1 strings for dims [2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGraph("bad")
			tt.build(g)
			_, err := Model(g, DefaultOpset)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `graph "bad"`) {
				t.Fatalf("err = %v, want it to mention %q and the graph", err, tt.want)
			}
		})
	}
	g := NewGraph("ok")
	g.Input("x", Float, 1)
	g.Output("x", Float, 1)
	if _, err := Model(g, 0); err == nil {
		t.Error("opset 0 accepted")
	}
}

func TestReadyMadeRejectsTypes(t *testing.T) {
	tests := []struct {
		name  string
		build func() ([]byte, error)
	}{
		{"AddSub BOOL", func() ([]byte, error) { return AddSub(Bool, 2) }},
		{"AddSub STRING", func() ([]byte, error) { return AddSub(String, 2) }},
		{"AddSub BFLOAT16", func() ([]byte, error) { return AddSub(BFloat16, 2) }},
		{"ThreeOutputs BOOL", func() ([]byte, error) { return ThreeOutputs(Bool, 2) }},
		{"MatMul INT8", func() ([]byte, error) { return MatMul(Int8, -1, 2, 2) }},
		{"MatMul BFLOAT16", func() ([]byte, error) { return MatMul(BFloat16, -1, 2, 2) }},
		{"MatMul k=0", func() ([]byte, error) { return MatMul(Float, -1, 0, 2) }},
		{"MLP layers=0", func() ([]byte, error) { return MLP(4, 4, 0) }},
		{"MLP hidden=0", func() ([]byte, error) { return MLP(4, 0, 2) }},
		{"Identity invalid", func() ([]byte, error) { return Identity(Undefined, 2) }},
		{"Cast invalid target", func() ([]byte, error) { return Cast(Float, 0, 2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.build(); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestModelDeterministic(t *testing.T) {
	a := Must(MatMul(Float, -1, 3, 4))
	b := Must(MatMul(Float, -1, 3, 4))
	if !bytes.Equal(a, b) {
		t.Fatal("same graph gave different bytes")
	}
}

func TestMust(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Must did not panic on error")
		}
	}()
	Must(AddSub(Bool))
}

func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m", "1", "model.onnx")
	m := Must(Identity(Float, -1))
	if err := WriteFile(p, m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, m) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
	// A file where a directory must go.
	if err := WriteFile(filepath.Join(p, "x.onnx"), m); err == nil {
		t.Error("WriteFile under a file succeeded")
	}
}

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		dt   DataType
		vals []float64
		raw  []byte
	}{
		{Float, []float64{1, -2.5}, []byte{0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0}},
		{Double, []float64{1}, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{Float16, []float64{1, -2}, []byte{0x00, 0x3c, 0x00, 0xc0}},
		{BFloat16, []float64{1, -2}, []byte{0x80, 0x3f, 0x00, 0xc0}},
		{Bool, []float64{1, 0}, []byte{1, 0}},
		{Uint8, []float64{255}, []byte{255}},
		{Int8, []float64{-128, 127}, []byte{0x80, 0x7f}},
		{Uint16, []float64{65535}, []byte{0xff, 0xff}},
		{Int16, []float64{-2}, []byte{0xfe, 0xff}},
		{Uint32, []float64{1 << 31}, []byte{0, 0, 0, 0x80}},
		{Int32, []float64{-1, 258}, []byte{0xff, 0xff, 0xff, 0xff, 2, 1, 0, 0}},
		{Uint64, []float64{1 << 63}, []byte{0, 0, 0, 0, 0, 0, 0, 0x80}},
		{Int64, []float64{-1 << 63}, []byte{0, 0, 0, 0, 0, 0, 0, 0x80}},
	}
	for _, tt := range tests {
		t.Run(tt.dt.String(), func(t *testing.T) {
			raw, err := Encode(tt.dt, tt.vals)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, tt.raw) {
				t.Errorf("Encode = % x, want % x", raw, tt.raw)
			}
			back, err := Decode(tt.dt, raw)
			if err != nil {
				t.Fatal(err)
			}
			for i := range back {
				if back[i] != tt.vals[i] {
					t.Errorf("Decode[%d] = %v, want %v", i, back[i], tt.vals[i])
				}
			}
		})
	}
	bad := []struct {
		dt DataType
		v  float64
	}{
		{Bool, 2}, {Uint8, 256}, {Uint8, -1}, {Int8, 128}, {Int16, 1.5}, {Uint16, 65536},
		{Int32, 1 << 31}, {Uint32, -1}, {Uint64, 1 << 64}, {Int64, 1 << 63}, {Int64, math.NaN()},
	}
	for _, b := range bad {
		if _, err := Encode(b.dt, []float64{b.v}); err == nil {
			t.Errorf("Encode(%v, %v) accepted", b.dt, b.v)
		}
	}
	if _, err := Encode(String, nil); err == nil {
		t.Error("Encode(STRING) accepted")
	}
	if _, err := Decode(Int32, []byte{1, 2, 3}); err == nil {
		t.Error("Decode of 3 bytes as INT32 accepted")
	}
	if _, err := Decode(String, nil); err == nil {
		t.Error("Decode(STRING) accepted")
	}
}

func TestFloat16(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.1, 0x2e66},
		{65504, 0x7bff},                  // largest finite
		{65519, 0x7bff},                  // rounds down
		{65520, 0x7c00},                  // rounds up to Inf
		{1e10, 0x7c00},                   // overflow
		{float32(math.Inf(-1)), 0xfc00},  // -Inf
		{6.103515625e-05, 0x0400},        // smallest normal
		{5.960464477539063e-08, 0x0001},  // smallest subnormal, 2^-24
		{2.9802322387695312e-08, 0x0000}, // 2^-25: tie, to even (0)
		{8.940696716308594e-08, 0x0002},  // 1.5 * 2^-24: tie, to even (2)
		{1e-10, 0x0000},                  // underflow
		{1 + 1.0/2048, 0x3c00},           // tie between 0x3c00 and 0x3c01, to even
		{1 + 3.0/2048, 0x3c02},           // tie between 0x3c01 and 0x3c02, to even
		{6.097555160522461e-05, 0x03ff},  // largest subnormal
		{6.1005353927612305e-05, 0x0400}, // halfway from largest subnormal to smallest normal: to even
	}
	for _, tt := range tests {
		if got := Float32ToFloat16(tt.f); got != tt.h {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x", h)
	}
	// Every half value survives a round trip through float32.
	for h := range 1 << 16 {
		f := Float16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if back := Float32ToFloat16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestBFloat16(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0.1, 0x3dcd},
		{1 + 1.0/256, 0x3f80}, // tie, to even
		{1 + 3.0/256, 0x3f82}, // tie, to even
		{float32(math.Inf(1)), 0x7f80},
		{math.MaxFloat32, 0x7f80}, // rounds up to Inf
	}
	for _, tt := range tests {
		if got := Float32ToBFloat16(tt.f); got != tt.h {
			t.Errorf("Float32ToBFloat16(%g) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	if h := Float32ToBFloat16(float32(math.NaN())); h&0x7f80 != 0x7f80 || h&0x7f == 0 {
		t.Errorf("NaN -> %#04x", h)
	}
	for h := range 1 << 16 {
		f := BFloat16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if back := Float32ToBFloat16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}
