package tritonjson

import (
	"math/rand"
	"strconv"
	"testing"
)

// fp32Request is an infer request with n FP32 values as the Python client
// sends them: float32 values widened to double, shortest round-trip text.
func fp32Request(n int) []byte {
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

func BenchmarkParseJSON1M(b *testing.B) {
	body := fp32Request(1000000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ParseJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
