package perf

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// elemSize is the wire size of one element; 0 for BYTES (variable), -1
// for a datatype the tool does not know.
func elemSize(dt string) int {
	switch dt {
	case "BOOL", "INT8", "UINT8":
		return 1
	case "INT16", "UINT16", "FP16", "BF16":
		return 2
	case "INT32", "UINT32", "FP32":
		return 4
	case "INT64", "UINT64", "FP64":
		return 8
	case "BYTES":
		return 0
	}
	return -1
}

// tensorData is one input's value: its binary wire encoding (BYTES
// elements carry their 4-byte length prefix) and shape.
type tensorData struct {
	raw   []byte
	shape []int64
	count int64 // elements
}

// fileTensor is one input's entry in one step of a data file, before the
// model's datatype gives its values meaning.
type fileTensor struct {
	values []any   // json.Number, string or bool, flattened row-major
	shape  []int64 // nil when the file gives none
	b64    []byte  // raw bytes when the file used {"b64": ...}
	isB64  bool
}

// dataFile is a parsed perf_analyzer JSON data file: one map per step.
type dataFile struct {
	steps []map[string]fileTensor
}

// parseDataFile reads the common form of perf_analyzer's data file:
// {"data":[{"IN":[...]} or {"IN":{"content":[...],"shape":[...]}} or
// {"IN":{"b64":"..."}} or {"IN":{"content":{"b64":"..."},"shape":[...]}},
// ...]} (triton-inference-server/perf_analyzer docs/input_data.md). b64
// is the tensor's raw little-endian bytes; for BYTES, the serialized
// elements with their 4-byte lengths. Sequence streams (arrays of step
// arrays) are not supported.
func parseDataFile(b []byte) (*dataFile, error) {
	var top struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("data file: %w", err)
	}
	if len(top.Data) == 0 {
		return nil, errors.New(`data file: "data" is missing or empty`)
	}
	df := &dataFile{}
	for i, raw := range top.Data {
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' {
			return nil, fmt.Errorf("data file: step %d: streams (arrays of steps) are not supported", i)
		}
		var inputs map[string]json.RawMessage
		if err := json.Unmarshal(raw, &inputs); err != nil || inputs == nil {
			return nil, fmt.Errorf("data file: step %d: want an object of inputs", i)
		}
		step := make(map[string]fileTensor, len(inputs))
		for name, v := range inputs {
			ft, err := parseFileTensor(v)
			if err != nil {
				return nil, fmt.Errorf("data file: step %d: input %q: %w", i, name, err)
			}
			step[name] = ft
		}
		df.steps = append(df.steps, step)
	}
	return df, nil
}

func parseFileTensor(raw json.RawMessage) (fileTensor, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		vals, err := decodeValues(raw)
		return fileTensor{values: vals}, err
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
		Shape   []int64         `json:"shape"`
		B64     *string         `json:"b64"`
	}
	if len(raw) == 0 || raw[0] != '{' {
		return fileTensor{}, errors.New(`want an array, {"content":..,"shape":..} or {"b64":..}`)
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fileTensor{}, err
	}
	for _, d := range obj.Shape {
		if d < 0 {
			return fileTensor{}, fmt.Errorf("shape %v has a negative dimension", obj.Shape)
		}
	}
	ft := fileTensor{shape: obj.Shape} // "shape": [] decodes non-nil: a scalar
	switch {
	case obj.B64 != nil && obj.Content != nil:
		return fileTensor{}, errors.New(`give "content" or "b64", not both`)
	case obj.B64 != nil:
		b, err := base64.StdEncoding.DecodeString(*obj.B64)
		if err != nil {
			return fileTensor{}, fmt.Errorf("b64: %w", err)
		}
		ft.b64, ft.isB64 = b, true
	case obj.Content != nil && bytes.HasPrefix(bytes.TrimSpace(obj.Content), []byte("{")):
		// {"content": {"b64": ...}, "shape": [...]}
		var inner struct {
			B64 *string `json:"b64"`
		}
		if err := json.Unmarshal(obj.Content, &inner); err != nil || inner.B64 == nil {
			return fileTensor{}, errors.New(`"content" must be an array or {"b64": ...}`)
		}
		b, err := base64.StdEncoding.DecodeString(*inner.B64)
		if err != nil {
			return fileTensor{}, fmt.Errorf("b64: %w", err)
		}
		ft.b64, ft.isB64 = b, true
	case obj.Content != nil:
		vals, err := decodeValues(obj.Content)
		if err != nil {
			return fileTensor{}, err
		}
		ft.values = vals
	default:
		return fileTensor{}, errors.New(`object needs "content" or "b64"`)
	}
	return ft, nil
}

// decodeValues flattens a (possibly nested) JSON array, keeping numbers
// as text so that 64-bit integers survive.
func decodeValues(raw json.RawMessage) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the array")
	}
	if _, ok := v.([]any); !ok {
		return nil, errors.New("content must be an array")
	}
	out := []any{}
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		case json.Number, string, bool:
			out = append(out, x)
		default:
			return fmt.Errorf("unexpected element %v", x)
		}
		return nil
	}
	return out, walk(v)
}

// encodeFileTensor turns file values into the wire encoding of datatype dt.
func encodeFileTensor(dt string, ft fileTensor) (raw []byte, count int64, err error) {
	size := elemSize(dt)
	if size < 0 {
		return nil, 0, fmt.Errorf("datatype %s is not supported", dt)
	}
	if ft.isB64 {
		if size == 0 { // the serialized tensor, as perf_analyzer takes it
			n, ok := countBytesElems(ft.b64)
			if !ok {
				return nil, 0, fmt.Errorf("b64 data of %d bytes is not a whole number of length-prefixed BYTES elements", len(ft.b64))
			}
			return ft.b64, n, nil
		}
		if len(ft.b64)%size != 0 {
			return nil, 0, fmt.Errorf("b64 data of %d bytes is not a whole number of %s elements", len(ft.b64), dt)
		}
		return ft.b64, int64(len(ft.b64) / size), nil
	}
	for i, v := range ft.values {
		if raw, err = appendValue(raw, dt, v); err != nil {
			return nil, 0, fmt.Errorf("element %d: %w", i, err)
		}
	}
	if raw == nil {
		raw = []byte{}
	}
	return raw, int64(len(ft.values)), nil
}

// appendValue appends one element in the wire encoding of dt.
func appendValue(b []byte, dt string, v any) ([]byte, error) {
	if dt == "BYTES" {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("BYTES wants a string, got %v", v)
		}
		return appendBytesElem(b, []byte(s)), nil
	}
	if dt == "BOOL" {
		switch x := v.(type) {
		case bool:
			if x {
				return append(b, 1), nil
			}
			return append(b, 0), nil
		case json.Number:
			if x == "0" || x == "1" {
				return append(b, x[0]-'0'), nil
			}
		}
		return nil, fmt.Errorf("BOOL wants true, false, 0 or 1, got %v", v)
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%s wants a number, got %v", dt, v)
	}
	s := string(n)
	le := binary.LittleEndian
	switch dt {
	case "INT8", "INT16", "INT32", "INT64":
		bits := elemSize(dt) * 8
		x, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer that fits %s", s, dt)
		}
		return appendUint(b, uint64(x), bits/8), nil
	case "UINT8", "UINT16", "UINT32", "UINT64":
		bits := elemSize(dt) * 8
		x, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s is not an unsigned integer that fits %s", s, dt)
		}
		return appendUint(b, x, bits/8), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("%s is out of range for %s", s, dt)
	}
	switch dt {
	case "FP16":
		return le.AppendUint16(b, float64ToHalf(f)), nil
	case "BF16":
		return le.AppendUint16(b, float32ToBF16(float32(f))), nil
	case "FP32":
		if math.IsInf(float64(float32(f)), 0) {
			return nil, fmt.Errorf("%s is out of range for FP32", s)
		}
		return le.AppendUint32(b, math.Float32bits(float32(f))), nil
	default: // FP64
		return le.AppendUint64(b, math.Float64bits(f)), nil
	}
}

// countBytesElems counts the elements of a serialized BYTES tensor (each a
// 4-byte little-endian length, then that many bytes); false when raw does
// not end on an element's end.
func countBytesElems(raw []byte) (int64, bool) {
	var n int64
	for len(raw) > 0 {
		if len(raw) < 4 {
			return 0, false
		}
		l := uint64(binary.LittleEndian.Uint32(raw))
		if l > uint64(len(raw)-4) {
			return 0, false
		}
		raw = raw[4+l:]
		n++
	}
	return n, true
}

func appendUint(b []byte, x uint64, size int) []byte {
	for i := 0; i < size; i++ {
		b = append(b, byte(x>>(8*i)))
	}
	return b
}

func appendBytesElem(b, s []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// float64ToHalf converts to IEEE 754 binary16 bits, rounding to nearest
// even; too large gives ±Inf.
func float64ToHalf(f float64) uint16 {
	var sign uint16
	if math.Signbit(f) {
		sign = 0x8000
		f = -f
	}
	switch {
	case math.IsNaN(f):
		return sign | 0x7e00
	case math.IsInf(f, 0):
		return sign | 0x7c00
	case f < math.Ldexp(1, -14): // subnormal, in units of 2^-24
		return sign | uint16(math.RoundToEven(f*(1<<24))) // 1024 rounds up into the smallest normal: still right
	}
	frac, exp := math.Frexp(f) // f = frac·2^exp, frac in [0.5, 1)
	e := exp - 1
	mant := math.RoundToEven((2*frac - 1) * 1024)
	if mant == 1024 {
		mant, e = 0, e+1
	}
	if e+15 >= 31 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | uint16(mant)
}

// float32ToBF16 rounds to the nearest bfloat16 (even on ties).
func float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if math.IsNaN(float64(f)) {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// resolveShape gives the dims of one input (batch dim excluded): given
// (from the data file or --shape) must agree with the model's fixed dims;
// without it, a single variable dim is deduced from count when count >= 0.
func resolveShape(name string, model, given []int64, count int64) ([]int64, error) {
	if given != nil {
		if len(given) != len(model) {
			return nil, fmt.Errorf("input %s: shape [%s] has %d dims, the model has %d ([%s])", name, joinDims(given), len(given), len(model), joinDims(model))
		}
		for i, d := range model {
			if d >= 0 && given[i] != d {
				return nil, fmt.Errorf("input %s: shape [%s] does not match the model's [%s]", name, joinDims(given), joinDims(model))
			}
		}
		return given, nil
	}
	variable, fixed := -1, int64(1)
	for i, d := range model {
		if d >= 0 {
			fixed *= d
			continue
		}
		if variable >= 0 || count < 0 {
			return nil, fmt.Errorf("input %s has variable dims [%s]: give --shape %s:D1,D2", name, joinDims(model), name)
		}
		variable = i
	}
	if variable < 0 {
		return model, nil
	}
	if fixed == 0 || count%fixed != 0 {
		return nil, fmt.Errorf("input %s: %d elements do not fill dims [%s]: give a shape", name, count, joinDims(model))
	}
	out := append([]int64(nil), model...)
	out[variable] = count / fixed
	return out, nil
}

// elements is the product of dims, or an error when it overflows.
func elements(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d != 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("shape [%s] is too large", joinDims(dims))
		}
		n *= d
	}
	return n, nil
}

// bindDataFile checks the file against the model inputs and encodes every
// step: result[step][input].
func bindDataFile(df *dataFile, inputs []tensorMeta, shapes map[string][]int64) ([][]tensorData, error) {
	known := map[string]bool{}
	for _, in := range inputs {
		known[in.Name] = true
	}
	out := make([][]tensorData, len(df.steps))
	for s, step := range df.steps {
		for name := range step {
			if !known[name] {
				return nil, fmt.Errorf("data file: step %d: the model has no input %q", s, name)
			}
		}
		for _, in := range inputs {
			ft, ok := step[in.Name]
			if !ok {
				return nil, fmt.Errorf("data file: step %d: no data for input %q", s, in.Name)
			}
			raw, count, err := encodeFileTensor(in.Datatype, ft)
			if err != nil {
				return nil, fmt.Errorf("data file: step %d: input %q: %w", s, in.Name, err)
			}
			given := ft.shape
			if given == nil {
				given = shapes[in.Name]
			}
			shape, err := resolveShape(in.Name, in.Shape, given, count)
			if err != nil {
				return nil, fmt.Errorf("data file: step %d: %w", s, err)
			}
			want, err := elements(shape)
			if err != nil {
				return nil, fmt.Errorf("data file: step %d: input %q: %w", s, in.Name, err)
			}
			if want != count {
				return nil, fmt.Errorf("data file: step %d: input %q has %d elements, shape [%s] needs %d", s, in.Name, count, joinDims(shape), want)
			}
			out[s] = append(out[s], tensorData{raw: raw, shape: shape, count: count})
		}
	}
	return out, nil
}

// synthetic makes one request's worth of random or zero data for every
// input; shape is the full request shape.
func synthetic(dt string, shape []int64, zero bool, strLen int, rng *rand.Rand) (tensorData, error) {
	n, err := elements(shape)
	if err != nil {
		return tensorData{}, err
	}
	size := elemSize(dt)
	if size < 0 {
		return tensorData{}, fmt.Errorf("datatype %s is not supported", dt)
	}
	if size == 0 { // BYTES
		raw := make([]byte, 0, n*int64(4+strLen))
		s := make([]byte, strLen)
		for i := int64(0); i < n; i++ {
			for j := range s {
				if zero {
					s[j] = '0'
				} else {
					s[j] = alphabet[rng.IntN(len(alphabet))]
				}
			}
			raw = appendBytesElem(raw, s)
		}
		return tensorData{raw: raw, shape: shape, count: n}, nil
	}
	raw := make([]byte, n*int64(size))
	if zero {
		return tensorData{raw: raw, shape: shape, count: n}, nil
	}
	le := binary.LittleEndian
	for i := int64(0); i < n; i++ {
		e := raw[i*int64(size) : (i+1)*int64(size)]
		// Floats get values in [0, 1) rather than random bits, so that no
		// NaN or Inf reaches the model.
		switch dt {
		case "BOOL":
			e[0] = byte(rng.IntN(2))
		case "FP16":
			le.PutUint16(e, float64ToHalf(rng.Float64()))
		case "BF16":
			le.PutUint16(e, float32ToBF16(rng.Float32()))
		case "FP32":
			le.PutUint32(e, math.Float32bits(rng.Float32()))
		case "FP64":
			le.PutUint64(e, math.Float64bits(rng.Float64()))
		default:
			x := rng.Uint64()
			for j := range e {
				e[j] = byte(x >> (8 * j))
			}
		}
	}
	return tensorData{raw: raw, shape: shape, count: n}, nil
}

// repeatedString is a BYTES tensor of shape whose every element is s
// (--string-data).
func repeatedString(s string, shape []int64) tensorData {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	raw := make([]byte, 0, n*int64(4+len(s)))
	for i := int64(0); i < n; i++ {
		raw = appendBytesElem(raw, []byte(s))
	}
	return tensorData{raw: raw, shape: shape, count: n}
}

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// loadData reads the --input-data files and directories in order and binds
// their steps to the model's inputs: each file's steps follow the previous
// one's, as perf_analyzer appends them.
func loadData(paths []string, inputs []tensorMeta, shapes map[string][]int64) ([][]tensorData, error) {
	var steps [][]tensorData
	for _, path := range paths {
		df, err := readDataSource(path, inputs, shapes)
		if err != nil {
			return nil, err
		}
		s, err := bindDataFile(df, inputs, shapes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		steps = append(steps, s...)
	}
	return steps, nil
}

// readDataSource reads one --input-data path: a JSON data file, or a
// directory holding one file per input, named as the input, for one
// step of batch 1 (triton-inference-server/perf_analyzer
// src/data_loader.cc, ReadDataFromDir): the raw little-endian bytes, or
// for BYTES a text file of one element a line.
func readDataSource(path string, inputs []tensorMeta, shapes map[string][]int64) (*dataFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--input-data: %w", err)
	}
	if !fi.IsDir() {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--input-data: %w", err)
		}
		return parseDataFile(raw)
	}
	step := map[string]fileTensor{}
	for _, in := range inputs {
		raw, err := os.ReadFile(filepath.Join(path, in.Name))
		if err != nil {
			return nil, fmt.Errorf("--input-data: %w", err)
		}
		ft := fileTensor{shape: shapes[in.Name]}
		if in.Datatype == "BYTES" {
			ft.values = []any{}
			for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
				ft.values = append(ft.values, line)
			}
		} else {
			ft.b64, ft.isB64 = raw, true
		}
		step[in.Name] = ft
	}
	return &dataFile{steps: []map[string]fileTensor{step}}, nil
}
