package grpcapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestResponseParametersAlike renders one core response parameter of each
// Go type a backend may set over both transports: the HTTP writer
// (codec.AppendParameterValue) and gRPC's (responseParameter) must carry the
// same value, or refuse it with the same error.
func TestResponseParametersAlike(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string // the value as gRPC carries it, printed: kind:value
	}{
		{"bool", true, "bool:true"},
		{"string", "a \"quoted\" é", `string:a "quoted" é`},
		{"int", int(-7), "int64:-7"},
		{"int8", int8(-128), "int64:-128"},
		{"int16", int16(-32768), "int64:-32768"},
		{"int32", int32(math.MinInt32), "int64:-2147483648"},
		{"int64", int64(math.MinInt64), "int64:-9223372036854775808"},
		{"uint", uint(7), "uint64:7"},
		{"uint8", uint8(255), "uint64:255"},
		{"uint16", uint16(65535), "uint64:65535"},
		{"uint32", uint32(math.MaxUint32), "uint64:4294967295"},
		{"uint64", uint64(math.MaxUint64), "uint64:18446744073709551615"},
		{"float32", float32(0.5), "double:0.5"},
		{"float64", 2.25, "double:2.25"},
		{"bytes", []byte("x"), "error:Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"},
		{"other", struct{}{}, "error:response parameter 'other' has unsupported type struct {}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, httpErr := codec.AppendParameterValue(nil, tc.name, tc.v)
			p, grpcErr := responseParameter(tc.name, tc.v)
			if (httpErr == nil) != (grpcErr == nil) || (httpErr != nil && httpErr.Error() != grpcErr.Error()) {
				t.Fatalf("errors differ: HTTP %v, gRPC %v", httpErr, grpcErr)
			}
			var got string
			if grpcErr != nil {
				got = "error:" + grpcErr.Error()
				if core.CodeOf(grpcErr) != core.CodeOf(httpErr) {
					t.Fatalf("codes differ: %v, %v", core.CodeOf(httpErr), core.CodeOf(grpcErr))
				}
			} else {
				got = grpcValue(p)
				// The HTTP JSON value, read back, is the same value.
				var back any
				dec := json.NewDecoder(bytes.NewReader(text))
				dec.UseNumber()
				if err := dec.Decode(&back); err != nil {
					t.Fatalf("HTTP wrote %s: %v", text, err)
				}
				if h := httpValue(back); h != got[len(kind(got))+1:] {
					t.Fatalf("HTTP %s (%s), gRPC %s", text, h, got)
				}
			}
			if got != tc.want {
				t.Fatalf("gRPC %s, want %s", got, tc.want)
			}
		})
	}
}

func kind(s string) string {
	for i := range len(s) {
		if s[i] == ':' {
			return s[:i]
		}
	}
	return s
}

func grpcValue(p *pb.InferParameter) string {
	switch c := p.GetParameterChoice().(type) {
	case *pb.InferParameter_BoolParam:
		return "bool:" + strconv.FormatBool(c.BoolParam)
	case *pb.InferParameter_StringParam:
		return "string:" + c.StringParam
	case *pb.InferParameter_Int64Param:
		return "int64:" + strconv.FormatInt(c.Int64Param, 10)
	case *pb.InferParameter_Uint64Param:
		return "uint64:" + strconv.FormatUint(c.Uint64Param, 10)
	case *pb.InferParameter_DoubleParam:
		return "double:" + strconv.FormatFloat(c.DoubleParam, 'g', -1, 64)
	}
	return "none"
}

func httpValue(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return "?"
}
