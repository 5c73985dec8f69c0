package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// gzipStream compresses n zero bytes on the fly.
func gzipStream(n int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		_, err := io.Copy(zw, &servertest.Zeros{N: n})
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

const mib = 1 << 20

// TestBodyLimitsMemory sends 300 MB bodies (generated, never held by the
// client) that the server must refuse with the spec's 400 after reading at
// most --http-max-input-size (64 MiB by default) of them, so that what it
// allocates stays within a small multiple of the limit, alone and four at
// a time.
func TestBodyLimitsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends gigabytes over loopback")
	}
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{mode: core.ModeExplicit, startup: []string{"id1", "simple"}})
	const huge = 300 * mib
	const limit = DefaultMaxInputSize
	rawTooLarge := func(n int64) string {
		return `{"error":"Raw input has a byte_size (` + strconv.FormatInt(n, 10) + ` bytes) that exceeds the maximum allowed value of 67108864 bytes. Use --http-max-input-size to increase the limit."}`
	}
	jsonTooLarge := func(n int64) string {
		return `{"error":"request JSON size of ` + strconv.FormatInt(n, 10) + ` bytes exceeds the maximum allowed input size of 67108864 bytes. Use --http-max-input-size to increase the limit."}`
	}
	infer := base + "/v2/models/id1/infer"
	cases := []struct {
		name   string
		url    string
		header http.Header
		body   func() io.Reader
		size   int64 // Content-Length; -1: chunked
		want   string
		budget uint64 // bytes the process may allocate
	}{
		{"raw, Content-Length", infer, hdrLen(0), func() io.Reader { return &servertest.Zeros{N: huge} }, huge, rawTooLarge(huge), 4 * mib},
		{"raw, chunked", infer, hdrLen(0), func() io.Reader { return &servertest.Zeros{N: huge} }, -1, rawTooLarge(limit + 1), 2*limit + 8*mib},
		{"raw without the header, chunked", infer, nil, func() io.Reader { return &servertest.Zeros{N: huge} }, -1, jsonTooLarge(limit + 1), 2*limit + 8*mib},
		{"JSON, Content-Length", infer, nil, func() io.Reader { return &servertest.Zeros{N: huge} }, huge, jsonTooLarge(huge), 4 * mib},
		{"JSON header too large", infer, hdrLen(limit + 1), func() io.Reader { return &servertest.Zeros{N: huge} }, huge, jsonTooLarge(limit + 1), 4 * mib},
		{"gzip inflating to 300 MB", infer, http.Header{"Content-Encoding": {"gzip"}}, func() io.Reader { return gzipStream(huge) }, -1,
			`{"error":"Decompressed data size exceeds the maximum allowed value of 67108864 bytes. Use --http-max-input-size to increase the limit."}`, 2*limit + 8*mib},
		{"generate", base + "/v2/models/id1/generate", nil, func() io.Reader { return &servertest.Zeros{N: huge} }, -1, jsonTooLarge(limit + 1), 2*limit + 8*mib},
		{"generate_stream", base + "/v2/models/id1/generate_stream", nil, func() io.Reader { return &servertest.Zeros{N: huge} }, huge, jsonTooLarge(huge), 4 * mib},
		{"repository load", base + "/v2/repository/models/id1/load", nil, func() io.Reader { return &servertest.Zeros{N: huge} }, -1, jsonTooLarge(limit + 1), 2*limit + 8*mib},
		{"repository index", base + "/v2/repository/index", nil, func() io.Reader { return &servertest.Zeros{N: huge} }, huge, jsonTooLarge(huge), 4 * mib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r servertest.Reply
			n := servertest.Allocated(func() { r = servertest.SendBody(c.url, c.header, c.body(), c.size) })
			if r.Err != nil || r.Status != 400 || r.Body != c.want {
				t.Fatalf("got %d %q (%v), want 400 %s", r.Status, r.Body, r.Err, c.want)
			}
			t.Logf("allocated %.1f MiB", float64(n)/mib)
			if n > c.budget {
				t.Errorf("allocated %.1f MiB, budget %.1f MiB", float64(n)/mib, float64(c.budget)/mib)
			}
		})
	}
	t.Run("four concurrent raw bodies", func(t *testing.T) {
		var wg sync.WaitGroup
		replies := make([]servertest.Reply, 4)
		n := servertest.Allocated(func() {
			for i := range replies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					size := int64(huge)
					if i%2 == 1 {
						size = -1 // half of them chunked
					}
					replies[i] = servertest.SendBody(infer, hdrLen(0), &servertest.Zeros{N: huge}, size)
				}()
			}
			wg.Wait()
		})
		for i, r := range replies {
			if r.Err != nil || r.Status != 400 || !strings.Contains(r.Body, "Raw input has a byte_size") {
				t.Errorf("client %d: %d %q (%v)", i, r.Status, r.Body, r.Err)
			}
		}
		t.Logf("allocated %.1f MiB", float64(n)/mib)
		if budget := uint64(2 * (2*limit + 8*mib)); n > budget {
			t.Errorf("allocated %.1f MiB, budget %.1f MiB", float64(n)/mib, float64(budget)/mib)
		}
	})
	t.Run("server still serves", func(t *testing.T) {
		status, _, rb := post(t, infer, `{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`)
		if status != 200 {
			t.Fatalf("%d %s", status, rb)
		}
	})
}

// TestBodyLimitsBinary: binary blobs are not limited by
// --http-max-input-size, only by what the JSON header announces; bytes
// beyond the announced blobs are read no further than one byte.
func TestBodyLimitsBinary(t *testing.T) {
	const limit = mib
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{MaxInputSize: limit}})
	url := base + "/v2/models/id1/infer"
	const elems = 3 * limit / 4 // a 3 MiB FP32 tensor, three times the limit
	blob := make([]byte, 4*elems)
	for i := range elems {
		binary.LittleEndian.PutUint32(blob[4*i:], math.Float32bits(float32(i)))
	}
	hdr := `{"inputs":[{"name":"INPUT0","shape":[1,` + strconv.Itoa(elems) + `],"datatype":"FP32","parameters":{"binary_data_size":` + strconv.Itoa(len(blob)) + `}}],"parameters":{"binary_data_output":true}}`
	for _, size := range []int64{int64(len(hdr) + len(blob)), -1} {
		t.Run(fmt.Sprintf("blobs beyond the limit work (Content-Length %d)", size), func(t *testing.T) {
			r := servertest.SendBody(url, hdrLen(len(hdr)), io.MultiReader(strings.NewReader(hdr), bytes.NewReader(blob)), size)
			if r.Err != nil || r.Status != 200 {
				t.Fatalf("%d %.300s (%v)", r.Status, r.Body, r.Err)
			}
			if !strings.HasSuffix(r.Body, string(blob)) {
				t.Fatal("output differs from the input")
			}
		})
	}
	t.Run("bytes beyond the announced blobs", func(t *testing.T) {
		var r servertest.Reply
		n := servertest.Allocated(func() {
			body := io.MultiReader(strings.NewReader(hdr), bytes.NewReader(blob), &servertest.Zeros{N: 300 * mib})
			r = servertest.SendBody(url, hdrLen(len(hdr)), body, int64(len(hdr)+len(blob))+300*mib)
		})
		if r.Err != nil || r.Status != 400 || r.Body != `{"error":"unexpected additional input data for model 'id1'"}` {
			t.Fatalf("%d %q (%v)", r.Status, r.Body, r.Err)
		}
		t.Logf("allocated %.1f MiB", float64(n)/mib)
		if budget := uint64(3 * (limit + len(blob))); n > budget {
			t.Errorf("allocated %.1f MiB, budget %.1f MiB", float64(n)/mib, float64(budget)/mib)
		}
	})
	t.Run("blob shorter than announced", func(t *testing.T) {
		r := servertest.SendBody(url, hdrLen(len(hdr)), io.MultiReader(strings.NewReader(hdr), bytes.NewReader(blob[:100])), -1)
		want := `{"error":"unexpected size for input 'INPUT0', expecting ` + strconv.Itoa(len(blob)-100) + ` additional bytes for model 'id1'"}`
		if r.Status != 400 || r.Body != want {
			t.Fatalf("%d %q, want %s", r.Status, r.Body, want)
		}
	})
	t.Run("header length beyond a chunked body", func(t *testing.T) {
		r := servertest.SendBody(url, hdrLen(500), strings.NewReader(hdr[:50]), -1)
		if want := `{"error":"inference header size should be in range (0, 50), got: 500"}`; r.Status != 400 || r.Body != want {
			t.Fatalf("%d %q, want %s", r.Status, r.Body, want)
		}
	})
}

// slowModel loads slowly: its warmup runs an MLP thousands of times.
func slowModel(count int) testModel {
	return testModel{
		config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_warmup [ { name: "w" batch_size: 1 count: ` + strconv.Itoa(count) + ` inputs [ { key: "x" value: { data_type: TYPE_FP32 dims: [ 256 ] random_data: true } } ] } ]
`,
		onnx: onnxbuild.Must(onnxbuild.MLP(256, 256, 4)),
	}
}

// TestLoadOutlivesRequest: a client that disconnects during
// POST .../load does not cancel the load.
func TestLoadOutlivesRequest(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, map[string]testModel{"slow": slowModel(20000)}), serverOpts{mode: core.ModeExplicit})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/repository/models/slow/load", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the load finished in 300 ms (%d): make it slower", resp.StatusCode)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, _, _ := do(t, http.MethodGet, base+"/v2/models/slow/ready", nil, nil)
		if status == 200 {
			break
		}
		_, _, idx := post(t, base+"/v2/repository/index", "")
		if strings.Contains(string(idx), `"state":"UNAVAILABLE"`) || time.Now().After(deadline) {
			t.Fatalf("model not ready after the client left: %s", idx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlowUploadDoesNotHoldModel: the body is read before the model is
// acquired, so an unload does not wait for a client that stalls mid-body.
func TestSlowUploadDoesNotHoldModel(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{mode: core.ModeExplicit, startup: []string{"id1"}})
	pr, pw := io.Pipe()
	replied := make(chan servertest.Reply, 1)
	go func() { replied <- servertest.SendBody(base+"/v2/models/id1/infer", nil, pr, -1) }()
	if _, err := pw.Write([]byte(`{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32",`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server is reading the body
	unloaded := make(chan int, 1)
	go func() {
		status, _, _ := post(t, base+"/v2/repository/models/id1/unload", "")
		unloaded <- status
	}()
	select {
	case status := <-unloaded:
		if status != 200 {
			t.Fatalf("unload: %d", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("unload waits for a stalled upload")
	}
	_, _ = pw.Write([]byte(`"data":[1,2]}]}`))
	pw.Close()
	if r := <-replied; r.Status != 503 && r.Status != 404 {
		t.Fatalf("infer after the unload: %d %s (%v)", r.Status, r.Body, r.Err)
	}
}

// TestIndexBodies: the index body is parsed: malformed or deeply nested
// bodies are errors, as Triton's parse makes them.
func TestIndexBodies(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{mode: core.ModeExplicit, startup: []string{"simple"}})
	deep := func(open, closer string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(closer, n)
	}
	for _, c := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"malformed", `{"ready":true`, 500, "failed to parse the request JSON buffer: Missing a comma or '}' after an object member. at 13"},
		{"garbage", `garbage`, 500, "failed to parse the request JSON buffer: Invalid value. at 0"},
		{"trailing garbage", `{"ready":true}x`, 500, "The document root must not be followed by other values."},
		{"million-deep arrays", deep("[", "]", 1_000_000), 500, "The document is nested deeper than 10000 levels."},
		{"million-deep objects", deep(`{"a":`, "}", 1_000_000), 500, "The document is nested deeper than 10000 levels."},
		{"million-deep unclosed", strings.Repeat("[", 1_000_000), 500, "The document is nested deeper than 10000 levels."},
		{"million-deep ready", `{"ready":` + deep("[", "]", 1_000_000) + `}`, 500, "The document is nested deeper than 10000 levels."},
		{"17 ready not a boolean", `{"ready":"yes"}`, 400, "Invalid value for 'ready': expected a boolean"},
		{"ready", `{"ready":true}`, 200, `[{"name":"simple","version":"1","state":"READY"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, rb := post(t, base+"/v2/repository/index", c.body)
			if status != c.status || !strings.Contains(string(rb), c.msg) || h.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %.200s, want %d %q", status, rb, c.status, c.msg)
			}
		})
	}
	t.Run("million-deep infer data", func(t *testing.T) {
		body := `{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":` + deep("[", "]", 1_000_000) + `}]}`
		status, _, rb := post(t, base+"/v2/models/simple/infer", body)
		if status != 500 || !strings.Contains(string(rb), "nested deeper than 10000 levels") {
			t.Fatalf("%d %.200s", status, rb)
		}
	})
}
