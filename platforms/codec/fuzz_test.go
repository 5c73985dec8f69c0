package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

// fuzzMax keeps JSON-decoded tensors small while fuzzing.
const fuzzMax = 1 << 20

// checkDecoded asserts the invariants of any DecodeRequest(body, jsonLen)
// result: errors are classified *core.Error values; decoded fixed-size
// tensors hold exactly shape × element size bytes; JSON-decoded BYTES
// tensors are well framed; and encoding the inputs back as outputs never
// panics.
func checkDecoded(t *testing.T, body []byte, jsonLen int, env *Envelope, err error) {
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
	req := env.Request
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
			if _, perr := ParseJSON(header); perr != nil {
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
		`{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":` + strings.Repeat("[", MaxDepth) + "1" + strings.Repeat("]", MaxDepth) + `}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		env, err := DecodeRequest("m", header, -1, fuzzMax)
		checkDecoded(t, header, -1, env, err)
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
		env, err := DecodeRequest("m", body, n, fuzzMax)
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
	h, err := ParseRequestHeader("m", body[:jsonLen], fuzzMax)
	if err == nil {
		cut := len(body)
		if rest := int64(len(body) - jsonLen); h.BinarySize() < rest {
			cut = jsonLen + int(h.BinarySize()) + 1
		}
		_, err = h.Decode(body[:cut])
	}
	if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
		t.Fatalf("header then truncated body: %v; whole body: %v", err, want)
	}
}

// FuzzParseJSON checks the parser against encoding/json: every document
// encoding/json accepts is accepted too, unless it holds a number too large
// for a double or an unpaired high surrogate escape (both of which
// RapidJSON rejects).
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true,{}]}`, `[1e308,-0,"\u00e9"]`, `"\ud800\udc00"`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
		strings.Repeat("[", MaxDepth+5)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ParseJSON(src)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeInternal {
				t.Fatalf("parse error %v", err)
			}
		}
		if !json.Valid(src) {
			return
		}
		var std any
		if json.Unmarshal(src, &std) != nil {
			return // a number beyond float64
		}
		if err != nil {
			var ce *core.Error
			errors.As(err, &ce)
			if strings.Contains(ce.Msg, reasonNumberTooBig) || strings.Contains(ce.Msg, reasonBadSurrogate) {
				return
			}
			t.Fatalf("%q: encoding/json accepts, ParseJSON: %v", src, err)
		}
		if d.Root().Kind() == KindInvalid {
			t.Fatal("parsed document without a root")
		}
	})
}
