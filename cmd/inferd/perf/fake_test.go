package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a minimal v2 server for an INT32 "add" model with inputs
// INPUT0/INPUT1 of dims [4] and max_batch_size 4. It decodes every infer
// request (JSON or binary) so tests can check what the tool sent, and its
// statistics charge fixed times per request so the split is exact.
type fakeServer struct {
	inferStatus int  // non-200 makes every infer fail with {"error":"boom"}
	noConfig    bool // a plain KServe server: no config extension
	noStats     bool // ... and no statistics extension
	// delay, when set, is how long the n-th infer request (from 0) takes;
	// with serial, one request at a time.
	delay  func(n int64) time.Duration
	serial bool
	run    sync.Mutex // held through a request's delay when serial

	mu       sync.Mutex
	paths    map[string]bool
	received []fakeRequest
	success  int64
	items    int64       // inference_count: batch elements
	served   int64       // infer requests begun
	header   http.Header // the last infer request's
}

type fakeRequest struct {
	shapes map[string][]int64
	data   map[string][]byte // INT32 little-endian, whichever encoding was used
	binary bool
}

func (f *fakeServer) start(t *testing.T) string {
	t.Helper()
	f.paths = map[string]bool{}
	hs := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(hs.Close)
	return hs.URL
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths[r.Method+" "+r.URL.Path] = true
	f.mu.Unlock()
	p := r.URL.Path
	p = strings.Replace(p, "/versions/2", "", 1)
	switch {
	case p == "/v2/models/add" && r.Method == http.MethodGet:
		io.WriteString(w, `{"name":"add","versions":["2"],"platform":"fake","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,4]},{"name":"INPUT1","datatype":"INT32","shape":[-1,4]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,4]}]}`)
	case p == "/v2/models/add/config" && !f.noConfig:
		io.WriteString(w, `{"name":"add","max_batch_size":4,"input":[]}`)
	case p == "/v2/models/add/stats" && !f.noStats:
		f.mu.Lock()
		s, n := f.success, f.items
		f.mu.Unlock()
		// 64-bit counts as strings on purpose: the tool takes both forms.
		fmt.Fprintf(w, `{"model_stats":[{"name":"add","version":"2","inference_count":"%d","execution_count":%d,"inference_stats":{"success":{"count":%d,"ns":0},"queue":{"count":%d,"ns":%d},"compute_input":{"count":%d,"ns":%d},"compute_infer":{"count":%d,"ns":%d},"compute_output":{"count":%d,"ns":%d}}}]}`,
			n, s, s, s, s*1000, s, s*2000, s, s*3000, s, s*4000)
	case p == "/v2/models/add/infer" && r.Method == http.MethodPost:
		f.infer(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"Request for unknown model: 'x' is not found"}`)
	}
}

func (f *fakeServer) infer(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.header = r.Header.Clone()
	f.mu.Unlock()
	if f.delay != nil {
		f.mu.Lock()
		n := f.served
		f.served++
		f.mu.Unlock()
		if f.serial {
			f.run.Lock()
			defer f.run.Unlock()
		}
		time.Sleep(f.delay(n))
	}
	if f.inferStatus != 0 && f.inferStatus != 200 {
		w.WriteHeader(f.inferStatus)
		io.WriteString(w, `{"error":"boom"}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	head := body
	hl := r.Header.Get("Inference-Header-Content-Length")
	if hl != "" {
		n, err := strconv.Atoi(hl)
		if err != nil || n > len(body) {
			http.Error(w, `{"error":"bad header length"}`, 400)
			return
		}
		head = body[:n]
		body = body[n:]
	}
	var req struct {
		Inputs []struct {
			Name       string         `json:"name"`
			Shape      []int64        `json:"shape"`
			Datatype   string         `json:"datatype"`
			Data       []int32        `json:"data"`
			Parameters map[string]int `json:"parameters"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(head, &req); err != nil {
		http.Error(w, `{"error":"`+err.Error()+`"}`, 500)
		return
	}
	got := fakeRequest{shapes: map[string][]int64{}, data: map[string][]byte{}, binary: hl != ""}
	var batch int64
	for _, in := range req.Inputs {
		got.shapes[in.Name] = in.Shape
		batch = in.Shape[0]
		if size, ok := in.Parameters["binary_data_size"]; ok {
			if size > len(body) {
				http.Error(w, `{"error":"short body"}`, 400)
				return
			}
			got.data[in.Name], body = body[:size], body[size:]
			continue
		}
		var raw []byte
		for _, v := range in.Data {
			raw = binary.LittleEndian.AppendUint32(raw, uint32(v))
		}
		got.data[in.Name] = raw
	}
	f.mu.Lock()
	f.received = append(f.received, got)
	f.success++
	f.items += batch
	f.mu.Unlock()
	io.WriteString(w, `{"model_name":"add","model_version":"2","outputs":[]}`)
}

func int32s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func TestFakeServerDataAndSplit(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "d.json")
	must(t, os.WriteFile(data, []byte(`{"data":[
		{"INPUT0":[1,2,3,4],"INPUT1":{"content":[10,20,30,40],"shape":[4]}},
		{"INPUT0":[5,6,7,8],"INPUT1":[50,60,70,80]}]}`), 0o644))
	step := [2]map[string][]byte{
		{"INPUT0": int32s(1, 2, 3, 4), "INPUT1": int32s(10, 20, 30, 40)},
		{"INPUT0": int32s(5, 6, 7, 8), "INPUT1": int32s(50, 60, 70, 80)},
	}
	for _, tensors := range []string{"binary", "json"} {
		t.Run(tensors, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{}
			url := f.start(t)
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-x", "2", "-u", url, "-b", "2", "--input-data", data,
				"--binary=" + strconv.FormatBool(tensors == "binary"), "--json", jsonPath, "--concurrency-range", "2"}, fast...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, p := range []string{"GET /v2/models/add/versions/2", "GET /v2/models/add/versions/2/config", "GET /v2/models/add/versions/2/stats", "POST /v2/models/add/versions/2/infer"} {
				if !f.paths[p] {
					t.Errorf("-x 2: no %s in %v", p, f.paths)
				}
			}
			if len(f.received) < 10 {
				t.Fatalf("only %d requests", len(f.received))
			}
			// With -b 2 and two steps, request k carries steps k, k+1
			// (wrapping): [0,1] or [1,0].
			seen := map[bool]bool{}
			for _, r := range f.received {
				if r.binary != (tensors == "binary") {
					t.Fatalf("binary %v in %s mode", r.binary, tensors)
				}
				first := bytes.Equal(r.data["INPUT0"][:16], step[0]["INPUT0"])
				seen[first] = true
				a, b := step[0], step[1]
				if !first {
					a, b = b, a
				}
				for _, in := range []string{"INPUT0", "INPUT1"} {
					if want := append(append([]byte{}, a[in]...), b[in]...); !bytes.Equal(r.data[in], want) {
						t.Fatalf("%s: got %x, want %x", in, r.data[in], want)
					}
					if s := r.shapes[in]; len(s) != 2 || s[0] != 2 || s[1] != 4 {
						t.Fatalf("%s: shape %v", in, s)
					}
				}
			}
			if !seen[true] || !seen[false] {
				t.Errorf("requests did not cycle through the steps: %v", seen)
			}
			rep, _ := readReport(t, jsonPath)
			s := rep.Results[0].Server
			if s == nil || s.QueueUS != 1 || s.ComputeInput != 2 || s.ComputeInfer != 3 || s.ComputeOutput != 4 || s.AvgBatchSize != 2 {
				t.Errorf("server split %+v, want 1/2/3/4 µs and batch 2", s)
			}
		})
	}
}

func TestFakeServerFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		inferStatus int
		model       string
		want        string
	}{
		{"every request fails", 500, "add", "concurrency 1: every request failed: HTTP 500: boom"},
		{"server rejects the request", 400, "add", "the server rejects the request: HTTP 400: boom"},
		{"unknown model", 0, "other", `model "other": HTTP 404: Request for unknown model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{inferStatus: tc.inferStatus}
			url := f.start(t)
			start := time.Now()
			code, _, stderr := runPerf(t, append([]string{"-m", tc.model, "-u", url}, fast...)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 1 || !strings.HasPrefix(lines[len(lines)-1], "inferd perf: "+tc.want) {
				t.Errorf("exit %d, stderr %q; want 1, %q", code, stderr, tc.want)
			}
			// An all-failing run stops at the first window.
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
}

func TestFakeServerWithoutExtensions(t *testing.T) {
	t.Parallel()
	// A plain KServe v2 server has neither config nor statistics: the
	// model is taken as non-batching and the server columns stay empty.
	f := &fakeServer{noConfig: true, noStats: true}
	url := f.start(t)
	csvPath := filepath.Join(t.TempDir(), "r.csv")
	// Without a config the metadata shape [-1,4] is taken as it is, the
	// -1 being a variable dim that --shape must fill.
	code, _, stderr := runPerf(t, append([]string{"-m", "add", "-u", url}, fast...)...)
	if code != 2 || !strings.Contains(stderr, "input INPUT0 has variable dims [-1,4]") {
		t.Errorf("no --shape: exit %d %q", code, stderr)
	}
	code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-u", url, "-f", csvPath, "--shape", "INPUT0:3,4", "--shape", "INPUT1:3,4"}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"no model config endpoint", "no server-side split"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// perf_analyzer's client block, but no server block.
	if !strings.Contains(stdout, "    Throughput: ") || strings.Contains(stdout, "Server:") {
		t.Errorf("stdout:\n%s", stdout)
	}
	rows := readCSV(t, csvPath)
	if len(rows) != 1 || rows[0]["Server Queue"] != "" || num(t, rows[0]["Inferences/Second"]) <= 0 {
		t.Errorf("rows %v", rows)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.received[0].shapes["INPUT0"]; len(s) != 2 || s[0] != 3 || s[1] != 4 {
		t.Errorf("shape %v", s)
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	url := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	code := Main(ctx, append([]string{"-m", "add", "-u", url, "--concurrency-range", "1:50", "--json", jsonPath}, fast...), &out, &errb)
	if code != 1 || !strings.HasSuffix(strings.TrimSpace(errb.String()), "inferd perf: interrupted") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	rep, _ := readReport(t, jsonPath)
	if len(rep.Results) == 0 || len(rep.Results) >= 50 {
		t.Errorf("%d results after an interrupt", len(rep.Results))
	}
}

// BenchmarkSend measures the client's cost per request. The server is a
// canned HTTP/1.1 responder that allocates nothing per request, so the
// allocations reported are the client's.
func BenchmarkSend(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go cannedResponder(c)
		}
	}()
	in := []tensorMeta{{Name: "INPUT0", Datatype: "INT32"}}
	body, err := encodeRequest(in, []tensorData{{raw: int32s(1, 2, 3, 4), shape: []int64{1, 4}}}, in, true)
	if err != nil {
		b.Fatal(err)
	}
	p, err := newHTTPProtocol(&options{baseURL: "http://" + ln.Addr().String(), model: "add"}, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer p.shutdown()
	p.bodies = []reqBody{body}
	s := &sender{proto: p, n: 1, rec: newRecorder()}
	log := s.rec.newLog()
	c := p.conn()
	ctx := context.Background()
	s.send(ctx, c, log, -1) // connect outside the measurement
	b.ReportAllocs()
	for b.Loop() {
		s.send(ctx, c, log, -1)
		if len(log.recs) >= 1024 {
			log.recs = log.recs[:0]
		}
	}
	if log.lastErr != "" {
		b.Fatal(log.lastErr)
	}
}

// cannedResponder answers every request on c with a fixed 200.
func cannedResponder(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	for {
		length := 0
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		if _, err := r.Discard(length); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func TestSweepStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		delay  func(n int64) time.Duration
		args   []string
		code   int
		stderr []string
		stdout []string // present; with the summary absent
	}{
		// perf_analyzer ends the sweep at the first setting over
		// --latency-threshold and reports no figures for it.
		{"over the latency limit", func(int64) time.Duration { return 3 * time.Millisecond }, []string{"-s", "100000", "-l", "1"}, 0,
			[]string{"Measured latency went over the set limit of 1 msec. "}, []string{"Request concurrency: 1\n"}},
		// ... and at the first that does not settle, which is an error
		// when it is the first.
		{"unstable", func(n int64) time.Duration { return time.Duration(n) * 20 * time.Microsecond }, []string{"-s", "1"}, 1,
			[]string{"Failed to obtain stable measurement within 3 measurement windows for concurrency 1. Please try to increase the --measurement-interval.",
				"inferd perf: Failed to obtain stable measurement."}, []string{"Request concurrency: 1\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{delay: tc.delay}
			url := f.start(t)
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			csvPath := filepath.Join(t.TempDir(), "r.csv")
			code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-u", url, "--concurrency-range", "1:3", "-p", "100", "--max-trials", "3",
				"--json", jsonPath, "-f", csvPath}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			if strings.Contains(stdout, "Request concurrency: 2") || strings.Contains(stdout, "Client:") || strings.Contains(stdout, "Inferences/Second vs.") {
				t.Errorf("the sweep went on or reported the setting:\n%s", stdout)
			}
			// The JSON report keeps the setting, marked; the CSV has only
			// its header.
			rep, b := readReport(t, jsonPath)
			if len(rep.Results) != 1 || rep.Results[0].Stable == (tc.code != 0) || rep.Results[0].OverLatencyThreshold == (tc.code != 0) {
				t.Errorf("JSON %s", b)
			}
			if rows := readCSV(t, csvPath); len(rows) != 0 {
				t.Errorf("CSV rows %v", rows)
			}
		})
	}
}

func TestRequestCount(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	url := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	// -s 1 would never settle: a counted run is one window, taken as it is.
	code, stdout, stderr := runPerf(t, "-m", "add", "-u", url, "--concurrency-range", "2", "--request-count", "30",
		"--warmup-request-count", "10", "-s", "1", "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, line := range []string{"  Sending 10 warmup requests\n", "  Sending 30 benchmark requests\n", "Concurrency: 2, throughput: "} {
		if !strings.Contains(stdout, line) {
			t.Errorf("no %q in\n%s", line, stdout)
		}
	}
	rep, b := readReport(t, jsonPath)
	if len(rep.Results) != 1 || rep.Results[0].Windows != 1 || !rep.Results[0].Stable || rep.Results[0].Requests < 30 || rep.Results[0].Requests > 30+2 {
		t.Fatalf("%s", b)
	}
	// The request before measuring, the warm-up and the counted ones.
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.received); n < 1+10+30 {
		t.Errorf("the server got %d requests", n)
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	url := f.start(t)
	code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-u", url, "-H", "X-Tenant: blue", "-H", "Authorization:Bearer a:b"}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.header.Get("X-Tenant") != "blue" || f.header.Get("Authorization") != "Bearer a:b" || f.header.Get("Inference-Header-Content-Length") == "" {
		t.Errorf("infer request headers %v", f.header)
	}
}

func TestBinarySearch(t *testing.T) {
	t.Parallel()
	// One request at a time, 10 ms each: concurrency c waits about 10·c ms.
	f := &fakeServer{serial: true, delay: func(int64) time.Duration { return 10 * time.Millisecond }}
	url := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-u", url, "--concurrency-range", "1:16", "--binary-search", "-l", "25",
		"--json", jsonPath}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// perf_analyzer's search: both ends, then halves of what is left
	// until the step: 1 meets the limit, 16, 8 and 4 do not, 2 does, 3
	// does not.
	var tried []string
	for _, line := range strings.Split(stdout, "\n") {
		if c, ok := strings.CutPrefix(line, "Request concurrency: "); ok {
			tried = append(tried, c)
		}
	}
	if strings.Join(tried, ",") != "1,16,8,4,2,3" {
		t.Errorf("tried %v\n%s", tried, stdout)
	}
	if !strings.Contains(stdout, "  Using Binary Search algorithm\n") ||
		!strings.Contains(stdout, "Concurrency: 1, throughput: ") || !strings.Contains(stdout, "Concurrency: 2, throughput: ") ||
		strings.Contains(stdout, "Concurrency: 3, throughput: ") {
		t.Errorf("stdout:\n%s", stdout)
	}
	rep, _ := readReport(t, jsonPath)
	if len(rep.Results) != 6 {
		t.Errorf("%d results", len(rep.Results))
	}
}
