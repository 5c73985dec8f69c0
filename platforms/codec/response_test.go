package codec

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/tritonjson"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got %s\nwant %s", name, got, want)
	}
}

func simpleResponse(id string) *core.InferResponse {
	sum := i32le(2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32)
	diff := make([]byte, 64)
	return &core.InferResponse{ID: id, ModelName: "simple", ModelVersion: 1, Outputs: []*core.Tensor{
		{Name: "OUTPUT0", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: sum},
		{Name: "OUTPUT1", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: diff},
	}}
}

func mustDecode(t *testing.T, body string) *Envelope {
	t.Helper()
	env, err := decodeJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestEncodeSimple: JSON outputs, string version,
// flat data, id only when non-empty.
func TestEncodeSimple(t *testing.T) {
	env := mustDecode(t, `{"id":"42","inputs":[]}`)
	header, blobs, binary, err := EncodeResponse(simpleResponse("42"), env)
	if err != nil || binary || blobs != nil {
		t.Fatal(err, binary, blobs)
	}
	want := `{"id":"42","model_name":"simple","model_version":"1","outputs":[` +
		`{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32]},` +
		`{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}`
	if string(header) != want {
		t.Fatalf("got  %s\nwant %s", header, want)
	}
	header, _, _, _ = EncodeResponse(simpleResponse(""), env)
	if !strings.HasPrefix(string(header), `{"model_name":"simple","model_version":"1",`) {
		t.Fatalf("%s", header)
	}
}

// TestEncodeKinds covers every output kind, plus zero-sized binary outputs.
func TestEncodeKinds(t *testing.T) {
	resp := simpleResponse("")
	// binary_data_output and no outputs: every output binary.
	header, blobs, binary, err := EncodeResponse(resp, mustDecode(t, `{"parameters":{"binary_data_output":true},"inputs":[]}`))
	if err != nil || !binary || len(blobs) != 2 || &blobs[0][0] != &resp.Outputs[0].Data[0] || &blobs[1][0] != &resp.Outputs[1].Data[0] {
		t.Fatal(err, binary, len(blobs))
	}
	want := `{"model_name":"simple","model_version":"1","outputs":[` +
		`{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},` +
		`{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}]}`
	if string(header) != want {
		t.Fatalf("got  %s\nwant %s", header, want)
	}
	// Listed without binary_data: JSON despite binary_data_output.
	header, blobs, binary, _ = EncodeResponse(resp, mustDecode(t, `{"parameters":{"binary_data_output":true},"inputs":[],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}},{"name":"OUTPUT1"}]}`))
	if binary || blobs != nil || strings.Count(string(header), `"data":`) != 2 {
		t.Fatalf("%s", header)
	}
	// OUTPUT0 binary, OUTPUT1 JSON; the blob follows the header.
	header, blobs, binary, _ = EncodeResponse(resp, mustDecode(t, `{"inputs":[],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}]}`))
	if !binary || len(blobs) != 1 || !bytes.Equal(blobs[0], resp.Outputs[0].Data) ||
		!strings.Contains(string(header), `"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}`) ||
		!strings.Contains(string(header), `"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,`) {
		t.Fatalf("%s", header)
	}
	// Raw requests answer in binary.
	_, blobs, binary, _ = EncodeResponse(resp, &Envelope{DefaultKind: OutputBinary})
	if !binary || len(blobs) != 2 {
		t.Fatal("raw")
	}
	// A zero-byte binary output: binary_data_size 0 and no blob.
	empty := &core.InferResponse{ModelName: "m", ModelVersion: 3, Outputs: []*core.Tensor{{Name: "E", DataType: core.TypeFP32, Shape: []int64{0, 4}, Data: nil}}}
	header, blobs, binary, _ = EncodeResponse(empty, &Envelope{DefaultKind: OutputBinary})
	if binary || blobs != nil || string(header) != `{"model_name":"m","model_version":"3","outputs":[{"name":"E","datatype":"FP32","shape":[0,4],"parameters":{"binary_data_size":0}}]}` {
		t.Fatalf("%s", header)
	}
	// Shared memory: name, datatype and shape only.
	shm := &Envelope{Request: &core.InferRequest{Outputs: []core.RequestedOutput{{Name: "OUTPUT1"}}}, Kinds: []OutputKind{OutputSharedMemory}}
	header, _, _, _ = EncodeResponse(resp, shm)
	if !strings.Contains(string(header), `{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}`) {
		t.Fatalf("%s", header)
	}
}

// TestEncodeErrors covers the failures of encoding a response.
func TestEncodeErrors(t *testing.T) {
	one := func(t *core.Tensor) *core.InferResponse {
		return &core.InferResponse{ModelName: "m", ModelVersion: 1, Outputs: []*core.Tensor{t}}
	}
	cases := []struct {
		resp *core.InferResponse
		code core.Code
		msg  string
	}{
		{one(&core.Tensor{Name: "H", DataType: core.TypeFP16, Shape: []int64{1}, Data: []byte{0, 0x3c}}), core.CodeInvalidArg, "sending FP16 data via JSON is not supported. Please use the binary data format for output"},
		{one(&core.Tensor{Name: "B", DataType: core.TypeBF16, Shape: []int64{1}, Data: []byte{0, 0}}), core.CodeInvalidArg, "sending BF16 data via JSON is not supported. Please use the binary data format for output"},
		{one(&core.Tensor{Name: "I", DataType: core.TypeInvalid, Shape: []int64{1}}), core.CodeInvalidArg, "Invalid data type for output tensor"},
		{one(&core.Tensor{Name: "S", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: make([]byte, 60)}), core.CodeInternal, "output tensor shape does not match size of output for 'S'"},
		{one(&core.Tensor{Name: "N", DataType: core.TypeInt32, Shape: []int64{-1}, Data: nil}), core.CodeInternal, "output tensor shape does not match size of output for 'N'"},
		{one(&core.Tensor{Name: "O", DataType: core.TypeInt8, Shape: []int64{1 << 62, 8}, Data: nil}), core.CodeInternal, "output tensor shape does not match size of output for 'O'"},
		{one(&core.Tensor{Name: "T", DataType: core.TypeBytes, Shape: []int64{2}, Data: bytesElems("a")}), core.CodeInternal, "output tensor shape does not match size of output for 'T'"},
		{one(&core.Tensor{Name: "U", DataType: core.TypeBytes, Shape: []int64{1}, Data: []byte{9, 0, 0, 0, 'x'}}), core.CodeInternal, "output tensor shape does not match size of output for 'U'"},
		{&core.InferResponse{ModelName: "m", Parameters: map[string]any{"p": []byte("x")}}, core.CodeUnsupported, "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"},
		{&core.InferResponse{ModelName: "m", Parameters: map[string]any{"p": struct{}{}}}, core.CodeInternal, "response parameter 'p' has unsupported type struct {}"},
	}
	for _, c := range cases {
		_, _, _, err := EncodeResponse(c.resp, nil)
		wantError(t, err, c.code, c.msg)
	}
	// FP16 and BF16 travel fine as binary.
	h := one(&core.Tensor{Name: "H", DataType: core.TypeFP16, Shape: []int64{1}, Data: []byte{0, 0x3c}})
	if _, blobs, _, err := EncodeResponse(h, &Envelope{DefaultKind: OutputBinary}); err != nil || len(blobs) != 1 {
		t.Fatal(err)
	}
}

// allTypesResponse has one output per datatype with edge values, plus
// response parameters.
func allTypesResponse() *core.InferResponse {
	out := []*core.Tensor{
		{Name: "bool", DataType: core.TypeBool, Shape: []int64{2, 2}, Data: []byte{1, 0, 2, 0}},
		{Name: "u8", DataType: core.TypeUint8, Shape: []int64{3}, Data: []byte{0, 127, 255}},
		{Name: "u16", DataType: core.TypeUint16, Shape: []int64{2}, Data: le16(0, 65535)},
		{Name: "u32", DataType: core.TypeUint32, Shape: []int64{2}, Data: le32(1, 4294967295)},
		{Name: "u64", DataType: core.TypeUint64, Shape: []int64{2}, Data: le64(0, math.MaxUint64)},
		{Name: "i8", DataType: core.TypeInt8, Shape: []int64{2}, Data: []byte{0x80, 0x7f}},
		{Name: "i16", DataType: core.TypeInt16, Shape: []int64{2}, Data: le16(0x8000, 0x7fff)},
		{Name: "i32", DataType: core.TypeInt32, Shape: []int64{2}, Data: le32(0x80000000, 0x7fffffff)},
		{Name: "i64", DataType: core.TypeInt64, Shape: []int64{2}, Data: le64(1<<63, math.MaxInt64)},
		{Name: "fp32", DataType: core.TypeFP32, Shape: []int64{8}, Data: f32s(0.1, 1, -2.5, 1e-7, 3.4e38, float32(math.Inf(1)), float32(math.NaN()), float32(math.Copysign(0, -1)))},
		{Name: "fp64", DataType: core.TypeFP64, Shape: []int64{8}, Data: f64s(0.1, 100, 1e21, 1.5e-6, 5e-324, math.Inf(-1), math.NaN(), 123456.789)},
		{Name: "bytes", DataType: core.TypeBytes, Shape: []int64{4}, Data: bytesElems("", "plain", "q\"\\\n\x01\x7f", "\xff\xfeé")},
		{Name: "scalar", DataType: core.TypeFP32, Shape: []int64{}, Data: f32s(7)},
	}
	return &core.InferResponse{ID: "all", ModelName: "types", ModelVersion: 12, Outputs: out,
		Parameters: map[string]any{"z": "last", "a": int64(-3), "m": true, "f": 0.25, "u": uint64(math.MaxUint64)}}
}

func TestEncodeAllTypesGolden(t *testing.T) {
	header, blobs, binary, err := EncodeResponse(allTypesResponse(), nil)
	if err != nil || binary || blobs != nil {
		t.Fatal(err)
	}
	golden(t, "response_all_types.json", header)
	// The header is valid JSON for our own parser.
	if _, err := tritonjson.ParseJSON(header); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeBinaryGolden(t *testing.T) {
	header, blobs, binary, err := EncodeResponse(allTypesResponse(), &Envelope{DefaultKind: OutputBinary})
	if err != nil || !binary {
		t.Fatal(err)
	}
	body := append([]byte(nil), header...)
	for _, b := range blobs {
		body = append(body, b...)
	}
	golden(t, "response_all_types.bin", body)
}

// TestJSONRoundTrip sends every datatype as request JSON, returns the
// decoded tensors as JSON outputs and feeds each output's "data" back as a
// request: the bytes must survive unchanged.
func TestJSONRoundTrip(t *testing.T) {
	for _, c := range jsonTensorCases {
		in := `{"inputs":[{"name":"X","datatype":"` + c.dt.String() + `","shape":[2,2],"data":` + c.json + `}]}`
		env, err := decodeJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		t1 := env.Request.Inputs[0]
		header, _, _, err := EncodeResponse(&core.InferResponse{ModelName: "m", Outputs: []*core.Tensor{t1}}, env)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := tritonjson.ParseJSON(header)
		if err != nil {
			t.Fatalf("%s: %v", header, err)
		}
		outs, _ := doc.Root().MemberArray("outputs")
		o0, _ := outs.Index(0)
		data, _ := o0.Member("data")
		start := bytes.Index(header, []byte(`"data":`)) + len(`"data":`)
		text := header[start : len(header)-3] // strip "}]}"
		if data.Len() != 4 || !bytes.HasPrefix(text, []byte("[")) {
			t.Fatalf("%s", header)
		}
		env2, err := decodeJSON(`{"inputs":[{"name":"X","datatype":"` + c.dt.String() + `","shape":[4],"data":` + string(text) + `}]}`)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got := env2.Request.Inputs[0].Data
		if c.dt == core.TypeFP32 || c.dt == core.TypeFP64 {
			got, t1.Data = canonNaN(c.dt, got), canonNaN(c.dt, t1.Data)
		}
		if !bytes.Equal(got, t1.Data) {
			t.Fatalf("%s round trip via %s:\n got %x\nwant %x", c.dt, text, got, t1.Data)
		}
	}
}

// TestBinaryRoundTrip sends every datatype as binary input and binary
// output.
func TestBinaryRoundTrip(t *testing.T) {
	var outs []*core.Tensor
	header := `{"inputs":[`
	var blob []byte
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		data := bytesElems("x", "yz")
		if dt != core.TypeBytes {
			data = make([]byte, 2*dt.ByteSize())
			for i := range data {
				data[i] = byte(0xA0 + i)
			}
		}
		if dt > core.TypeBool {
			header += ","
		}
		header += `{"name":"` + dt.String() + `","datatype":"` + dt.String() + `","shape":[2],"parameters":{"binary_data_size":` + itoa(len(data)) + `}}`
		blob = append(blob, data...)
	}
	header += `],"parameters":{"binary_data_output":true}}`
	env, err := decodeBin(header, blob)
	if err != nil {
		t.Fatal(err)
	}
	outs = env.Request.Inputs
	h, blobs, binary, err := EncodeResponse(&core.InferResponse{ModelName: "m", Outputs: outs}, env)
	if err != nil || !binary || len(blobs) != len(outs) {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.Join(blobs, nil), blob) {
		t.Fatal("blobs differ")
	}
	if !strings.Contains(string(h), `{"name":"BYTES","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":11}}`) {
		t.Fatalf("%s", h)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestClassificationOutput: "classification":2 on a
// batching model's [1,16] output gives BYTES [1,2] strings.
func TestClassificationOutput(t *testing.T) {
	env := mustDecode(t, `{"inputs":[],"outputs":[{"name":"OUTPUT0","parameters":{"classification":2}}]}`)
	resp := simpleResponse("")
	k := env.Request.Outputs[0].ClassCount
	ct, err := core.Classify(resp.Outputs[0], k, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Outputs = []*core.Tensor{ct}
	header, _, _, err := EncodeResponse(resp, env)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"OUTPUT0","datatype":"BYTES","shape":[1,2],"data":["32:15","30:14"]}`
	if !strings.Contains(string(header), want) {
		t.Fatalf("%s", header)
	}
	re := regexp.MustCompile(`^-?\d+(\.\d{6})?:\d+(:.*)?$`)
	for _, s := range []string{"32:15", "30:14"} {
		if !re.MatchString(s) {
			t.Fatal(s)
		}
	}
}
