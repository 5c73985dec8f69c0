package codec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/inferd/inferd/core"
)

const testMax = 64 << 20

// wantError checks err is a *core.Error of class code with message msg.
func wantError(t *testing.T, err error, code core.Code, msg string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want *core.Error %s %q", err, err, code, msg)
	}
	if ce.Code != code || ce.Msg != msg {
		t.Fatalf("error = %s %q\nwant    %s %q", ce.Code, ce.Msg, code, msg)
	}
}

// decodeJSON decodes a JSON-only body without the header-length header.
func decodeJSON(body string) (*Envelope, error) {
	return DecodeRequest(context.Background(), "simple", []byte(body), -1, testMax, nil)
}

// decodeBin decodes header + blobs with the header length set.
func decodeBin(header string, blobs ...[]byte) (*Envelope, error) {
	body := []byte(header)
	for _, b := range blobs {
		body = append(body, b...)
	}
	return DecodeRequest(context.Background(), "simple", body, len(header), testMax, nil)
}

// in16 is a `simple` input with 16 values.
func in16(name string, extra string) string {
	return `{"name":"` + name + `","datatype":"INT32","shape":[1,16],` + extra + `}`
}

var data16 = `"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]`

func seq(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return strings.Join(s, ",")
}

func nested(depth int, scalar string) string {
	return strings.Repeat("[", depth) + scalar + strings.Repeat("]", depth)
}

// TestDecodeErrors has one case per decoding error rule, with the exact
// class and message Triton's HTTP frontend gives (triton-inference-server/server
// src/http_server.cc).
func TestDecodeErrors(t *testing.T) {
	const one = "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But"
	i32 := func(extra string) string {
		return `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2],` + extra + `}]}`
	}
	cases := []struct {
		name string
		body string
		blob []byte // when set the body is binary framed
		max  int64
		code core.Code
		msg  string
	}{
		{name: "malformed JSON (42)", body: `{"inputs":[}`, code: core.CodeInternal, msg: "failed to parse the request JSON buffer: Invalid value. at 11"},
		{name: "binary without header length", body: `{"inputs":[]}` + "\x01\x02", code: core.CodeInternal, msg: "failed to parse the request JSON buffer: The document root must not be followed by other values. at 13"},
		{name: "inputs missing", body: `{"id":"1"}`, code: core.CodeInternal, msg: "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"},
		{name: "inputs not array", body: `{"inputs":{}}`, code: core.CodeInternal, msg: "Unable to parse 'inputs': attempt to access JSON non-array as array"},
		{name: "root not object", body: `[1]`, code: core.CodeInternal, msg: "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"},
		{name: "id not string", body: `{"id":42,"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'id': attempt to access JSON non-string as string"},
		{name: "parameters not object", body: `{"parameters":[],"inputs":[]}`, code: core.CodeInternal, msg: "failed to get request params.: attempt to get members for non-object"},
		{name: "parameters null", body: `{"parameters":null,"inputs":[]}`, code: core.CodeInternal, msg: "failed to get request params.: attempt to get members for non-object"},
		{name: "sequence_id bool", body: `{"parameters":{"sequence_id":true},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'sequence_id': attempt to access JSON non-string as string"},
		{name: "sequence_id negative", body: `{"parameters":{"sequence_id":-1},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'sequence_id': attempt to access JSON non-string as string"},
		{name: "sequence_start", body: `{"parameters":{"sequence_start":1},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"},
		{name: "sequence_end", body: `{"parameters":{"sequence_end":"true"},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"},
		{name: "priority", body: `{"parameters":{"priority":-1},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "timeout", body: `{"parameters":{"timeout":1.5},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "binary_data_output", body: `{"parameters":{"binary_data_output":"yes"},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean"},
		{name: "reserved parameter (51)", body: `{"parameters":{"triton_foo":1},"inputs":[]}`, code: core.CodeInvalidArg, msg: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{name: "object parameter (51)", body: `{"parameters":{"x":{}},"inputs":[]}`, code: core.CodeInvalidArg, msg: "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "array parameter", body: `{"parameters":{"x":[1]},"inputs":[]}`, code: core.CodeInvalidArg, msg: "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "null parameter", body: `{"parameters":{"headers":null},"inputs":[]}`, code: core.CodeInvalidArg, msg: "parameter 'headers' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "parameter name with NUL", body: `{"parameters":{"k\u0000x":1},"inputs":[]}`, code: core.CodeInternal, msg: "parameter key 'k' was not found in the JSON"},
		{name: "scheduling key with NUL", body: `{"parameters":{"priority\u0000x":1},"inputs":[]}`, code: core.CodeInternal, msg: "Unable to parse 'priority': attempt to access non-existing object member 'priority'"},
		{name: "binary_data_output with NUL", body: `{"parameters":{"binary_data_output\u0000":true},"inputs":[]}`, code: core.CodeInternal,
			msg: "Unable to parse 'binary_data_output': attempt to access non-existing object member 'binary_data_output'"},
		{name: "reserved key with NUL", body: `{"parameters":{"triton_\u0000x":1},"inputs":[]}`, code: core.CodeInvalidArg, msg: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{name: "empty final response is gRPC's", body: `{"parameters":{"triton_enable_empty_final_response":true},"inputs":[]}`, code: core.CodeInvalidArg,
			msg: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{name: "parameters before inputs", body: `{"inputs":5,"parameters":{"priority":"x"}}`, code: core.CodeInternal, msg: "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"},

		{name: "no content field", body: `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2]}]}`, code: core.CodeInvalidArg, msg: one + " no field is set"},
		{name: "input not object", body: `{"inputs":[5]}`, code: core.CodeInvalidArg, msg: one + " no field is set"},
		{name: "data and binary (46)", body: i32(`"data":[1,2],"parameters":{"binary_data_size":8}`), code: core.CodeInvalidArg, msg: one + " set 'data' 'binary_data_size'"},
		{name: "data and shm", body: i32(`"data":[1,2],"parameters":{"shared_memory_region":"r"}`), code: core.CodeInvalidArg, msg: one + " set 'data' 'shared_memory_region'"},
		{name: "binary and shm", body: i32(`"parameters":{"binary_data_size":8,"shared_memory_region":"r"}`), code: core.CodeInvalidArg, msg: one + " set 'binary_data_size' 'shared_memory_region'"},
		{name: "all three", body: i32(`"data":null,"parameters":{"binary_data_size":8,"shared_memory_region":"r"}`), code: core.CodeInvalidArg, msg: one + " set 'data' 'binary_data_size' 'shared_memory_region'"},
		{name: "parameters not object hides binary", body: i32(`"parameters":[1]`), code: core.CodeInvalidArg, msg: one + " no field is set"},
		{name: "content check precedes name", body: `{"inputs":[{"datatype":"INT32"}]}`, code: core.CodeInvalidArg, msg: one + " no field is set"},
		{name: "name missing", body: `{"inputs":[{"datatype":"INT32","shape":[2],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'name': attempt to access non-existing object member 'name'"},
		{name: "name not string", body: `{"inputs":[{"name":1,"datatype":"INT32","shape":[2],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'name': attempt to access JSON non-string as string"},
		{name: "datatype missing", body: `{"inputs":[{"name":"A","shape":[2],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'"},
		{name: "datatype not string", body: `{"inputs":[{"name":"A","datatype":11,"shape":[2],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'datatype': attempt to access JSON non-string as string"},
		{name: "shape missing", body: `{"inputs":[{"name":"A","datatype":"INT32","data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'shape': attempt to access non-existing object member 'shape'"},
		{name: "shape not array", body: `{"inputs":[{"name":"A","datatype":"INT32","shape":2,"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'shape': attempt to access JSON non-array as array"},
		{name: "negative dim (45)", body: `{"inputs":[{"name":"A","datatype":"INT32","shape":[2,-5],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "fractional dim", body: `{"inputs":[{"name":"A","datatype":"INT32","shape":[2.0],"data":[1,2]}]}`, code: core.CodeInternal, msg: "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "duplicate input", body: `{"id":"42","inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT0", data16) + `]}`, code: core.CodeInvalidArg, msg: "[request id: 42] input 'INPUT0' already exists in request"},
		{name: "duplicate input no id", body: `{"inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT0", data16) + `]}`, code: core.CodeInvalidArg, msg: "[request id: <id_unknown>] input 'INPUT0' already exists in request"},
		{name: "unknown datatype", body: `{"inputs":[{"name":"A","datatype":"fp32","shape":[1],"data":[1]}]}`, code: core.CodeInvalidArg, msg: "invalid datatype for input A"},
		{name: "STRING is not a datatype", body: `{"inputs":[{"name":"A","datatype":"STRING","shape":[1],"data":["x"]}]}`, code: core.CodeInvalidArg, msg: "invalid datatype for input A"},
		{name: "FP16 JSON (50)", body: `{"inputs":[{"name":"A","datatype":"FP16","shape":[1],"data":[1]}]}`, code: core.CodeInvalidArg, msg: "receiving FP16 data via JSON is not supported. Please use the binary data format for input A"},
		{name: "BF16 JSON", body: `{"inputs":[{"name":"A","datatype":"BF16","shape":[1],"data":[1]}]}`, code: core.CodeInvalidArg, msg: "receiving BF16 data via JSON is not supported. Please use the binary data format for input A"},
		{name: "data not array", body: i32(`"data":1`), code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-array as array"},
		{name: "data null", body: i32(`"data":null`), code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-array as array"},
		{name: "15 of 16 values (43)", body: `{"inputs":[` + in16("INPUT0", `"data":[`+seq(15)+`]`) + `]}`, code: core.CodeInternal, msg: "Failed to parse 'data' field: shape does not match true shape"},
		{name: "18 of 16 values (44)", body: `{"inputs":[` + in16("INPUT0", `"data":[`+seq(18)+`]`) + `]}`, code: core.CodeInternal, msg: "Unable to parse 'data': Shape does not match true shape of 'data' field"},
		{name: "too many before bad type", body: i32(`"data":[1,2,"x"]`), code: core.CodeInternal, msg: "Unable to parse 'data': Shape does not match true shape of 'data' field"},
		{name: "bad type before too many", body: i32(`"data":[1,"x",3]`), code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "INT32 given FP", body: i32(`"data":[1,1.0]`), code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "INT64 beyond int64", body: `{"inputs":[{"name":"A","datatype":"INT64","shape":[1],"data":[9223372036854775808]}]}`, code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "UINT8 negative", body: `{"inputs":[{"name":"A","datatype":"UINT8","shape":[1],"data":[-1]}]}`, code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "BOOL number", body: `{"inputs":[{"name":"A","datatype":"BOOL","shape":[1],"data":[1]}]}`, code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-boolean as boolean"},
		{name: "FP32 string", body: `{"inputs":[{"name":"A","datatype":"FP32","shape":[1],"data":["1"]}]}`, code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-number as double"},
		{name: "FP64 null", body: `{"inputs":[{"name":"A","datatype":"FP64","shape":[1],"data":[null]}]}`, code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-number as double"},
		{name: "object element", body: i32(`"data":[1,{"a":[1,2,3]}]`), code: core.CodeInternal, msg: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "BYTES number", body: `{"inputs":[{"name":"A","datatype":"BYTES","shape":[2],"data":["a",1]}]}`, code: core.CodeInternal, msg: "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{name: "nesting 120 INT64 (53)", body: `{"inputs":[{"name":"A","datatype":"INT64","shape":[1,1],"data":` + nested(120, "123") + `}]}`, code: core.CodeInvalidArg, msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)"},
		{name: "nesting 120 BYTES", body: `{"inputs":[{"name":"A","datatype":"BYTES","shape":[1,1],"data":` + nested(120, `"hello"`) + `}]}`, code: core.CodeInvalidArg, msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)"},
		{name: "nesting 100", body: `{"inputs":[{"name":"A","datatype":"INT64","shape":[1],"data":` + nested(100, "1") + `}]}`, code: core.CodeInvalidArg, msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)"},
		{name: "nesting of an empty array", body: `{"inputs":[{"name":"A","datatype":"INT64","shape":[1],"data":[1,` + nested(100, "") + `]}]}`, code: core.CodeInvalidArg, msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)"},
		{name: "element count overflow", body: `{"inputs":[{"name":"A","datatype":"FP32","shape":[16,1152921504606846978],"data":[1.0]}]}`, code: core.CodeInvalidArg, msg: "invalid shape for input 'A': shape [16,1152921504606846978] causes total element count to exceed maximum size of 9223372036854775807"},
		{name: "byte size overflow", body: `{"inputs":[{"name":"A","datatype":"FP32","shape":[4,1152921504606846978],"data":[1.0]}]}`, code: core.CodeInvalidArg, msg: "byte size overflow for input 'A': element count 4611686018427387912 times element size 4 exceeds maximum size of 9223372036854775807"},
		{name: "JSON input too large", max: 4096, body: `{"inputs":[{"name":"A","datatype":"FP64","shape":[1000],"data":[]}]}`, code: core.CodeInvalidArg, msg: "JSON input 'A' has a byte_size (8000 bytes) that exceeds the maximum allowed value of 4096 bytes. Use --http-max-input-size to increase the limit."},
		// 200 empty strings: 3 bytes of JSON each, 4 bytes decoded.
		{name: "BYTES input too large", max: 700, body: `{"inputs":[{"name":"A","datatype":"BYTES","shape":[200],"data":[` + strings.TrimSuffix(strings.Repeat(`"",`, 200), ",") + `]}]}`, code: core.CodeInvalidArg, msg: "JSON input 'A' has a byte_size (800 bytes) that exceeds the maximum allowed value of 700 bytes. Use --http-max-input-size to increase the limit."},
		{name: "JSON text too large", max: 10, body: `{"inputs":[]}`, code: core.CodeInvalidArg, msg: "request JSON size of 13 bytes exceeds the maximum allowed input size of 10 bytes. Use --http-max-input-size to increase the limit."},
		{name: "shm input", body: i32(`"parameters":{"shared_memory_region":"r0","shared_memory_byte_size":8}`), code: core.CodeNotFound, msg: "Unable to find shared memory region: 'r0'"},
		{name: "shm region not string", body: i32(`"parameters":{"shared_memory_region":1}`), code: core.CodeInternal, msg: "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"},
		{name: "shm offset", body: i32(`"parameters":{"shared_memory_region":"r","shared_memory_offset":-1}`), code: core.CodeInternal, msg: "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "shm byte size", body: i32(`"parameters":{"shared_memory_region":"r","shared_memory_byte_size":"8"}`), code: core.CodeInternal, msg: "Unable to parse 'shared_memory_byte_size': attempt to access JSON non-unsigned-integer as unsigned-integer"},

		{name: "binary_data_size negative", body: i32(`"parameters":{"binary_data_size":-8}`), blob: []byte{}, code: core.CodeInternal, msg: "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "blob runs past body (58)", body: `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":64}`) + `,` + in16("INPUT1", `"parameters":{"binary_data_size":64}`) + `]}`, blob: make([]byte, 100), code: core.CodeInvalidArg, msg: "unexpected size for input 'INPUT1', expecting 28 additional bytes for model 'simple'"},
		{name: "extra trailing byte (57)", body: `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":64}`) + `]}`, blob: make([]byte, 65), code: core.CodeInvalidArg, msg: "unexpected additional input data for model 'simple'"},
		{name: "bytes left with JSON input", body: `{"inputs":[` + in16("INPUT0", data16) + `]}`, blob: []byte{0}, code: core.CodeInvalidArg, msg: "unexpected additional input data for model 'simple'"},
		{name: "binary size mismatch", body: `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":60}`) + `]}`, blob: make([]byte, 60), code: core.CodeInvalidArg, msg: "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"},
		{name: "binary shape overflow", body: `{"id":"7","inputs":[{"name":"A","datatype":"INT8","shape":[4294967296,4294967296],"parameters":{"binary_data_size":1}}]}`, blob: []byte{1}, code: core.CodeInvalidArg, msg: "invalid shape for input 'A': shape [4294967296,4294967296] causes total element count to exceed maximum size of 9223372036854775807"},
		{name: "leftover checked before outputs", body: `{"inputs":[],"outputs":5}`, blob: []byte{0}, code: core.CodeInvalidArg, msg: "unexpected additional input data for model 'simple'"},

		{name: "outputs not array", body: `{"inputs":[],"outputs":{}}`, code: core.CodeInternal, msg: "Unable to parse 'outputs': attempt to access JSON non-array as array"},
		{name: "output name missing", body: `{"inputs":[],"outputs":[{"parameters":{"binary_data":true}}]}`, code: core.CodeInternal, msg: "Unable to parse 'name': attempt to access non-existing object member 'name'"},
		{name: "duplicate output", body: `{"inputs":[],"outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT0"}]}`, code: core.CodeInvalidArg, msg: "output 'OUTPUT0' already exists in request"},
		{name: "binary_data not bool", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"binary_data":1}}]}`, code: core.CodeInternal, msg: "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean"},
		{name: "classification not uint", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"classification":-2}}]}`, code: core.CodeInternal, msg: "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "shm and classification (68)", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"classification":2,"shared_memory_region":"r"}}]}`, code: core.CodeInvalidArg, msg: "Output can't set both 'shared_memory_region' and 'classification'"},
		{name: "shm and binary_data", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"binary_data":true,"shared_memory_region":"r"}}]}`, code: core.CodeInvalidArg, msg: "Output can't set both 'shared_memory_region' and 'binary_data'"},
		{name: "shm and bad binary_data", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"binary_data":0,"shared_memory_region":"r"}}]}`, code: core.CodeInternal, msg: "Unable to set 'binary_data': attempt to access JSON non-boolean as boolean"},
		{name: "shm checks precede name", body: `{"inputs":[],"outputs":[{"parameters":{"classification":2,"shared_memory_region":"r"}}]}`, code: core.CodeInvalidArg, msg: "Output can't set both 'shared_memory_region' and 'classification'"},
		{name: "shm output", body: `{"inputs":[],"outputs":[{"name":"O","parameters":{"binary_data":false,"shared_memory_region":"out0"}}]}`, code: core.CodeNotFound, msg: "Unable to find shared memory region: 'out0'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			jsonLen := -1
			if c.blob != nil {
				jsonLen = len(body)
				body = append(body, c.blob...)
			}
			max := c.max
			if max == 0 {
				max = testMax
			}
			env, err := DecodeRequest(context.Background(), "simple", body, jsonLen, max, nil)
			if err == nil {
				t.Fatalf("decoded %+v, want error", env.Request)
			}
			wantError(t, err, c.code, c.msg)
		})
	}
}

func TestDecodeRawTooLarge(t *testing.T) {
	_, err := DecodeRequest(context.Background(), "m", make([]byte, 11), 0, 10, nil)
	wantError(t, err, core.CodeInvalidArg, "Raw input has a byte_size (11 bytes) that exceeds the maximum allowed value of 10 bytes. Use --http-max-input-size to increase the limit.")
	_, err = DecodeRequest(context.Background(), "m", make([]byte, 10), 11, 10, nil)
	wantError(t, err, core.CodeInvalidArg, "inference header size should be in range (0, 10), got: 11")
}

func i32le(vals ...int32) []byte {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// TestDecodeSimple decodes the `simple` request in JSON (with and without
// an id) and in binary form.
func TestDecodeSimple(t *testing.T) {
	want := i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
	env, err := decodeJSON(`{"id":"42","inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT1", data16) + `]}`)
	if err != nil {
		t.Fatal(err)
	}
	req := env.Request
	if req.ID != "42" || req.ModelName != "simple" || req.ModelVersion != core.LatestVersion || req.Raw || req.Outputs != nil || len(req.Inputs) != 2 {
		t.Fatalf("request %+v", req)
	}
	for i, in := range req.Inputs {
		if in.Name != fmt.Sprintf("INPUT%d", i) || in.DataType != core.TypeInt32 || core.ShapeString(in.Shape) != "[1,16]" || !bytes.Equal(in.Data, want) {
			t.Fatalf("input %d = %+v", i, in)
		}
	}
	if env.DefaultKind != OutputJSON || env.Kinds != nil || env.Request.Outputs != nil {
		t.Fatalf("envelope %+v", env)
	}

	header := `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":64}`) + `,` + in16("INPUT1", `"parameters":{"binary_data_size":64}`) + `],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
	body := append(append([]byte(header), want...), want...)
	env, err = DecodeRequest(context.Background(), "simple", body, len(header), testMax, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range env.Request.Inputs {
		if !bytes.Equal(in.Data, want) {
			t.Fatalf("input %d data", i)
		}
		// Binary data aliases the body.
		if unsafe.SliceData(in.Data) != &body[len(header)+64*i] || cap(in.Data) != 64 {
			t.Fatalf("input %d is not a sub-slice of the body", i)
		}
	}
	if env.Request.ID != "" {
		t.Fatalf("%+v", env)
	}
}

func TestDecodeNestedAndEmpty(t *testing.T) {
	// Nesting is not checked against the shape.
	env, err := decodeJSON(`{"inputs":[` + in16("INPUT0", `"data":[[1,2,3,4,5,6,7,8],[9,10,11,12,13,14,15,16]]`) + `,{"name":"X","datatype":"INT32","shape":[2,2],"data":[[1,2,3],[4]]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.Request.Inputs[0].Data, i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)) || !bytes.Equal(env.Request.Inputs[1].Data, i32le(1, 2, 3, 4)) {
		t.Fatal("flattening")
	}
	// 99 enclosing arrays are accepted.
	env, err = decodeJSON(`{"inputs":[{"name":"A","datatype":"BYTES","shape":[1,1],"data":` + nested(99, `"hello"`) + `},{"name":"B","datatype":"INT64","shape":[1],"data":[` + nested(98, "7") + `,` + nested(98, "") + `]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.Request.Inputs[0].Data, append([]byte{5, 0, 0, 0}, "hello"...)) {
		t.Fatalf("%q", env.Request.Inputs[0].Data)
	}
	// Zero elements: data is not examined; shape [] counts as 0.
	env, err = decodeJSON(`{"inputs":[{"name":"A","datatype":"FP32","shape":[],"data":"not an array"},{"name":"B","datatype":"FP16","shape":[3,0],"data":[1]},{"name":"C","datatype":"INT32","shape":[0,2],"parameters":{"binary_data_size":0}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range env.Request.Inputs {
		if in.Data == nil || len(in.Data) != 0 {
			t.Fatalf("%s: %v", in.Name, in.Data)
		}
	}
	if core.ShapeString(env.Request.Inputs[0].Shape) != "[]" || core.ShapeString(env.Request.Inputs[1].Shape) != "[3,0]" {
		t.Fatal("shapes")
	}
	// Unknown keys are ignored; an unknown datatype with binary data is
	// left for the core to reject.
	env, err = decodeBin(`{"model_name":"x","extra":[1,{}],"inputs":[{"name":"A","datatype":"FOO","shape":[2],"parameters":{"binary_data_size":3}}]}`, []byte{1, 2, 3})
	if err != nil || env.Request.Inputs[0].DataType != core.TypeInvalid {
		t.Fatal(err)
	}
}

// TestOutputKinds covers how binary_data_output and each requested output's
// binary_data and shared-memory parameters pick the output's kind.
func TestOutputKinds(t *testing.T) {
	cases := []struct {
		body  string
		kinds map[string]OutputKind // unlisted names get DefaultKind
		def   OutputKind
		names []string
		class map[string]uint64
	}{
		{body: `{"inputs":[]}`, def: OutputJSON, kinds: map[string]OutputKind{"OUTPUT0": OutputJSON}},
		{body: `{"parameters":{"binary_data_output":true},"inputs":[]}`, def: OutputBinary, kinds: map[string]OutputKind{"OUTPUT0": OutputBinary, "OUTPUT1": OutputBinary}},
		{body: `{"parameters":{"binary_data_output":true},"inputs":[],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}},{"name":"OUTPUT1"}]}`, def: OutputBinary,
			kinds: map[string]OutputKind{"OUTPUT0": OutputJSON, "OUTPUT1": OutputJSON}, names: []string{"OUTPUT0", "OUTPUT1"}},
		{body: `{"inputs":[],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"classification":3}}]}`, def: OutputJSON,
			kinds: map[string]OutputKind{"OUTPUT0": OutputBinary, "OUTPUT1": OutputJSON}, names: []string{"OUTPUT0", "OUTPUT1"}, class: map[string]uint64{"OUTPUT1": 3}},
		{body: `{"inputs":[],"outputs":[]}`, def: OutputJSON, kinds: map[string]OutputKind{"OUTPUT0": OutputJSON}},
		{body: `{"inputs":[],"outputs":[{"name":"O\u0000X","parameters":7}]}`, def: OutputJSON, kinds: map[string]OutputKind{"O": OutputJSON}, names: []string{"O"}},
	}
	for _, c := range cases {
		env, err := decodeJSON(c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if env.DefaultKind != c.def {
			t.Errorf("%s: default %v", c.body, env.DefaultKind)
		}
		for n, k := range c.kinds {
			if got := env.OutputKind(n); got != k {
				t.Errorf("%s: %s is %v, want %v", c.body, n, got, k)
			}
		}
		var names []string
		for _, o := range env.Request.Outputs {
			names = append(names, o.Name)
			if o.ClassCount != c.class[o.Name] {
				t.Errorf("%s: class count of %s = %d", c.body, o.Name, o.ClassCount)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(c.names) || (c.names == nil) != (env.Request.Outputs == nil) {
			t.Errorf("%s: requested outputs %v", c.body, names)
		}
	}
	raw, err := DecodeRequest(context.Background(), "id1", i32le(1, 2), 0, testMax, nil)
	if err != nil || raw.OutputKind("OUTPUT0") != OutputBinary {
		t.Fatal(err)
	}
	if (*Envelope)(nil).OutputKind("x") != OutputJSON {
		t.Fatal("nil envelope")
	}
}

// TestDecodeRaw covers raw binary requests (Inference-Header-Content-Length
// 0); the core completes the single input from the model configuration.
func TestDecodeRaw(t *testing.T) {
	body := make([]byte, 32)
	for _, jl := range []int{0} {
		env, err := DecodeRequest(context.Background(), "id1", body, jl, testMax, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := env.Request
		if !req.Raw || len(req.Inputs) != 1 || req.Inputs[0].Name != "" || req.Inputs[0].Shape != nil || len(req.Inputs[0].Data) != 32 || &req.Inputs[0].Data[0] != &body[0] {
			t.Fatalf("%+v", req)
		}
		if env.DefaultKind != OutputBinary {
			t.Fatalf("%+v", env)
		}
	}
	// An empty body without the header is a raw request too.
	env, err := DecodeRequest(context.Background(), "id1", nil, -1, testMax, nil)
	if err != nil || !env.Request.Raw || len(env.Request.Inputs[0].Data) != 0 {
		t.Fatal(err)
	}
}

// tensorCase is one datatype with JSON values and the bytes they encode to.
type tensorCase struct {
	dt    core.DataType
	json  string
	bytes []byte
}

func le16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func le32(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func le64(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func f32s(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func bytesElems(v ...string) []byte {
	var b []byte
	for _, s := range v {
		b = core.AppendBytesElement(b, []byte(s))
	}
	return b
}

// jsonTensorCases: every datatype's JSON element conversion, four elements
// each.
var jsonTensorCases = []tensorCase{
	{core.TypeBool, `[true,false,false,true]`, []byte{1, 0, 0, 1}},
	{core.TypeUint8, `[0,255,256,18446744073709551615]`, []byte{0, 255, 0, 255}},
	{core.TypeUint16, `[0,65535,65536,-0]`, le16(0, 65535, 0, 0)},
	{core.TypeUint32, `[1,4294967295,4294967296,7]`, le32(1, 4294967295, 0, 7)},
	{core.TypeUint64, `[0,1,9223372036854775808,18446744073709551615]`, le64(0, 1, 1<<63, math.MaxUint64)},
	{core.TypeInt8, `[-128,127,128,-129]`, []byte{0x80, 0x7f, 0x80, 0x7f}},
	{core.TypeInt16, `[-32768,32767,65535,-1]`, le16(0x8000, 0x7fff, 0xffff, 0xffff)},
	{core.TypeInt32, `[-2147483648,2147483647,4294967295,-1]`, le32(0x80000000, 0x7fffffff, 0xffffffff, 0xffffffff)},
	{core.TypeInt64, `[-9223372036854775808,9223372036854775807,0,-1]`, le64(1<<63, math.MaxInt64, 0, math.MaxUint64)},
	{core.TypeFP32, `[0.10000000149011612,1,-2.5e-3,NaN]`, f32s(0.1, 1, -2.5e-3, float32(math.NaN()))},
	{core.TypeFP32, `[Infinity,-Inf,1e39,3.4028234663852886e38]`, f32s(float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Inf(1)), math.MaxFloat32)},
	{core.TypeFP64, `[0.1,-0.0,1e-310,1.7976931348623157e308]`, f64s(0.1, math.Copysign(0, -1), 1e-310, math.MaxFloat64)},
	{core.TypeFP64, `[1,18446744073709551616,-Infinity,NaN]`, f64s(1, 18446744073709551616, math.Inf(-1), math.NaN())},
	{core.TypeBytes, `["","abc","\u0000\"\\é","\ud83d\ude00"]`, bytesElems("", "abc", "\x00\"\\é", "😀")},
}

func TestJSONTensorDatatypes(t *testing.T) {
	for _, c := range jsonTensorCases {
		body := `{"inputs":[{"name":"X","datatype":"` + c.dt.String() + `","shape":[2,2],"data":` + c.json + `}]}`
		env, err := decodeJSON(body)
		if err != nil {
			t.Fatalf("%s: %v", c.dt, err)
		}
		got := env.Request.Inputs[0].Data
		if c.dt == core.TypeFP32 || c.dt == core.TypeFP64 {
			// NaN payloads aside, compare bit patterns.
			if !bytes.Equal(canonNaN(c.dt, got), canonNaN(c.dt, c.bytes)) {
				t.Fatalf("%s %s:\n got %x\nwant %x", c.dt, c.json, got, c.bytes)
			}
			continue
		}
		if !bytes.Equal(got, c.bytes) {
			t.Fatalf("%s %s:\n got %x\nwant %x", c.dt, c.json, got, c.bytes)
		}
	}
}

// canonNaN replaces NaNs by one pattern so that comparisons ignore payloads.
func canonNaN(dt core.DataType, b []byte) []byte {
	out := append([]byte(nil), b...)
	if dt == core.TypeFP32 {
		for i := 0; i+4 <= len(out); i += 4 {
			if math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(out[i:])))) {
				binary.LittleEndian.PutUint32(out[i:], 0x7fc00000)
			}
		}
	} else {
		for i := 0; i+8 <= len(out); i += 8 {
			if math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(out[i:]))) {
				binary.LittleEndian.PutUint64(out[i:], 0x7ff8000000000001)
			}
		}
	}
	return out
}

// TestBinaryDatatypes: every datatype travels as binary unchanged.
func TestBinaryDatatypes(t *testing.T) {
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		n := 3
		var blob []byte
		if dt == core.TypeBytes {
			blob = bytesElems("a", "", "\xff\x00")
		} else {
			blob = make([]byte, n*dt.ByteSize())
			for i := range blob {
				blob[i] = byte(i*37 + 1)
			}
		}
		header := fmt.Sprintf(`{"inputs":[{"name":"X","datatype":"%s","shape":[%d],"parameters":{"binary_data_size":%d}}]}`, dt, n, len(blob))
		env, err := decodeBin(header, blob)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		in := env.Request.Inputs[0]
		if in.DataType != dt || !bytes.Equal(in.Data, blob) {
			t.Fatalf("%s: %+v", dt, in)
		}
	}
}

// TestDecodeAllocsBounded guards the allocation budget of a small request.
func TestDecodeAllocsBounded(t *testing.T) {
	body := []byte(`{"inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT1", data16) + `]}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := DecodeRequest(context.Background(), "simple", body, -1, testMax, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 16 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}

// TestDecodeDeepData: a "data" array nested past MaxDataNesting is Triton's
// 400; one nested a million deep is a parse error (500), and neither uses
// the call stack.
func TestDecodeDeepData(t *testing.T) {
	body := func(depth int) string {
		return `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":` +
			strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + `}]}`
	}
	for _, c := range []struct {
		depth int
		code  core.Code
		msg   string
	}{
		{120, core.CodeInvalidArg, "JSON nesting depth exceeds maximum allowed limit (100)"},
		{5000, core.CodeInvalidArg, "JSON nesting depth exceeds maximum allowed limit (100)"},
		{1_000_000, core.CodeInternal, "The document is nested deeper than 10000 levels."},
	} {
		_, err := decodeJSON(body(c.depth))
		if core.CodeOf(err) != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("depth %d: %v, want %s %q", c.depth, err, c.code, c.msg)
		}
	}
}

// TestRequestHeaderBinarySize: the header tells how many binary bytes
// follow, and a body cut one byte past them decodes like the whole body.
func TestRequestHeaderBinarySize(t *testing.T) {
	header := `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":64}`) + "," +
		in16("INPUT1", `"parameters":{"binary_data_size":64}`) + `]}`
	h, err := ParseRequestHeader("simple", []byte(header), testMax, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.BinarySize(); got != 128 {
		t.Fatalf("BinarySize = %d, want 128", got)
	}
	body := append([]byte(header), make([]byte, 128)...)
	env, err := h.Decode(context.Background(), body)
	if err != nil || len(env.Request.Inputs) != 2 || len(env.Request.Inputs[1].Data) != 64 {
		t.Fatalf("Decode: %v", err)
	}
	h, _ = ParseRequestHeader("simple", []byte(header), testMax, nil)
	if _, err := h.Decode(context.Background(), append(body, 0)); err == nil || err.Error() != "unexpected additional input data for model 'simple'" {
		t.Fatalf("one byte too many: %v", err)
	}
	for _, c := range []struct {
		header string
		want   int64
	}{
		{`{"inputs":[]}`, 0},
		{`{"inputs":{}}`, 0},
		{`{"inputs":[{"parameters":{"binary_data_size":"8"}},{"parameters":{"binary_data_size":3}}]}`, 3},
		{`{"inputs":[{"parameters":{"binary_data_size":18446744073709551615}},{"parameters":{"binary_data_size":1}}]}`, math.MaxInt64},
	} {
		h, err := ParseRequestHeader("m", []byte(c.header), testMax, nil)
		if err != nil || h.BinarySize() != c.want {
			t.Errorf("%s: BinarySize %v, want %d", c.header, err, c.want)
		}
	}
	if _, err := ParseRequestHeader("m", []byte(`{"inputs":[]}`), 5, nil); err == nil || !strings.Contains(err.Error(), "request JSON size of 13 bytes exceeds the maximum allowed input size of 5 bytes") {
		t.Fatalf("too large: %v", err)
	}
}
