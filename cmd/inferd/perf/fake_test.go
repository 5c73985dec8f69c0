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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a minimal v2 server for an INT32 "add" model with inputs
// INPUT0/INPUT1 of dims [4] and max_batch_size 4. It decodes every infer
// request (JSON or binary) so tests can check what the tool sent, and its
// statistics charge fixed times per request so the split is exact. How
// long an infer request takes is the test's to set (delay, windowDelay or
// capacity), so that what the tool measures differs from setting to
// setting, or window to window, by far more than a busy machine adds.
type fakeServer struct {
	inferStatus int  // non-200 makes every infer fail with {"error":"boom"}
	noConfig    bool // a plain KServe server: no config extension
	noStats     bool // ... and no statistics extension
	// delay, when set, is how long the n-th infer request (from 0) takes.
	delay func(n int64) time.Duration
	// windowDelay, when set, is how long an infer request takes by the
	// statistics requests made before it came: the tool asks for the
	// statistics as its first measurement window begins and as each
	// ends, so window w (from 1) is the time after the w-th.
	windowDelay func(window int) time.Duration
	// capacity, when set, makes a server that saturates beyond that many
	// requests in flight: each request is held for hold, and penalty
	// more if more than capacity were in flight at any moment of it.
	capacity      int
	hold, penalty time.Duration

	mu         sync.Mutex
	paths      map[string]bool
	received   []fakeRequest
	success    int64
	items      int64       // inference_count: batch elements
	served     int64       // infer requests begun
	header     http.Header // the last infer request's
	statsCalls int         // statistics requests answered
	inflight   []*heldRequest
}

// heldRequest is an infer request a capacity server holds: the most
// requests in flight at once while it was.
type heldRequest struct{ peak int }

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
		f.statsCalls++
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
	f.wait()
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

// wait holds an infer request as long as the test said.
func (f *fakeServer) wait() {
	switch {
	case f.delay != nil:
		f.mu.Lock()
		n := f.served
		f.served++
		f.mu.Unlock()
		time.Sleep(f.delay(n))
	case f.windowDelay != nil:
		f.mu.Lock()
		w := f.statsCalls
		f.mu.Unlock()
		time.Sleep(f.windowDelay(w))
	case f.capacity > 0:
		r := f.admit()
		time.Sleep(f.hold)
		f.mu.Lock()
		over := r.peak > f.capacity
		f.mu.Unlock()
		if over {
			time.Sleep(f.penalty)
		}
		f.leave(r)
	}
}

// admit counts a request in flight, and raises the peak of every request
// in flight to the number now.
func (f *fakeServer) admit() *heldRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &heldRequest{}
	f.inflight = append(f.inflight, r)
	for _, q := range f.inflight {
		q.peak = max(q.peak, len(f.inflight))
	}
	return r
}

// leave counts a request out of flight.
func (f *fakeServer) leave(r *heldRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight = slices.DeleteFunc(f.inflight, func(q *heldRequest) bool { return q == r })
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

// TestFakeServerFailures: a run whose requests all fail stops at the end
// of its first window, and one the server refuses, or whose model it does
// not know, before measuring at all. The tool asks for the statistics as
// the first window begins and as each ends, so the windows measured are
// counted by those requests, not timed.
func TestFakeServerFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		inferStatus int
		model       string
		want        string
		statsCalls  int
	}{
		{"every request fails", 500, "add", "concurrency 1: every request failed: HTTP 500: boom", 2},
		{"server rejects the request", 400, "add", "the server rejects the request: HTTP 400: boom", 0},
		{"unknown model", 0, "other", `model "other": HTTP 404: Request for unknown model`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{inferStatus: tc.inferStatus}
			url := f.start(t)
			code, _, stderr := runPerf(t, append([]string{"-m", tc.model, "-u", url, "--concurrency-range", "1:3"}, fast...)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 1 || !strings.HasPrefix(lines[len(lines)-1], "inferd perf: "+tc.want) {
				t.Errorf("exit %d, stderr %q; want 1, %q", code, stderr, tc.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.statsCalls != tc.statsCalls {
				t.Errorf("%d statistics requests, want %d (%d windows measured)", f.statsCalls, tc.statsCalls, max(tc.statsCalls-1, 0))
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

// TestInterrupt: a sweep interrupted (Ctrl-C) while it measures its
// second setting stops there and still writes what it measured. The test
// interrupts it when the progress shows the second setting's first
// window, whatever the time.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	url := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errb := &cancelOn{needle: "concurrency 2: window 1/", cancel: cancel}
	var out bytes.Buffer
	code := Main(ctx, append([]string{"-m", "add", "-u", url, "--concurrency-range", "1:50", "--json", jsonPath}, fast...), &out, errb)
	errb.mu.Lock()
	stderr := errb.buf.String()
	errb.mu.Unlock()
	if code != 1 || !strings.HasSuffix(strings.TrimSpace(stderr), "inferd perf: interrupted") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	rep, b := readReport(t, jsonPath)
	if len(rep.Results) != 1 || rep.Results[0].Concurrency != 1 {
		t.Errorf("results after an interrupt during concurrency 2: %s", b)
	}
	if strings.Contains(stderr, "concurrency 3:") {
		t.Errorf("the sweep went on after the interrupt:\n%s", stderr)
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
		// Windows alternate between 5 and 40 ms a request: each window's
		// throughput and latency differ from the last's eightfold, far
		// outside a 25% band.
		{"unstable", nil, []string{"-s", "25"}, 1,
			[]string{"Failed to obtain stable measurement within 3 measurement windows for concurrency 1. Please try to increase the --measurement-interval.",
				"inferd perf: Failed to obtain stable measurement."}, []string{"Request concurrency: 1\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{delay: tc.delay}
			if tc.delay == nil {
				f.windowDelay = alternating(5*time.Millisecond, 40*time.Millisecond)
			}
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

// alternating is a windowDelay of a and b in turn, window after window.
func alternating(a, b time.Duration) func(int) time.Duration {
	return func(w int) time.Duration {
		if w%2 == 1 {
			return a
		}
		return b
	}
}

// TestBinarySearch: perf_analyzer's search over concurrency 1 to 16 with a
// 40 ms latency limit, against a server that saturates beyond two
// requests at once: up to two, a request takes 2 ms; with a third in
// flight, 122 ms. Each side of the limit is three times or more away from
// it, so a busy machine cannot move a setting across.
func TestBinarySearch(t *testing.T) {
	t.Parallel()
	f := &fakeServer{capacity: 2, hold: 2 * time.Millisecond, penalty: 120 * time.Millisecond}
	url := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	// The band is wide: this is the search, not the stability rule, and
	// 2 ms requests vary by more than a realistic band on a busy machine.
	code, stdout, stderr := runPerf(t, "-m", "add", "-u", url, "--concurrency-range", "1:16", "--binary-search", "-l", "40",
		"--json", jsonPath, "-p", "200", "-s", "100000", "--max-trials", "6")
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
	// 16, 8, 4 and 3 missed the limit by their latency, not by failing to
	// settle.
	if n := strings.Count(stdout+stderr, "Measured latency went over the set limit of 40 msec."); n != 4 {
		t.Errorf("%d settings over the limit, want 4:\n%s\n%s", n, stdout, stderr)
	}
	rep, _ := readReport(t, jsonPath)
	if len(rep.Results) != 6 {
		t.Errorf("%d results", len(rep.Results))
	}
}

// TestStability checks perf_analyzer's stability rule end to end with
// -s 25, a band a real run might use: over the last three windows the
// largest throughput and the largest latency are within 25% of the
// smallest. The fake server's latency is set per window. The steady one
// is 100 ms a request, with eight in flight and windows of 1 s (80
// requests): a busy machine adds a few ms to a request (4% here, under
// -race with the load average over 12; a machine four times slower stays
// inside the band), while the unsteady settings differ from window to
// window several times over. A rule that passed anything, or checked
// throughput only, or never passed, fails here.
func TestStability(t *testing.T) {
	t.Parallel()
	const steady = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		delay  func(int) time.Duration
		args   []string
		code   int
		stable bool
		want   string // in stderr
	}{
		{"steady latency settles", func(int) time.Duration { return steady },
			[]string{"--concurrency-range", "8", "-p", "1000", "--max-trials", "6"}, 0, true, "concurrency 8: window "},
		{"throughput and latency swing", alternating(10*time.Millisecond, 60*time.Millisecond),
			[]string{"--concurrency-range", "4", "--max-trials", "4"}, 1, false,
			"Failed to obtain stable measurement within 4 measurement windows for concurrency 4."},
		// At a fixed request rate the throughput holds while the latency
		// swings eightfold: not stable...
		{"latency swings at a steady rate", alternating(5*time.Millisecond, 40*time.Millisecond),
			[]string{"--request-rate-range", "40", "-p", "1000", "--max-trials", "4"}, 1, false,
			"request rate 40: Failed to obtain stable measurement."},
		// ... unless --async, where perf_analyzer takes a setting whose
		// throughput settled, and says the latency did not. The band is
		// 50% here: the tool sends on a schedule, and a busy machine that
		// stalls it for a quarter second moves a quarter of a window's
		// requests into the next.
		{"async takes the steady throughput", alternating(5*time.Millisecond, 40*time.Millisecond),
			[]string{"--request-rate-range", "40", "-p", "1000", "--max-trials", "4", "--async", "-s", "50"}, 0, true,
			"request rate 40: Request latency is not stabilizing. Please try lowering the request rate."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{windowDelay: tc.delay}
			url := f.start(t)
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runPerf(t, append([]string{"-m", "add", "-u", url, "-p", "500", "-s", "25", "--json", jsonPath}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d and %q in stderr\n%s\n%s", code, tc.code, tc.want, stdout, stderr)
			}
			rep, b := readReport(t, jsonPath)
			if len(rep.Results) != 1 || rep.Results[0].Stable != tc.stable || rep.Results[0].Windows < 3 {
				t.Fatalf("want one result, stable %v, of 3 windows or more: %s", tc.stable, b)
			}
			t.Logf("%d windows:\n%s", rep.Results[0].Windows, stderr)
			if r := rep.Results[0]; tc.name == "steady latency settles" && r.Avg < float64(steady.Microseconds()) {
				t.Errorf("average latency %v µs below the server's %v", r.Avg, steady)
			}
		})
	}
}
