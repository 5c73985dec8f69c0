// Package onnxbuild writes small ONNX models from Go, so tests and the
// example repositories (examples/genmodels) never need to download one. A Graph collects inputs, outputs, nodes and initializers;
// Model serializes it into the bytes of a .onnx file that ONNX Runtime loads.
//
//	g := onnxbuild.NewGraph("add")
//	g.Input("A", onnxbuild.Float, -1, 4) // -1: symbolic (batch) dimension
//	g.Input("B", onnxbuild.Float, -1, 4)
//	g.Output("C", onnxbuild.Float, -1, 4)
//	g.Node("Add", []string{"A", "B"}, []string{"C"})
//	model, err := onnxbuild.Model(g, onnxbuild.DefaultOpset)
//
// Ready-made models (AddSub, Identity, MatMul, ThreeOutputs, Cast,
// TextClassifier) cover the usual test cases, MLP a compute-bound one for
// benchmarks, and Accumulator, Previous, SequenceControls and GrowingState,
// with their config.pbtxt texts, the stateful models of the sequence
// batcher; Encode and Decode convert element values to and from raw tensor
// bytes for every numeric type, FLOAT16 and BFLOAT16 included.
package onnxbuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/internal/onnxbuild/onnxpb"
)

const (
	// IRVersion is the ONNX IR version written into every model (IR 8 is
	// ONNX 1.10; old enough for any ORT we use, new enough for opset 13+).
	IRVersion = 8
	// DefaultOpset is the default ai.onnx operator set version; the
	// ready-made models use it.
	DefaultOpset = 13
	// Producer is written as the model's producer_name.
	Producer = "inferd-onnxbuild"
)

// DataType is an ONNX tensor element type, numbered as TensorProto.DataType.
type DataType int32

// Element types. Complex and 8-bit float types are left out: nothing in inferd
// serves them.
const (
	Undefined DataType = 0
	Float     DataType = 1
	Uint8     DataType = 2
	Int8      DataType = 3
	Uint16    DataType = 4
	Int16     DataType = 5
	Int32     DataType = 6
	Int64     DataType = 7
	String    DataType = 8
	Bool      DataType = 9
	Float16   DataType = 10
	Double    DataType = 11
	Uint32    DataType = 12
	Uint64    DataType = 13
	BFloat16  DataType = 16
)

// AllTypes lists every supported element type in enum order.
var AllTypes = []DataType{
	Float, Uint8, Int8, Uint16, Int16, Int32, Int64, String, Bool,
	Float16, Double, Uint32, Uint64, BFloat16,
}

// String returns the upstream enum name, e.g. "FLOAT16".
func (d DataType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DataType(%d)", int32(d))
	}
	return onnxpb.TensorProto_DataType(d).String()
}

// Valid reports whether d is one of the element types listed in AllTypes.
func (d DataType) Valid() bool {
	return d.Size() > 0 || d == String
}

// Size is the width of one element in raw_data, in bytes; 0 for String
// (variable length) and for invalid types.
func (d DataType) Size() int {
	switch d {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16, Float16, BFloat16:
		return 2
	case Float, Int32, Uint32:
		return 4
	case Int64, Double, Uint64:
		return 8
	}
	return 0
}

// Attr is a node attribute; build one with AttrInt, AttrFloat, ...
type Attr struct {
	pb *onnxpb.AttributeProto
}

// AttrInt is an INT attribute.
func AttrInt(name string, v int64) Attr {
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_INT), I: &v}}
}

// AttrFloat is a FLOAT attribute.
func AttrFloat(name string, v float32) Attr {
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_FLOAT), F: &v}}
}

// AttrString is a STRING attribute.
func AttrString(name, v string) Attr {
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_STRING), S: []byte(v)}}
}

// AttrInts is an INTS attribute.
func AttrInts(name string, v ...int64) Attr {
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_INTS), Ints: v}}
}

// AttrFloats is a FLOATS attribute.
func AttrFloats(name string, v ...float32) Attr {
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_FLOATS), Floats: v}}
}

// AttrStrings is a STRINGS attribute.
func AttrStrings(name string, v ...string) Attr {
	s := make([][]byte, len(v))
	for i, x := range v {
		s[i] = []byte(x)
	}
	return Attr{&onnxpb.AttributeProto{Name: &name, Type: attrType(onnxpb.AttributeProto_STRINGS), Strings: s}}
}

func attrType(t onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto_AttributeType {
	return &t
}

// Graph accumulates a model's graph. Its methods do not return errors: the
// first mistake is remembered and reported by Err, Model and ModelProto, so a
// graph reads as a flat list of declarations.
type Graph struct {
	pb  *onnxpb.GraphProto
	err error
}

// NewGraph starts an empty graph with the given name.
func NewGraph(name string) *Graph {
	return &Graph{pb: &onnxpb.GraphProto{Name: &name}}
}

// Err returns the first error recorded while building g, if any.
func (g *Graph) Err() error { return g.err }

func (g *Graph) fail(format string, args ...any) {
	if g.err == nil {
		g.err = fmt.Errorf("onnxbuild: graph %q: %w", g.pb.GetName(), fmt.Errorf(format, args...))
	}
}

// Input declares a graph input. A dimension of -1 becomes a symbolic
// dim_param (see SymbolicDim), which ORT reports as -1; no dims means a
// scalar.
func (g *Graph) Input(name string, elem DataType, dims ...int64) {
	vi, err := valueInfo(name, elem, dims)
	if err != nil {
		g.fail("input: %w", err)
		return
	}
	g.pb.Input = append(g.pb.Input, vi)
}

// Output declares a graph output; dims as for Input. Outputs keep the order
// in which they are declared.
func (g *Graph) Output(name string, elem DataType, dims ...int64) {
	vi, err := valueInfo(name, elem, dims)
	if err != nil {
		g.fail("output: %w", err)
		return
	}
	g.pb.Output = append(g.pb.Output, vi)
}

// Node appends an operator node from the default ai.onnx domain. Nodes must
// be added in topological order; an empty input name marks an omitted
// optional input.
func (g *Graph) Node(opType string, inputs, outputs []string, attrs ...Attr) {
	if opType == "" {
		g.fail("node %d: empty op_type", len(g.pb.Node))
		return
	}
	if len(outputs) == 0 {
		g.fail("node %d (%s): no outputs", len(g.pb.Node), opType)
		return
	}
	name := fmt.Sprintf("%s_%d", opType, len(g.pb.Node))
	n := &onnxpb.NodeProto{
		Name:   &name,
		OpType: &opType,
		Input:  append([]string(nil), inputs...),
		Output: append([]string(nil), outputs...),
	}
	for _, a := range attrs {
		if a.pb == nil {
			g.fail("node %s: zero Attr", name)
			return
		}
		n.Attribute = append(n.Attribute, proto.CloneOf(a.pb))
	}
	g.pb.Node = append(g.pb.Node, n)
}

// Initializer adds a constant tensor. raw holds the elements as ONNX
// raw_data (see Encode); its length must match dims and elem.
func (g *Graph) Initializer(name string, elem DataType, dims []int64, raw []byte) {
	if elem == String {
		g.fail("initializer %q: STRING cannot use raw_data, use StringInitializer", name)
		return
	}
	if !elem.Valid() {
		g.fail("initializer %q: invalid element type %v", name, elem)
		return
	}
	n, err := elementCount(dims)
	if err != nil {
		g.fail("initializer %q: %w", name, err)
		return
	}
	if want := n * int64(elem.Size()); int64(len(raw)) != want {
		g.fail("initializer %q: %d bytes of raw data, %v%v needs %d", name, len(raw), elem, dims, want)
		return
	}
	dt := int32(elem)
	g.pb.Initializer = append(g.pb.Initializer, &onnxpb.TensorProto{
		Name:     &name,
		DataType: &dt,
		Dims:     append([]int64(nil), dims...),
		RawData:  append([]byte{}, raw...),
	})
}

// StringInitializer adds a constant STRING tensor.
func (g *Graph) StringInitializer(name string, dims []int64, vals []string) {
	n, err := elementCount(dims)
	if err != nil {
		g.fail("initializer %q: %w", name, err)
		return
	}
	if int64(len(vals)) != n {
		g.fail("initializer %q: %d strings for dims %v", name, len(vals), dims)
		return
	}
	dt := int32(String)
	t := &onnxpb.TensorProto{Name: &name, DataType: &dt, Dims: append([]int64(nil), dims...)}
	for _, v := range vals {
		t.StringData = append(t.StringData, []byte(v))
	}
	g.pb.Initializer = append(g.pb.Initializer, t)
}

// SymbolicDim is the dim_param written for a -1 at the given axis. Every
// tensor uses the same name for the same axis, which tells ORT that, say,
// the batch sizes of all inputs and outputs agree: true of every model here.
func SymbolicDim(axis int) string { return fmt.Sprintf("dim%d", axis) }

func valueInfo(name string, elem DataType, dims []int64) (*onnxpb.ValueInfoProto, error) {
	if name == "" {
		return nil, errors.New("empty name")
	}
	if !elem.Valid() {
		return nil, fmt.Errorf("%q: invalid element type %v", name, elem)
	}
	shape := &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{}}
	for axis, d := range dims {
		switch {
		case d == -1:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{
				Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: SymbolicDim(axis)},
			})
		case d >= 0:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{
				Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d},
			})
		default:
			return nil, fmt.Errorf("%q: dimension %d is %d; want >= 0, or -1 for symbolic", name, axis, d)
		}
	}
	et := int32(elem)
	return &onnxpb.ValueInfoProto{
		Name: &name,
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et, Shape: shape},
		}},
	}, nil
}

func elementCount(dims []int64) (int64, error) {
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is %d; constants need concrete dims", i, d)
		}
		n *= d
	}
	return n, nil
}

// check catches what ORT would otherwise report less clearly: duplicate
// names, and node inputs or graph outputs that nothing defines.
func (g *Graph) check() error {
	defined := map[string]string{}
	define := func(name, what string) error {
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("%s %q already defined as %s", what, name, prev)
		}
		defined[name] = what
		return nil
	}
	for _, in := range g.pb.Input {
		if err := define(in.GetName(), "input"); err != nil {
			return err
		}
	}
	for _, t := range g.pb.Initializer {
		if defined[t.GetName()] == "input" {
			continue // ONNX allows it: the initializer is the input's default
		}
		if err := define(t.GetName(), "initializer"); err != nil {
			return err
		}
	}
	for _, n := range g.pb.Node {
		for _, in := range n.Input {
			if _, ok := defined[in]; !ok && in != "" {
				return fmt.Errorf("node %s: input %q not defined by an input, initializer or earlier node", n.GetName(), in)
			}
		}
		for _, out := range n.Output {
			if err := define(out, "output of node "+n.GetName()); err != nil {
				return err
			}
		}
	}
	if len(g.pb.Output) == 0 {
		return errors.New("no outputs")
	}
	seen := map[string]bool{}
	for _, out := range g.pb.Output {
		name := out.GetName()
		if _, ok := defined[name]; !ok {
			return fmt.Errorf("output %q is not produced by any node, input or initializer", name)
		}
		if seen[name] {
			return fmt.Errorf("output %q declared twice", name)
		}
		seen[name] = true
	}
	return nil
}

// ModelProto wraps g in a ModelProto for the given ai.onnx opset. The result
// is a fresh copy: tests may edit it (say, to make a model ORT must reject)
// and marshal it themselves.
func ModelProto(g *Graph, opset int64) (*onnxpb.ModelProto, error) {
	if g.err != nil {
		return nil, g.err
	}
	if err := g.check(); err != nil {
		return nil, fmt.Errorf("onnxbuild: graph %q: %w", g.pb.GetName(), err)
	}
	if opset <= 0 {
		return nil, fmt.Errorf("onnxbuild: graph %q: opset %d, want > 0", g.pb.GetName(), opset)
	}
	return &onnxpb.ModelProto{
		IrVersion:    proto.Int64(IRVersion),
		ProducerName: proto.String(Producer),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: &opset}},
		Graph:        proto.CloneOf(g.pb),
	}, nil
}

// Model serializes g as a .onnx file's bytes for the given ai.onnx opset
// (normally DefaultOpset). The output is deterministic: the same graph always
// gives the same bytes, so generated files can be checked for drift.
func Model(g *Graph, opset int64) ([]byte, error) {
	m, err := ModelProto(g, opset)
	if err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: marshal graph %q: %w", g.pb.GetName(), err)
	}
	return b, nil
}

// Must returns model, panicking if err is non-nil; for tests and generators
// where a failure to build is a bug: onnxbuild.Must(onnxbuild.AddSub(...)).
func Must(model []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return model
}

// WriteFile writes model to path, creating parent directories as needed.
func WriteFile(path string, model []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("onnxbuild: %w", err)
	}
	if err := os.WriteFile(path, model, 0o644); err != nil {
		return fmt.Errorf("onnxbuild: %w", err)
	}
	return nil
}
