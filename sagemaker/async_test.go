package sagemaker

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// floatsJSON is an id1 request of n FP32 values, as JSON.
func floatsJSON(n int) string {
	var b strings.Builder
	b.WriteString(`{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,` + fmt.Sprint(n) + `],"data":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("0.5")
	}
	b.WriteString(`]}]}`)
	return b.String()
}

// TestAsyncPayloadLimit: asynchronous inference sends bodies of up to
// 1 GB. JSON bodies are bounded by --http-max-input-size
// (SAGEMAKER_TRITON_MAX_INPUT_SIZE under `serve`), binary tensors after
// the JSON header are not.
func TestAsyncPayloadLimit(t *testing.T) {
	root := smeRepo(t)
	const limit = 1 << 20
	small := start(t, setup{repo: root, startup: []string{"id1"}, api: httpapi.Options{MaxInputSize: limit}, sm: Options{DefaultModel: "id1"}})
	large := start(t, setup{repo: root, startup: []string{"id1"}, api: httpapi.Options{MaxInputSize: 8 * limit}, sm: Options{DefaultModel: "id1"}})
	body := floatsJSON(400_000) // 1.6 MB of JSON
	ct := map[string]string{"Content-Type": ctJSON}

	small.do(t, http.MethodPost, "/invocations", ct, body).expectError(t, "over the limit", 400,
		fmt.Sprintf("request JSON size of %d bytes exceeds the maximum allowed input size of %d bytes. Use --http-max-input-size to increase the limit.", len(body), limit))
	r := large.do(t, http.MethodPost, "/invocations", ct, body)
	if r.status != 200 || !strings.Contains(r.body, `"shape":[1,400000]`) {
		t.Errorf("raised limit: got %d %.200q", r.status, r.body)
	}

	// 24 MiB of binary FP32 through the 1 MiB limit.
	const n = 6 << 20
	header := fmt.Sprintf(`{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,%d],"parameters":{"binary_data_size":%d}}],`+
		`"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`, n, 4*n)
	raw := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%1000)))
	}
	r = small.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": binaryMIME + fmt.Sprint(len(header))}, header+string(raw))
	if r.status != 200 {
		t.Fatalf("binary: got %d %.300q", r.status, r.body)
	}
	hlen := 0
	fmt.Sscanf(strings.TrimPrefix(r.header.Get("Content-Type"), binaryMIME), "%d", &hlen)
	if hlen == 0 || len(r.body) != hlen+4*n || r.body[hlen:] != string(raw) {
		t.Errorf("binary reply: Content-Type %q, %d bytes; want the %d input bytes back after the JSON header", r.header.Get("Content-Type"), len(r.body), 4*n)
	}
}

const gateConfig = `backend: "gate"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`

// TestInvocationTimeout: without SAGEMAKER_MODEL_SERVER_TIMEOUT a long
// request (asynchronous inference allows an hour) runs to its end; with
// it, the request ends at the deadline.
func TestInvocationTimeout(t *testing.T) {
	root := t.TempDir()
	writeModel(t, filepath.Join(root, "slow"), gateConfig, nil)
	body := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`
	ct := map[string]string{"Content-Type": ctJSON}

	gate := servertest.NewGate()
	open := start(t, setup{repo: root, startup: []string{"slow"}, backends: []core.Backend{gate}, sm: Options{DefaultModel: "slow"}})
	done := make(chan reply, 1)
	go func() { done <- open.do(t, http.MethodPost, "/invocations", ct, body) }()
	<-gate.Entered
	select {
	case r := <-done:
		t.Fatalf("answered while the model runs: %d %q", r.status, r.body)
	case <-time.After(300 * time.Millisecond):
	}
	close(gate.Release)
	(<-done).expect(t, "no timeout", 200, `{"model_name":"slow","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,2],"data":[1.0,2.0]}]}`)

	held := servertest.NewGate()
	bounded := start(t, setup{repo: root, startup: []string{"slow"}, backends: []core.Backend{held}, sm: Options{DefaultModel: "slow", InvocationTimeout: 200 * time.Millisecond}})
	defer close(held.Release)
	bounded.do(t, http.MethodPost, "/invocations", ct, body).expectError(t, "timeout", 400, "request cancelled: context deadline exceeded")
}
