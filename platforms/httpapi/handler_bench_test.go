package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkInferHandler serves `simple` infer requests straight into the API
// handler, without a network or an HTTP client, so that allocs/op counts
// inferd's own per-request allocations (routing, decoding, validation,
// scheduling, the ONNX Runtime run, encoding) and nothing of net/http's:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkInferHandler -benchmem
func BenchmarkInferHandler(b *testing.B) {
	api, _ := newAPI(b, writeRepo(b, map[string]testModel{"simple": standardModels(b)["simple"]}), serverOpts{})
	in0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) })...)
	in1 := int32Bytes(seq(16, func(int) int32 { return 1 })...)
	jsonBody := []byte(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`)
	binHeader, binBody := binaryRequest(simpleAllBinaryHeader, in0, in1)
	for _, c := range []struct {
		name   string
		header http.Header
		body   []byte
	}{
		{"json", http.Header{"Content-Type": {"application/json"}}, jsonBody},
		{"binary", binHeader, binBody},
	} {
		b.Run(c.name, func(b *testing.B) {
			req, err := http.NewRequest(http.MethodPost, "/v2/models/simple/infer", nil)
			must(b, err)
			req.Header = c.header
			req.ContentLength = int64(len(c.body))
			body := &rewindBody{}
			req.Body = body
			w := &discardWriter{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(c.body)
				clear(w.header)
				w.status = 0
				api.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

// rewindBody is a request body that can be refilled without allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

var (
	_ io.ReadCloser       = (*rewindBody)(nil)
	_ http.ResponseWriter = (*discardWriter)(nil)
)
