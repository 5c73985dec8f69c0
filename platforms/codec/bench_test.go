package codec

import (
	"context"
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
)

func simpleJSONBody() []byte {
	return []byte(`{"id":"1","inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT1", data16) +
		`],"outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT1"}]}`)
}

func simpleBinaryBody() ([]byte, int) {
	h := `{"inputs":[` + in16("INPUT0", `"parameters":{"binary_data_size":64}`) + `,` +
		in16("INPUT1", `"parameters":{"binary_data_size":64}`) +
		`],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}`
	body := append([]byte(h), i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)...)
	body = append(body, i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)...)
	return body, len(h)
}

// fp32JSONBody is a request with n FP32 values as the Python client sends
// them: float32 values widened to double, shortest round-trip text.
func fp32JSONBody(n int) []byte {
	r := rand.New(rand.NewSource(1))
	b := []byte(`{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,` + strconv.Itoa(n) + `],"data":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(float32(r.NormFloat64())), 'g', -1, 64)
	}
	return append(b, "]}]}"...)
}

func BenchmarkDecodeSimpleJSON(b *testing.B) {
	body := simpleJSONBody()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(context.Background(), "simple", body, -1, testMax, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSimpleBinary(b *testing.B) {
	body, n := simpleBinaryBody()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(context.Background(), "simple", body, n, testMax, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeFP32JSON1M(b *testing.B) {
	body := fp32JSONBody(1000000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(context.Background(), "m", body, -1, testMax, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeSimpleJSON(b *testing.B) {
	resp := simpleResponse("1")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := EncodeResponse(resp, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeSimpleBinary(b *testing.B) {
	resp := simpleResponse("1")
	env := &Envelope{DefaultKind: OutputBinary}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := EncodeResponse(resp, env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFP32JSON1M(b *testing.B) {
	resp := &core.InferResponse{ModelName: "m", ModelVersion: 1, Outputs: []*core.Tensor{{Name: "OUTPUT0", DataType: core.TypeFP32, Shape: []int64{1, 1000000}, Data: fp32Blob(1000000)}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := EncodeResponse(resp, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func le32append(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// fp32Blob is n FP32 values as little-endian bytes.
func fp32Blob(n int) []byte {
	r := rand.New(rand.NewSource(1))
	data := make([]byte, 0, 4*n)
	for range n {
		data = le32append(data, math.Float32bits(float32(r.NormFloat64())))
	}
	return data
}

// fp32BinaryBody is a binary-extension request with one FP32 [1,n] input.
func fp32BinaryBody(n int) ([]byte, int) {
	h := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,` + strconv.Itoa(n) +
		`],"parameters":{"binary_data_size":` + strconv.Itoa(4*n) + `}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
	return append([]byte(h), fp32Blob(n)...), len(h)
}

// The binary extension's framing should cost the same whatever the tensor
// size: the blobs are sliced out of the body and into the reply, not copied.

func BenchmarkDecodeFP32Binary1M(b *testing.B) {
	body, n := fp32BinaryBody(1000000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(context.Background(), "m", body, n, testMax, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFP32Binary1M(b *testing.B) {
	resp := &core.InferResponse{ModelName: "m", ModelVersion: 1, Outputs: []*core.Tensor{{Name: "OUTPUT0", DataType: core.TypeFP32, Shape: []int64{1, 1000000}, Data: fp32Blob(1000000)}}}
	env := &Envelope{DefaultKind: OutputBinary}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := EncodeResponse(resp, env); err != nil {
			b.Fatal(err)
		}
	}
}

// paramsBody is an infer request of about size bytes, nearly all of them
// request parameters "p<i>":i.
func paramsBody(size int) []byte {
	b := []byte(`{"parameters":{`)
	for i := 0; len(b) < size-16; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"p`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return append(b, `},"inputs":[]}`...)
}

// BenchmarkDecodeParameters: the time per byte of a request made of
// parameters stays flat from 1 KB to 4 MB (about 60 to 250,000 members):
// each member is looked up by name through an index of the object, not a
// scan of it (the scan made 4 MB take minutes). ns/B is the figure to
// compare across sizes.
func BenchmarkDecodeParameters(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10, 4 << 20} {
		body := paramsBody(size)
		b.Run(strconv.Itoa(size>>10)+"KB", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := DecodeRequest(context.Background(), "m", body, -1, testMax, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body)), "ns/B")
		})
	}
}

func BenchmarkParseHeaderLength(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeaderLength("322", 450); err != nil {
			b.Fatal(err)
		}
	}
}
