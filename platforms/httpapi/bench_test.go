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
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// BenchmarkSimple compares, in one run, the `simple` model served over HTTP
// (JSON) with the same model run in-process through the ONNX Runtime
// backend, at concurrency 1 and 16. It reports p50 latency and throughput:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkSimple -benchtime 2000x
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
	body := []byte(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`)
	httpCall := inferCaller(base+"/v2/models/simple/infer", body)

	// In-process: the same backend, one instance per worker, no HTTP.
	cfg, err := modelconfig.Parse([]byte(m.config))
	must(b, err)
	must(b, modelconfig.Normalize(cfg, "simple", true))
	lib, err := onnxrt.FindLibrary("")
	must(b, err)
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib})
	must(b, err)
	defer backend.Close()
	in0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) })...)
	in1 := int32Bytes(seq(16, func(int) int32 { return 1 })...)
	newInst := func() core.Instance {
		inst, err := backend.NewInstance(context.Background(), core.InstanceSpec{
			VersionFiles: core.VersionFiles{ModelName: "simple", Version: 1, ModelDir: root + "/simple", VersionDir: root + "/simple/1"},
			Name:         "simple_0", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
		})
		must(b, err)
		return inst
	}

	for _, conc := range []int{1, 16} {
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
		for _, c := range []struct {
			name string
			call func() error
		}{{"in-process-ort", ortCall}, {"http-json", httpCall}} {
			b.Run(c.name+"/c"+strconv.Itoa(conc), func(b *testing.B) { measure(b, conc, c.call) })
		}
		close(insts)
		for inst := range insts {
			_ = inst.Close()
		}
	}
}

// measure runs b.N calls over conc workers and reports p50 latency (µs)
// and throughput (req/s).
func measure(b *testing.B, conc int, call func() error) {
	lat := make([]time.Duration, b.N)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
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
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	for _, conc := range []int{1, 16} {
		for _, m := range []string{"spin_off", "spin_on"} {
			b.Run(m+"/c"+strconv.Itoa(conc), func(b *testing.B) {
				measure(b, conc, func() error {
					resp, err := client.Post(base+"/v2/models/"+m+"/infer", "application/json", bytes.NewReader(body))
					if err != nil {
						return err
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
					return nil
				})
			})
		}
	}
}

// inferCaller posts body to url over keep-alive connections, without asking
// for compression (perf_analyzer and tritonclient do not by default).
func inferCaller(url string, body []byte) func() error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	return func() error {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
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
