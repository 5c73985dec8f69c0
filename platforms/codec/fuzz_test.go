package codec

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// fuzzMax keeps JSON-decoded tensors small while fuzzing.
const fuzzMax = 1 << 20

// checkDecoded asserts the invariants of any DecodeRequest(body, jsonLen)
// result: errors are classified *core.Error values; decoded fixed-size
// tensors hold exactly shape × element size bytes; JSON-decoded BYTES
// tensors are well framed; and encoding the inputs back as outputs never
// panics.
func checkDecoded(t *testing.T, body []byte, jsonLen int, r *Envelope, err error) {
	t.Helper()
	if err != nil {
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Msg == "" {
			t.Fatalf("error %v is not a *core.Error", err)
		}
		switch ce.Code {
		case core.CodeInternal, core.CodeInvalidArg, core.CodeNotFound:
		default:
			t.Fatalf("unexpected class %s for %q", ce.Code, ce.Msg)
		}
		return
	}
	req := r.Request
	if req.Raw {
		if len(req.Inputs) != 1 || len(req.Inputs[0].Data) != len(body) {
			t.Fatalf("raw request %+v", req)
		}
		return
	}
	for _, in := range req.Inputs {
		switch size := in.DataType.ByteSize(); {
		case size > 0:
			n := core.ElementCount(in.Shape)
			if n < 0 || int64(len(in.Data)) != n*int64(size) {
				t.Fatalf("input %q %s %v has %d bytes", in.Name, in.DataType, in.Shape, len(in.Data))
			}
		case in.DataType == core.TypeBytes && (jsonLen < 0 || jsonLen == len(body)):
			if core.CountBytesElements(in.Data) < 0 {
				t.Fatalf("input %q: broken BYTES framing", in.Name)
			}
		}
	}
	for _, kind := range []OutputKind{OutputJSON, OutputBinary} {
		resp := &core.InferResponse{ID: req.ID, ModelName: req.ModelName, Outputs: req.Inputs, Parameters: req.Parameters}
		header, _, _, err := EncodeResponse(resp, &Envelope{DefaultKind: kind})
		if err == nil {
			if _, perr := tritonjson.ParseJSON(header); perr != nil {
				t.Fatalf("encoded header does not parse: %v\n%s", perr, header)
			}
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"inputs":[]}`,
		`{"id":"1","inputs":[{"name":"A","datatype":"INT32","shape":[2],"data":[1,2]}]}`,
		`{"inputs":[{"name":"A","datatype":"BYTES","shape":[2],"data":[["a"],"\u0000"]}]}`,
		`{"parameters":{"sequence_id":"s","priority":1,"x":1.5},"inputs":[{"name":"B","datatype":"FP32","shape":[1,2],"data":[NaN,-Infinity]}],"outputs":[{"name":"O","parameters":{"binary_data":true,"classification":2}}]}`,
		// "data" nested past MaxDataNesting, and past MaxDepth.
		`{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":` + strings.Repeat("[", 120) + "1" + strings.Repeat("]", 120) + `}]}`,
		`{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":` + strings.Repeat("[", tritonjson.MaxDepth) + "1" + strings.Repeat("]", tritonjson.MaxDepth) + `}]}`,
		// Many parameters, read through the decoder's index of the
		// object: distinct names, and names cut at a NUL that find a
		// later member.
		`{"parameters":{` + manyParams(2000, `,"priority":1,"binary_data_output":true`) + `},"inputs":[]}`,
		`{"parameters":{` + nulNames("x", 1000) + `,"x":"last"},"inputs":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		env, err := DecodeRequest(context.Background(), "m", header, -1, fuzzMax, nil)
		checkDecoded(t, header, -1, env, err)
		checkParamsMatchScan(t, header)
	})
}

func FuzzBinaryFraming(f *testing.F) {
	add := func(header string, blob []byte, lengthHeader string) {
		f.Add(lengthHeader, append([]byte(header), blob...))
	}
	h := `{"inputs":[{"name":"A","datatype":"INT32","shape":[1,2],"parameters":{"binary_data_size":8}},{"name":"B","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":5}}]}`
	add(h, []byte{1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 'x'}, itoa(len(h)))
	add(h, []byte{1, 0, 0, 0}, itoa(len(h)))
	add(`{"inputs":[]}`, nil, "13")
	add("", []byte{0, 0, 128, 63}, "0")
	// Bodies longer than the header announces, and announced sizes that
	// overflow when summed.
	add(h, append(bytes.Repeat([]byte{1, 0, 0, 0}, 2), bytes.Repeat([]byte{'x'}, 64)...), itoa(len(h)))
	big := `{"inputs":[{"name":"A","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":18446744073709551615}},{"name":"B","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":2}}]}`
	add(big, []byte{1, 2, 3}, itoa(len(big)))
	str := `{"inputs":[{"name":"A","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":"1"}}]}`
	add(str, []byte{1, 2}, itoa(len(str)))
	f.Fuzz(func(t *testing.T, lengthHeader string, body []byte) {
		n, err := ParseHeaderLength(lengthHeader, len(body))
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeInvalidArg {
				t.Fatalf("header length error %v", err)
			}
			return
		}
		env, err := DecodeRequest(context.Background(), "m", body, n, fuzzMax, nil)
		checkDecoded(t, body, n, env, err)
		checkTruncated(t, body, n, err)
	})
}

// checkTruncated asserts what a server reading only the announced binary
// section relies on: parsing the header first and decoding a body cut one
// byte past the header plus BinarySize fails, or succeeds, exactly as the
// whole body does (want is DecodeRequest's error).
func checkTruncated(t *testing.T, body []byte, jsonLen int, want error) {
	t.Helper()
	if jsonLen <= 0 {
		return
	}
	h, err := ParseRequestHeader("m", body[:jsonLen], fuzzMax, nil)
	if err == nil {
		cut := len(body)
		if rest := int64(len(body) - jsonLen); h.BinarySize() < rest {
			cut = jsonLen + int(h.BinarySize()) + 1
		}
		_, err = h.Decode(context.Background(), body[:cut])
	}
	if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
		t.Fatalf("header then truncated body: %v; whole body: %v", err, want)
	}
}
