package vertex

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// sendBody posts body with SendBody; size -1 is chunked.
func sendBody(t *testing.T, rawURL string, header map[string]string, body io.Reader, size int64) (int, string) {
	t.Helper()
	h := http.Header{}
	for k, v := range header {
		h[k] = []string{v}
	}
	r := servertest.SendBody(rawURL, h, body, size)
	must(t, r.Err)
	return r.Status, r.Body
}

// TestPredictBodyLimits: the predict route reads a body no further than
// --http-max-input-size (binary blobs excepted), and answers the base
// route's errors in its order.
func TestPredictBodyLimits(t *testing.T) {
	const limit = 1 << 20
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{MaxInputSize: limit})
	_, base := listen(t, c, api, "", true)
	predict := base + predictRoute
	const huge = 300 << 20
	jsonTooLarge := func(n int64) string {
		return `{"error":"request JSON size of ` + strconv.FormatInt(n, 10) + ` bytes exceeds the maximum allowed input size of 1048576 bytes. Use --http-max-input-size to increase the limit."}`
	}
	for _, c := range []struct {
		name   string
		header map[string]string
		size   int64
		want   string
		budget uint64
	}{
		{"JSON, Content-Length", nil, huge, jsonTooLarge(huge), 1 << 20},
		{"JSON, chunked", nil, -1, jsonTooLarge(limit + 1), 3 * limit},
		{"redirected infer, chunked", redirect("v2/models/id1/infer"), -1, jsonTooLarge(limit + 1), 3 * limit},
		{"raw binary, Content-Length", map[string]string{"Content-Type": BinaryContentType + "0"}, huge,
			`{"error":"Raw input has a byte_size (314572800 bytes) that exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size to increase the limit."}`, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var status int
			var body string
			n := servertest.Allocated(func() { status, body = sendBody(t, predict, c.header, &servertest.Zeros{N: huge}, c.size) })
			if status != 400 || body != c.want {
				t.Fatalf("%d %q, want 400 %s", status, body, c.want)
			}
			if n > c.budget {
				t.Errorf("allocated %.1f MiB, budget %.1f MiB", float64(n)/(1<<20), float64(c.budget)/(1<<20))
			}
		})
	}
	t.Run("binary blobs beyond the limit", func(t *testing.T) {
		const elems = 3 * limit / 4
		blob := make([]byte, 4*elems)
		for i := range elems {
			binary.LittleEndian.PutUint32(blob[4*i:], math.Float32bits(float32(i)))
		}
		hdr := `{"inputs":[{"name":"INPUT0","shape":[1,` + strconv.Itoa(elems) + `],"datatype":"FP32","parameters":{"binary_data_size":` + strconv.Itoa(len(blob)) + `}}],"parameters":{"binary_data_output":true}}`
		ct := map[string]string{"Content-Type": BinaryContentType + strconv.Itoa(len(hdr))}
		for _, size := range []int64{int64(len(hdr) + len(blob)), -1} {
			status, body := sendBody(t, predict, ct, io.MultiReader(strings.NewReader(hdr), bytes.NewReader(blob)), size)
			if status != 200 || !strings.HasSuffix(body, string(blob)) {
				t.Fatalf("Content-Length %d: %d %.200q", size, status, body)
			}
		}
	})
	t.Run("header size beyond a chunked body", func(t *testing.T) {
		status, body := sendBody(t, predict, map[string]string{"Content-Type": BinaryContentType + "500"}, strings.NewReader(id1Body), -1)
		if want := `{"error":"inference header size should be in range (0, ` + strconv.Itoa(len(id1Body)) + `), got: 500"}`; status != 400 || body != want {
			t.Fatalf("%d %q, want %s", status, body, want)
		}
	})
	t.Run("still serving", func(t *testing.T) {
		if status, _, b := do(t, "POST", predict, nil, id1Body); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	})
}

// TestPredictTooLargeOrder: an oversized predict body on a restricted or
// unloaded model answers what the base route answers first.
func TestPredictTooLargeOrder(t *testing.T) {
	restricted := map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "inference:X-Auth=secret"))
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{MaxInputSize: 100, Restricted: restricted})
	_, base := listen(t, c, api, "", true)
	status, body := sendBody(t, base+predictRoute, nil, &servertest.Zeros{N: 10 << 20}, -1)
	if want := `{"error":"This API is restricted, expecting header 'X-Auth'"}`; status != 403 || body != want {
		t.Fatalf("restricted: %d %q", status, body)
	}
	must(t, c.Unload(t.Context(), "id1"))
	status, body = sendBody(t, base+predictRoute, map[string]string{"X-Auth": "secret"}, &servertest.Zeros{N: 10 << 20}, -1)
	if status != 404 || !strings.Contains(body, "Request for unknown model: 'id1'") {
		t.Fatalf("unloaded: %d %q", status, body)
	}
}

// TestRecover: a panic in the Vertex layer answers 500 and the listener
// keeps serving.
func TestRecover(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{})
	h := New(c, api, Options{HealthRoute: healthRoute, PredictRoute: predictRoute, Logger: quiet,
		Metrics: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("metrics bug") })})
	must(t, h.Resolve())
	_, base := listenHandler(t, h)
	status, _, b := do(t, "POST", base+predictRoute, redirect("metrics"), "")
	if want := `{"error":"failed to process the request: internal error: metrics bug"}`; status != 500 || string(b) != want {
		t.Fatalf("%d %s", status, b)
	}
	if status, _, b := do(t, "POST", base+predictRoute, nil, id1Body); status != 200 {
		t.Fatalf("after the panic: %d %s", status, b)
	}
	r, _ := http.NewRequest("POST", base+predictRoute, nil)
	if got := h.modelOf(r); got != "id1" {
		t.Errorf("model of a predict request: %q", got)
	}
	r.Header.Set(RedirectHeader, "v2/models/other/infer")
	if got := h.modelOf(r); got != "other" {
		t.Errorf("model of a redirected request: %q", got)
	}
}
