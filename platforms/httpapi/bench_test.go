package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// BenchmarkSimple measures, in one run, what the server costs for a model
// whose run is negligible: Triton's `simple` (AddSub INT32 [1,16], two CPU
// instances) over HTTP with JSON tensors and with the binary extension,
// against a bare net/http handler that decodes the same JSON body with
// encoding/json and writes a fixed reply (the floor of any Go HTTP server),
// and against the same model run in-process through the ONNX Runtime backend
// (one instance per worker, no HTTP). Concurrency 1 and 16; the "ratio"
// sub-benchmark reports the p50 latency and throughput ratios
// (BENCHMARKS.md, figure 3):
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkSimple -benchtime 2s
func BenchmarkSimple(b *testing.B) {
	models := standardModels(b)
	m := models["simple"]
	m.config = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`
	root := writeRepo(b, map[string]testModel{"simple": m})
	base, _ := startServer(b, root, serverOpts{})
	url := base + "/v2/models/simple/infer"
	in0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) })...)
	in1 := int32Bytes(seq(16, func(int) int32 { return 1 })...)
	body := []byte(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`)
	status, _, reply := post(b, url, string(body))
	if status != 200 {
		b.Fatalf("status %d: %s", status, reply)
	}
	bare := startBareServer(b, reply) // answers with inferd's own reply
	callers := []struct {
		name string
		call func() error
	}{
		{"bare-http", inferCaller(bare, body)},
		{"http-json", inferCaller(url, body)},
		{"http-binary", binaryCaller(url, simpleAllBinaryHeader, in0, in1)},
	}

	// In-process: the same backend, one instance per worker, no HTTP.
	cfg, err := modelconfig.Parse([]byte(m.config))
	must(b, err)
	must(b, modelconfig.Normalize(cfg, "simple", true))
	lib, err := onnxrt.FindLibrary("")
	must(b, err)
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib})
	must(b, err)
	defer backend.Close()
	newInst := func() core.Instance {
		inst, err := backend.NewInstance(context.Background(), core.InstanceSpec{
			VersionFiles: core.VersionFiles{ModelName: "simple", Version: 1, ModelDir: root + "/simple", VersionDir: root + "/simple/1"},
			Name:         "simple_0", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
		})
		must(b, err)
		return inst
	}

	rs := results{}
	for _, conc := range []int{1, 16} {
		c := "/c" + strconv.Itoa(conc)
		for _, cl := range callers {
			rs.run(b, cl.name+c, conc, 1, cl.call)
		}
		insts := make(chan core.Instance, conc)
		for range min(conc, 2) {
			insts <- newInst()
		}
		ortCall := func() error {
			inst := <-insts
			defer func() { insts <- inst }()
			batch := &core.Batch{
				Inputs: []*core.Tensor{
					{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in0},
					{Name: "INPUT1", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in1},
				},
				Outputs: []string{"OUTPUT0", "OUTPUT1"},
			}
			return inst.Execute(context.Background(), batch)
		}
		rs.run(b, "in-process-ort"+c, conc, 1, ortCall)
		close(insts)
		for inst := range insts {
			_ = inst.Close()
		}
	}
	rs.report(b,
		ratio{"json/bare-p50-c1", "http-json/c1", "bare-http/c1", p50Of},
		ratio{"binary/bare-p50-c1", "http-binary/c1", "bare-http/c1", p50Of},
		ratio{"json/bare-thru-c16", "http-json/c16", "bare-http/c16", inferOf},
		ratio{"binary/bare-thru-c16", "http-binary/c16", "bare-http/c16", inferOf},
		ratio{"json/ort-thru-c16", "http-json/c16", "in-process-ort/c16", inferOf},
	)
}

// simpleAllBinaryHeader asks for `simple` with both inputs and both outputs
// as binary blobs, as tritonclient sends it with binary_data=True.
const simpleAllBinaryHeader = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}`

// result is one sub-benchmark's measurement.
type result struct {
	p50      time.Duration
	reqPerS  float64 // calls per second
	inferPer float64 // inferences per second: calls per second × batch
}

// measure runs b.N calls over conc workers and reports p50 latency (µs),
// throughput (req/s) and the CPU cores the process kept busy meanwhile.
func measure(b *testing.B, conc int, call func() error) result {
	return measureBatch(b, conc, 1, call)
}

// measureBatch is measure for calls that each carry batch inferences; for
// batch > 1 it also reports infer/s.
func measureBatch(b *testing.B, conc, batch int, call func() error) result {
	lat := make([]time.Duration, b.N)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := call(); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{p50: lat[len(lat)/2], reqPerS: float64(b.N) / elapsed.Seconds()}
	r.inferPer = r.reqPerS * float64(batch)
	b.ReportMetric(float64(r.p50.Microseconds()), "p50-µs")
	b.ReportMetric(r.reqPerS, "req/s")
	if batch > 1 {
		b.ReportMetric(r.inferPer, "infer/s")
	}
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu-cores")
	return r
}

// cpuTime is the user and system CPU time of this process so far: load
// generator, server and ONNX Runtime threads together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// results keeps the measurements of each sub-benchmark of one benchmark, so
// that a closing "ratio" sub-benchmark can report the side-by-side ratios
// that BENCHMARKS.md quotes. The framework calls a sub-benchmark's function
// several times (b.N = 1, then more) with one B, and once more with a new B
// for each -count repetition: a measurement is the last call with a B.
type results map[string]*measurements

type measurements struct {
	last *testing.B
	runs []result
}

// run measures call as sub-benchmark name (each call carries batch
// inferences).
func (rs results) run(b *testing.B, name string, conc, batch int, call func() error) {
	b.Run(name, func(b *testing.B) { rs.record(b, name, measureBatch(b, conc, batch, call)) })
}

// record keeps r, measured by b in sub-benchmark name.
func (rs results) record(b *testing.B, name string, r result) {
	m := rs[name]
	if m == nil {
		m = &measurements{}
		rs[name] = m
	}
	if m.last == b {
		m.runs[len(m.runs)-1] = r
		return
	}
	m.last, m.runs = b, append(m.runs, r)
}

// median is the median over the repetitions of one metric of name's
// measurements; ok is false when name was not measured.
func (rs results) median(name string, of func(result) float64) (v float64, ok bool) {
	m := rs[name]
	if m == nil || len(m.runs) == 0 {
		return 0, false
	}
	vs := make([]float64, len(m.runs))
	for i, r := range m.runs {
		vs[i] = of(r)
	}
	sort.Float64s(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, true
	}
	return vs[len(vs)/2], true
}

// ratio is one reported quotient of two sub-benchmarks' results.
type ratio struct {
	unit     string // metric name, e.g. "json/bare-p50-c1"
	num, den string // sub-benchmark names
	of       func(result) float64
}

func p50Of(r result) float64   { return float64(r.p50) }
func inferOf(r result) float64 { return r.inferPer }

// report runs the "ratio" sub-benchmark, which reports every ratio whose two
// sides were measured in this run (a -bench filter may leave some out). With
// -count N each side was measured N times in a row, and the ratio is that of
// their medians.
func (rs results) report(b *testing.B, ratios ...ratio) {
	b.Run("ratio", func(b *testing.B) {
		b.ReportMetric(0, "ns/op") // nothing is timed here
		n := 0
		for _, q := range ratios {
			num, ok1 := rs.median(q.num, q.of)
			den, ok2 := rs.median(q.den, q.of)
			if !ok1 || !ok2 || den == 0 {
				continue
			}
			b.ReportMetric(num/den, q.unit)
			n++
		}
		if n == 0 {
			b.Skip("no pair of sub-benchmarks was measured in this run")
		}
	})
}

// BenchmarkSpinning compares ONNX Runtime's intra-op spinning off (inferd's
// default) and on, for a MatMul model that uses the intra-op pool, served
// over HTTP at concurrency 1 and 16:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkSpinning -benchtime 1000x
func BenchmarkSpinning(b *testing.B) {
	model := onnxbuild.Must(onnxbuild.MatMul(onnxbuild.Float, -1, 256, 256))
	cfg := func(spin string) string {
		return `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "allow_spinning" value { string_value: "` + spin + `" } }
`
	}
	root := writeRepo(b, map[string]testModel{"spin_off": {config: cfg("false"), onnx: model}, "spin_on": {config: cfg("true"), onnx: model}})
	base, _ := startServer(b, root, serverOpts{})
	data := strings.TrimSuffix(strings.Repeat("0.5,", 8*256), ",")
	body := []byte(`{"inputs":[{"name":"x","shape":[8,256],"datatype":"FP32","data":[` + data + `]}],"parameters":{"binary_data_output":true}}`)
	rs := results{}
	for _, conc := range []int{1, 16} {
		for _, m := range []string{"spin_off", "spin_on"} {
			rs.run(b, m+"/c"+strconv.Itoa(conc), conc, 1, inferCaller(base+"/v2/models/"+m+"/infer", body))
		}
	}
	rs.report(b,
		ratio{"off/on-p50-c1", "spin_off/c1", "spin_on/c1", p50Of},
		ratio{"off/on-thru-c16", "spin_off/c16", "spin_on/c16", inferOf},
	)
}

// inferCaller posts a JSON body to url over keep-alive connections, without
// asking for compression (perf_analyzer and tritonclient do not by default).
func inferCaller(url string, body []byte) func() error {
	return postCaller(url, body, http.Header{"Content-Type": {"application/json"}})
}

// binaryCaller posts a binary-extension request: the JSON header, then the
// blobs, with Inference-Header-Content-Length set.
func binaryCaller(url, header string, blobs ...[]byte) func() error {
	h, body := binaryRequest(header, blobs...)
	return postCaller(url, body, h)
}

// postCaller returns a call that posts body with header to url over
// keep-alive connections, reads the whole reply and wants status 200.
func postCaller(url string, body []byte, header http.Header) func() error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	return func() error {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}
