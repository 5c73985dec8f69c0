package core

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func classStrings(t *testing.T, ct *Tensor) []string {
	t.Helper()
	if ct.DataType != TypeBytes {
		t.Fatalf("datatype %s", ct.DataType)
	}
	els, err := BytesElements(ct.Data)
	if err != nil {
		t.Fatal(err)
	}
	if n := ElementCount(ct.Shape); n != int64(len(els)) && !(len(ct.Shape) > 0 && n == 0 && len(els) == 0) {
		t.Fatalf("shape %v holds %d elements, data %d", ct.Shape, n, len(els))
	}
	out := make([]string, len(els))
	for i, e := range els {
		out[i] = string(e)
	}
	return out
}

func fp32Tensor(shape []int64, v ...float32) *Tensor {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return &Tensor{Name: "OUT", DataType: TypeFP32, Shape: shape, Data: b}
}

func fp64Tensor(shape []int64, v ...float64) *Tensor {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return &Tensor{Name: "OUT", DataType: TypeFP64, Shape: shape, Data: b}
}

func TestClassifyFormats(t *testing.T) {
	cases := []struct {
		name     string
		in       *Tensor
		k        uint64
		batching bool
		labels   []string
		shape    []int64
		want     []string
	}{
		{"fp32 widened, %f", fp32Tensor([]int64{4}, 1.1, 3.3, -1.5, 0.0000123), 4, false, nil, []int64{4},
			[]string{"3.300000:1", "1.100000:0", "0.000012:3", "-1.500000:2"}},
		{"fp64", fp64Tensor([]int64{3}, 0.5, 1e20, -0.0000005), 2, false, nil, []int64{2},
			[]string{"100000000000000000000.000000:1", "0.500000:0"}},
		{"special values", fp64Tensor([]int64{4}, math.NaN(), math.Inf(-1), math.Inf(1), 0), 4, false, nil, []int64{4},
			[]string{"inf:2", "0.000000:3", "-inf:1", "nan:0"}},
		{"negative NaN prints -nan", fp64Tensor([]int64{1}, math.Copysign(math.NaN(), -1)), 1, false, nil, []int64{1},
			[]string{"-nan:0"}},
		{"labels", fp32Tensor([]int64{1, 4}, 0.1, 0.7, 0.2, 0.9), 3, true, []string{"zero", "one", "", "three"}, []int64{1, 3},
			[]string{"0.900000:3:three", "0.700000:1:one", "0.200000:2"}},
		{"labels shorter than classes", fp32Tensor([]int64{3}, 1, 2, 3), 2, false, []string{"a"}, []int64{2},
			[]string{"3.000000:2", "2.000000:1"}},
		{"k beyond N", fp32Tensor([]int64{2}, 1, 2), 10, false, nil, []int64{2}, []string{"2.000000:1", "1.000000:0"}},
		{"k zero", fp32Tensor([]int64{2}, 1, 2), 0, false, nil, []int64{0}, []string{}},
		{"ties keep index order", fp32Tensor([]int64{4}, 5, 7, 5, 7), 4, false, nil, []int64{4},
			[]string{"7.000000:1", "7.000000:3", "5.000000:0", "5.000000:2"}},
		{"batch items ranked separately", fp32Tensor([]int64{2, 3}, 1, 3, 2, 9, 8, 7), 2, true, []string{"a", "b", "c"}, []int64{2, 2},
			[]string{"3.000000:1:b", "2.000000:2:c", "9.000000:0:a", "8.000000:1:b"}},
		{"not batching: whole tensor", fp32Tensor([]int64{2, 3}, 1, 3, 2, 9, 8, 7), 2, false, nil, []int64{2},
			[]string{"9.000000:3", "8.000000:4"}},
		{"batching, shape []", fp32Tensor([]int64{}, 4), 3, true, nil, []int64{1}, []string{"4.000000:0"}},
		{"batch size 0", fp32Tensor([]int64{0, 3}), 2, true, nil, []int64{0}, []string{}},
		{"int8", &Tensor{Name: "OUT", DataType: TypeInt8, Shape: []int64{3}, Data: []byte{0xff, 5, 0x80}}, 3, false, nil, []int64{3},
			[]string{"5:1", "-1:0", "-128:2"}},
		{"uint64 keeps precision", &Tensor{Name: "OUT", DataType: TypeUint64, Shape: []int64{2},
			Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.MaxUint64-1), math.MaxUint64)}, 2, false, nil, []int64{2},
			[]string{"18446744073709551615:1", "18446744073709551614:0"}},
		{"int32 batching [1,16]", i32Tensor(1, 16), 2, true, nil, []int64{1, 2}, []string{"15:15", "14:14"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct, err := Classify(c.in, c.k, c.batching, c.labels)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ct.Shape, c.shape) || ct.Name != c.in.Name {
				t.Fatalf("shape %v name %q", ct.Shape, ct.Name)
			}
			if got := classStrings(t, ct); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

func i32Tensor(batch, n int) *Tensor {
	var b []byte
	for i := 0; i < batch*n; i++ {
		b = binary.LittleEndian.AppendUint32(b, uint32(i%n))
	}
	return &Tensor{Name: "OUTPUT0", DataType: TypeInt32, Shape: []int64{int64(batch), int64(n)}, Data: b}
}

// TestClassifyChecklist67: the strings of a classification of a batching
// model's [1,16] output match Triton's "<value>:<index>[:<label>]" form
// (triton-inference-server/server src/classification.cc).
func TestClassifyChecklist67(t *testing.T) {
	re := regexp.MustCompile(`^-?\d+(\.\d{6})?:\d+(:.*)?$`)
	for _, in := range []*Tensor{i32Tensor(1, 16), fp32Tensor([]int64{1, 3}, -0.25, 1e-9, 42)} {
		ct, err := Classify(in, 2, true, []string{"x", "y", "z"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ct.Shape, []int64{1, 2}) {
			t.Fatalf("shape %v", ct.Shape)
		}
		for _, s := range classStrings(t, ct) {
			if !re.MatchString(s) {
				t.Fatalf("%q", s)
			}
		}
	}
}

func TestClassifyErrors(t *testing.T) {
	cases := []struct {
		in   *Tensor
		code Code
		msg  string
	}{
		{&Tensor{DataType: TypeBool, Shape: []int64{2}, Data: []byte{1, 0}}, CodeInvalidArg, "class result not available for output due to unsupported type 'BOOL'"},
		{&Tensor{DataType: TypeFP16, Shape: []int64{1}, Data: []byte{0, 0}}, CodeInvalidArg, "class result not available for output due to unsupported type 'FP16'"},
		{&Tensor{DataType: TypeBF16, Shape: []int64{0}}, CodeInvalidArg, "class result not available for output due to unsupported type 'BF16'"},
		{&Tensor{DataType: TypeBytes, Shape: []int64{1}, Data: AppendBytesElement(nil, []byte("x"))}, CodeInvalidArg, "class result not available for output due to unsupported type 'BYTES'"},
		{&Tensor{DataType: TypeInt8, Shape: []int64{1, MaxClassificationElements + 1}, Data: make([]byte, MaxClassificationElements+1)}, CodeInvalidArg, "classification output tensor too large"},
		{&Tensor{Name: "short", DataType: TypeInt32, Shape: []int64{2, 4}, Data: make([]byte, 16)}, CodeInternal, "output tensor shape does not match size of output for 'short'"},
	}
	for _, c := range cases {
		_, err := Classify(c.in, 1, true, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != c.code || ce.Msg != c.msg {
			t.Errorf("%s: got %v, want %s %q", c.in.DataType, err, c.code, c.msg)
		}
	}
	// The limit is per batch item: 2 × 1,000,000 is fine.
	big := &Tensor{DataType: TypeUint8, Shape: []int64{2, MaxClassificationElements}, Data: make([]byte, 2*MaxClassificationElements)}
	if _, err := Classify(big, 1, true, nil); err != nil {
		t.Fatal(err)
	}
}

// TestTopKHeapMatchesSort compares the bounded-heap path with a full sort.
func TestTopKHeapMatchesSort(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for iter := 0; iter < 200; iter++ {
		n := 1 + r.Intn(300)
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(r.Intn(20)) // many ties
			if r.Intn(50) == 0 {
				vals[i] = float32(math.NaN())
			}
		}
		in := fp32Tensor([]int64{int64(n)}, vals...)
		k := 1 + r.Intn(n)
		small, err := Classify(in, uint64(k), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := Classify(in, uint64(n), false, nil)
		got, ref := classStrings(t, small), classStrings(t, all)[:k]
		if strings.Join(got, ",") != strings.Join(ref, ",") {
			t.Fatalf("n=%d k=%d\nheap %v\nsort %v", n, k, got, ref)
		}
	}
}

func BenchmarkClassify1M(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	v := make([]float32, 1000000)
	for i := range v {
		v[i] = r.Float32()
	}
	in := fp32Tensor([]int64{1, int64(len(v))}, v...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Classify(in, 5, true, nil); err != nil {
			b.Fatal(err)
		}
	}
}
