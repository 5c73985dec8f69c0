package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/sidebyside"
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
	newInst := func() core.BatchInstance {
		inst, err := backend.NewBatchInstance(context.Background(), core.InstanceSpec{
			VersionFiles: core.VersionFiles{ModelName: "simple", Version: 1, ModelDir: root + "/simple", VersionDir: root + "/simple/1"},
			Name:         "simple_0", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
		})
		must(b, err)
		return inst
	}

	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		c := "/c" + strconv.Itoa(conc)
		for _, cl := range callers {
			rs.Run(b, cl.name+c, conc, 1, cl.call)
		}
		insts := make(chan core.BatchInstance, conc)
		for range min(conc, 2) {
			insts <- newInst()
		}
		ortCall := func() error {
			inst := <-insts
			defer func() { insts <- inst }()
			batch := &core.ConcatBatch{
				Inputs: []*core.Tensor{
					{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in0},
					{Name: "INPUT1", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in1},
				},
				Outputs: []string{"OUTPUT0", "OUTPUT1"},
			}
			return inst.Execute(context.Background(), batch)
		}
		rs.Run(b, "in-process-ort"+c, conc, 1, ortCall)
		close(insts)
		for inst := range insts {
			_ = inst.Close()
		}
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "json/bare-p50-c1", Num: "http-json/c1", Den: "bare-http/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "binary/bare-p50-c1", Num: "http-binary/c1", Den: "bare-http/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "json/bare-thru-c16", Num: "http-json/c16", Den: "bare-http/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "binary/bare-thru-c16", Num: "http-binary/c16", Den: "bare-http/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "json/ort-thru-c16", Num: "http-json/c16", Den: "in-process-ort/c16", Of: sidebyside.InferOf},
	)
}

// simpleAllBinaryHeader asks for `simple` with both inputs and both outputs
// as binary blobs, as tritonclient sends it with binary_data=True.
const simpleAllBinaryHeader = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}`

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
	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		for _, m := range []string{"spin_off", "spin_on"} {
			rs.Run(b, m+"/c"+strconv.Itoa(conc), conc, 1, inferCaller(base+"/v2/models/"+m+"/infer", body))
		}
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "off/on-p50-c1", Num: "spin_off/c1", Den: "spin_on/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "off/on-thru-c16", Num: "spin_off/c16", Den: "spin_on/c16", Of: sidebyside.InferOf},
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
