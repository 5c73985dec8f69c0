package httpapi

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func int32Bytes(vals ...int32) []byte {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func seq(n int, f func(i int) int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// binaryRequest frames a JSON header and blobs as the binary extension does.
func binaryRequest(header string, blobs ...[]byte) (http.Header, []byte) {
	body := []byte(header)
	for _, b := range blobs {
		body = append(body, b...)
	}
	h := http.Header{}
	h.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	h.Set("Content-Type", "application/octet-stream")
	return h, body
}

const simpleBinaryHeader = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}]}`

func TestBinaryExtension(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	in0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) })...)
	in1 := int32Bytes(seq(16, func(int) int32 { return 1 })...)
	url := base + "/v2/models/simple/infer"

	t.Run("56 mixed binary and JSON outputs", func(t *testing.T) {
		h, body := binaryRequest(simpleBinaryHeader, in0, in1)
		status, rh, rb := do(t, "POST", url, h, bytes.NewReader(body))
		if status != 200 {
			t.Fatalf("status %d: %s", status, rb)
		}
		if rh.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("Content-Type = %q", rh.Get("Content-Type"))
		}
		jl, err := strconv.Atoi(rh.Get("Inference-Header-Content-Length"))
		must(t, err)
		var hdr struct {
			Outputs []struct {
				Name       string
				Data       []int32
				Parameters map[string]int
			}
		}
		must(t, json.Unmarshal(rb[:jl], &hdr))
		if len(hdr.Outputs) != 2 || hdr.Outputs[0].Name != "OUTPUT0" || hdr.Outputs[0].Parameters["binary_data_size"] != 64 {
			t.Fatalf("header %s", rb[:jl])
		}
		want0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) + 1 })...)
		if !bytes.Equal(rb[jl:], want0) {
			t.Errorf("OUTPUT0 blob = %v, want %v", rb[jl:], want0)
		}
		if hdr.Outputs[1].Parameters != nil || len(hdr.Outputs[1].Data) != 16 || hdr.Outputs[1].Data[3] != 2 {
			t.Errorf("OUTPUT1 = %+v", hdr.Outputs[1])
		}
	})

	t.Run("54 binary_data_output without outputs", func(t *testing.T) {
		hdr := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"parameters":{"binary_data_output":true}}`
		h, body := binaryRequest(hdr, in0, in1)
		status, rh, rb := do(t, "POST", url, h, bytes.NewReader(body))
		jl, _ := strconv.Atoi(rh.Get("Inference-Header-Content-Length"))
		if status != 200 || rh.Get("Content-Type") != "application/octet-stream" || jl <= 0 || len(rb) != jl+128 {
			t.Fatalf("status %d, headers %v, body %d bytes", status, rh, len(rb))
		}
		if n := strings.Count(string(rb[:jl]), `"binary_data_size":64`); n != 2 {
			t.Errorf("want both outputs binary, header %s", rb[:jl])
		}
	})

	errorCases := []struct {
		name       string
		header     http.Header
		body       []byte
		wantStatus int
		wantMsg    string
	}{
		{"57 trailing byte", hdrLen(len(simpleBinaryHeader)), concat([]byte(simpleBinaryHeader), in0, in1, []byte{0}), 400, "unexpected additional input data for model 'simple'"},
		{"58 blob past the body", hdrLen(len(simpleBinaryHeader)), concat([]byte(simpleBinaryHeader), in0, in1[:10]), 400, "unexpected size for input 'INPUT1'"},
		{"59 header length out of int32", hdrValue("99999999999"), concat([]byte(simpleBinaryHeader), in0, in1), 400, "Unable to parse Inference-Header-Content-Length"},
		{"60 header length beyond body", hdrLen(100000), concat([]byte(simpleBinaryHeader), in0, in1), 400, "inference header size should be in range (0, "},
		{"negative header length", hdrValue("-4"), concat([]byte(simpleBinaryHeader), in0, in1), 400, "inference header size should be in range"},
		{"header length not a number", hdrValue("abc"), concat([]byte(simpleBinaryHeader), in0, in1), 400, "Unable to parse Inference-Header-Content-Length, got: abc"},
		{"62 raw request to a two-input model", hdrLen(0), in0, 400, "Raw request must only have 1 input"},
		{"64 unsupported compression", http.Header{"Content-Encoding": {"br"}}, []byte("{}"), 501, "Unsupported compression type"},
		{"empty gzip body", http.Header{"Content-Encoding": {"gzip"}}, nil, 400, "nothing to be decompressed"},
		{"corrupt gzip body", http.Header{"Content-Encoding": {"gzip"}}, []byte{0x1f, 0x8b, 1, 2, 3}, 400, "failed to decompress"},
	}
	for _, c := range errorCases {
		t.Run(c.name, func(t *testing.T) {
			status, rh, rb := do(t, "POST", url, c.header, bytes.NewReader(c.body))
			if status != c.wantStatus || !strings.Contains(string(rb), c.wantMsg) {
				t.Fatalf("got %d %s, want %d containing %q", status, rb, c.wantStatus, c.wantMsg)
			}
			if c.wantStatus == 501 && rh.Get("Accept-Encoding") != "gzip, deflate" {
				t.Errorf("Accept-Encoding = %q", rh.Get("Accept-Encoding"))
			}
			// The server stays live after every bad request.
			if s, _, _ := do(t, "GET", base+"/v2/health/live", nil, nil); s != 200 {
				t.Fatalf("server not live after %s", c.name)
			}
		})
	}

	t.Run("61 raw request to id1", func(t *testing.T) {
		raw := make([]byte, 0, 32)
		for i := range 8 {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(i)*1.5))
		}
		status, rh, rb := do(t, "POST", base+"/v2/models/id1/infer", hdrLen(0), bytes.NewReader(raw))
		jl, _ := strconv.Atoi(rh.Get("Inference-Header-Content-Length"))
		if status != 200 || jl <= 0 || !bytes.Equal(rb[jl:], raw) {
			t.Fatalf("status %d, body %q", status, rb)
		}
		if !strings.Contains(string(rb[:jl]), `"shape":[1,8]`) {
			t.Errorf("header %s", rb[:jl])
		}
	})
}

func TestCompression(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	url := base + "/v2/models/simple/infer"
	body := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	_, _, plain := post(t, url, body)

	t.Run("63 gzip and deflate requests", func(t *testing.T) {
		for enc, data := range map[string][]byte{"gzip": gzipBytes([]byte(body)), "deflate": zlibBytes([]byte(body))} {
			status, _, rb := do(t, "POST", url, http.Header{"Content-Encoding": {enc}}, bytes.NewReader(data))
			if status != 200 || !bytes.Equal(rb, plain) {
				t.Errorf("%s: %d %s", enc, status, rb)
			}
		}
	})
	for _, c := range []struct{ accept, want string }{
		{"gzip", "gzip"}, {"deflate, gzip", "deflate"}, {"gzip;q=0.5, deflate", "deflate"},
		{"gzip, deflate, br, zstd", "gzip"}, {"*", ""}, {"br", ""},
	} {
		t.Run("65-66 Accept-Encoding "+c.accept, func(t *testing.T) {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Accept-Encoding", c.accept)
			// A bare transport, so Go does not add or undo gzip itself.
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			must(t, err)
			defer resp.Body.Close()
			rb, _ := io.ReadAll(resp.Body)
			if got := resp.Header.Get("Content-Encoding"); got != c.want {
				t.Fatalf("Content-Encoding = %q, want %q", got, c.want)
			}
			var r io.Reader = bytes.NewReader(rb)
			switch c.want {
			case "gzip":
				r, err = gzip.NewReader(r)
			case "deflate":
				r, err = zlib.NewReader(r)
			}
			must(t, err)
			got, err := io.ReadAll(r)
			must(t, err)
			if !bytes.Equal(got, plain) {
				t.Errorf("decoded body %s, want %s", got, plain)
			}
		})
	}
}

func TestMaxInputSize(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{MaxInputSize: 1000}})
	url := base + "/v2/models/simple/infer"
	valid := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	pad := func(n int) string {
		return valid[:len(valid)-1] + `,"pad":"` + strings.Repeat("x", n-len(valid)-9) + `"}`
	}
	t.Run("70 exactly the limit is accepted", func(t *testing.T) {
		body := pad(1000)
		if len(body) != 1000 {
			t.Fatalf("body is %d bytes", len(body))
		}
		if status, _, rb := post(t, url, body); status != 200 {
			t.Fatalf("%d %s", status, rb)
		}
	})
	t.Run("70 one byte over is refused", func(t *testing.T) {
		status, _, rb := post(t, url, pad(1001))
		want := `{"error":"request JSON size of 1001 bytes exceeds the maximum allowed input size of 1000 bytes. Use --http-max-input-size to increase the limit."}`
		if status != 400 || string(rb) != want {
			t.Fatalf("%d %s", status, rb)
		}
	})
	t.Run("71 gzip inflating past the limit", func(t *testing.T) {
		status, _, rb := do(t, "POST", url, http.Header{"Content-Encoding": {"gzip"}}, bytes.NewReader(gzipBytes([]byte(pad(5000)))))
		if status != 400 || !strings.Contains(string(rb), "Decompressed data size exceeds the maximum allowed value of 1000 bytes") {
			t.Fatalf("%d %s", status, rb)
		}
	})
	t.Run("binary blobs are not limited", func(t *testing.T) {
		hdr := `{"inputs":[{"name":"INPUT0","shape":[1,400],"datatype":"FP32","parameters":{"binary_data_size":1600}}]}`
		h, body := binaryRequest(hdr, make([]byte, 1600))
		if status, _, rb := do(t, "POST", base+"/v2/models/id1/infer", h, bytes.NewReader(body)); status != 200 {
			t.Fatalf("%d %s", status, rb)
		}
	})
}

func TestRestrictedAPI(t *testing.T) {
	restricted := map[string]Restriction{}
	must(t, ParseRestriction(restricted, "inference:infer-key=infer-value"))
	must(t, ParseRestriction(restricted, "model-repository:admin=yes"))
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{Restricted: restricted}})
	body := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	url := base + "/v2/models/simple/infer"
	cases := []struct {
		name   string
		method string
		url    string
		header http.Header
		status int
		body   string
	}{
		{"73 no header", "POST", url, nil, 403, `{"error":"This API is restricted, expecting header 'infer-key'"}`},
		{"73 header name case-insensitive", "POST", url, http.Header{"INFER-KEY": {"infer-value"}}, 200, ""},
		{"73 value is case-sensitive", "POST", url, http.Header{"Infer-Key": {"Infer-Value"}}, 403, ""},
		{"restriction before method check", "GET", url, nil, 403, ""},
		{"74 other categories unaffected", "GET", base + "/v2/models/simple/stats", nil, 200, ""},
		{"repository restricted", "POST", base + "/v2/repository/index", nil, 403, `{"error":"This API is restricted, expecting header 'admin'"}`},
		{"unknown routes stay 404", "GET", base + "/v2/nothing", nil, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, rb := do(t, c.method, c.url, c.header, strings.NewReader(body))
			if status != c.status || (c.body != "" && string(rb) != c.body) {
				t.Fatalf("got %d %s, want %d %s", status, rb, c.status, c.body)
			}
		})
	}
	for _, bad := range []string{"nope:k=v", "inference:k=v", "health", "health:k"} {
		if err := ParseRestriction(restricted, bad); err == nil {
			t.Errorf("ParseRestriction(%q) succeeded", bad)
		}
	}
}

func hdrLen(n int) http.Header { return hdrValue(strconv.Itoa(n)) }
func hdrValue(v string) http.Header {
	return http.Header{"Inference-Header-Content-Length": {v}}
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func zlibBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}
