package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
)

// BenchmarkEnsembleChain measures, in one run on one server, a two-step
// ensemble of `simple` (AddSub INT32 [16], max_batch_size 8, two CPU
// instances as in figure 3; the ensemble feeds step 1's OUTPUT0 and
// OUTPUT1 into step 2's INPUT0 and INPUT1) against a client making the two
// calls itself: it posts to `simple`, reads the two outputs from the reply
// and posts them to `simple` again. Both sides send and receive every tensor with the binary
// extension over loopback keep-alive connections and parse the reply's
// outputs as a client does; before measuring, the benchmark checks that
// both give the same final outputs. Concurrency 1 and 16; the "ratio"
// sub-benchmark reports ensemble over client-two-calls for p50 at
// concurrency 1 and throughput at concurrency 16 (the goal: below 1 and
// above 1):
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkEnsembleChain -benchtime 3s -count 3
func BenchmarkEnsembleChain(b *testing.B) {
	// addSub is a step of `simple` reading a and b, writing sum and diff.
	addSub := func(a, b, sum, diff string) servertest.Step {
		return servertest.Step{Model: "simple", In: []string{"INPUT0=" + a, "INPUT1=" + b}, Out: []string{"OUTPUT0=" + sum, "OUTPUT1=" + diff}}
	}
	// The ensemble's inputs and outputs have `simple`'s names, so that one
	// request header serves both sides.
	tensors := []string{"INPUT0:TYPE_INT32:[ 16 ]", "INPUT1:TYPE_INT32:[ 16 ]", "OUTPUT0:TYPE_INT32:[ 16 ]", "OUTPUT1:TYPE_INT32:[ 16 ]"}
	// Two instances, as figure 3's `simple`: one instance's serial rate
	// is not what is measured.
	simple := servertest.Simple("simple")
	if simple.Config = strings.Replace(simple.Config, "count: 1", "count: 2", 1); !strings.Contains(simple.Config, "count: 2") {
		b.Fatalf("no instance count in servertest.Simple's config:\n%s", simple.Config)
	}
	root := servertest.WriteRepo(b, map[string]servertest.Model{
		"simple": simple,
		"simple_chain": servertest.Ensemble(servertest.EnsembleConfig("simple_chain", 8, tensors[:2], tensors[2:],
			addSub("INPUT0", "INPUT1", "sum", "diff"), addSub("sum", "diff", "OUTPUT0", "OUTPUT1"))),
	})
	base, _ := startServer(b, root, serverOpts{})
	simpleURL, chainURL := base+"/v2/models/simple/infer", base+"/v2/models/simple_chain/infer"
	in0 := int32Bytes(seq(16, func(i int) int32 { return int32(i) })...)
	in1 := int32Bytes(seq(16, func(int) int32 { return 1 })...)
	infer := binaryInferer()
	// The two sides' calls: each returns the chain's two outputs for in0, in1.
	ensemble := func() (out0, out1 []byte, err error) {
		out, err := infer(chainURL, simpleAllBinaryHeader, in0, in1)
		return out["OUTPUT0"], out["OUTPUT1"], err
	}
	twoCalls := func() (out0, out1 []byte, err error) {
		mid, err := infer(simpleURL, simpleAllBinaryHeader, in0, in1)
		if err != nil {
			return nil, nil, err
		}
		out, err := infer(simpleURL, simpleAllBinaryHeader, mid["OUTPUT0"], mid["OUTPUT1"])
		return out["OUTPUT0"], out["OUTPUT1"], err
	}

	// Both sides compute (i+1) + (i-1) = 2i and (i+1) - (i-1) = 2.
	want0 := int32Bytes(seq(16, func(i int) int32 { return int32(2 * i) })...)
	want1 := int32Bytes(seq(16, func(int) int32 { return 2 })...)
	for _, side := range []struct {
		name string
		call func() ([]byte, []byte, error)
	}{{"ensemble", ensemble}, {"client-two-calls", twoCalls}} {
		out0, out1, err := side.call()
		must(b, err)
		if !bytes.Equal(out0, want0) || !bytes.Equal(out1, want1) {
			b.Fatalf("%s: OUTPUT0 %x, OUTPUT1 %x; want %x, %x", side.name, out0, out1, want0, want1)
		}
	}
	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		c := "/c" + strconv.Itoa(conc)
		rs.Run(b, "ensemble"+c, conc, 1, func() error { _, _, err := ensemble(); return err })
		rs.Run(b, "client-two-calls"+c, conc, 1, func() error { _, _, err := twoCalls(); return err })
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "ens/two-calls-p50-c1", Num: "ensemble/c1", Den: "client-two-calls/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "ens/two-calls-thru-c16", Num: "ensemble/c16", Den: "client-two-calls/c16", Of: sidebyside.InferOf},
	)
}

// BenchmarkEnsembleMLP measures, in one run on one server, the
// compute-bound MLP of BENCHMARKS.md figure 1 (sidebyside.MLPConfig's
// mlp_batched: one instance, one intra-op thread, dynamic batching) served
// directly and as the second step of an ensemble whose first step is a
// cheap FP32 identity [-1, 1024] feeding it x (max_batch_size 8, one
// instance, one intra-op thread, no dynamic batching). 16 clients post
// batch-1 requests with binary tensors, x in and y out, to either; before
// measuring, the benchmark checks that both give the same y. Each side
// reports the MLP's mean batch per execution and ORT run time from its
// statistics, and the "ratio" sub-benchmark the ensemble's throughput over
// the direct one's (the goal: at least 0.9) and its p50 over the direct
// one's:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkEnsembleMLP -benchtime 3s -count 3
func BenchmarkEnsembleMLP(b *testing.B) {
	const mlp, feed, ens = "mlp_batched", "mlp_feed", "mlp_ensemble"
	dims := "[ " + strconv.Itoa(sidebyside.MLPIn) + " ]"
	root := servertest.WriteRepo(b, map[string]servertest.Model{
		mlp: {
			Config: sidebyside.MLPConfig(mlp, true),
			ONNX:   onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers)),
		},
		feed: {
			Config: fmt.Sprintf(`name: %q
platform: "onnxruntime_onnx"
max_batch_size: %d
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: %s } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: %s } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
`, feed, sidebyside.MLPBatch, dims, dims),
			ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, sidebyside.MLPIn)),
		},
		// x and y as the MLP's, so that one request header serves both sides.
		ens: servertest.Ensemble(servertest.EnsembleConfig(ens, sidebyside.MLPBatch,
			[]string{"x:TYPE_FP32:" + dims}, []string{"y:TYPE_FP32:" + dims},
			servertest.Step{Model: feed, In: []string{"INPUT0=x"}, Out: []string{"OUTPUT0=x_fed"}},
			servertest.Step{Model: mlp, In: []string{"x=x_fed"}, Out: []string{"y=y"}})),
	})
	base, srv := startServer(b, root, serverOpts{})

	x := sidebyside.MLPInput()
	header := sidebyside.MLPBinaryHeader()
	url := func(model string) string { return base + "/v2/models/" + model + "/infer" }

	// Both sides compute the same y.
	infer := binaryInferer()
	direct, err := infer(url(mlp), header, x)
	must(b, err)
	viaEnsemble, err := infer(url(ens), header, x)
	must(b, err)
	if err := sidebyside.CloseFP32(viaEnsemble["y"], direct["y"]); err != nil {
		b.Fatalf("the ensemble's y differs from the MLP's: %v", err)
	}

	rs := sidebyside.Results{}
	rs.RunExecutions(b, "direct/c16", sidebyside.MLPConc, srv, mlp, binaryCaller(url(mlp), header, x))
	rs.RunExecutions(b, "ensemble/c16", sidebyside.MLPConc, srv, mlp, binaryCaller(url(ens), header, x))
	rs.Report(b,
		sidebyside.Ratio{Unit: "ens/direct-thru", Num: "ensemble/c16", Den: "direct/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "ens/direct-p50", Num: "ensemble/c16", Den: "direct/c16", Of: sidebyside.P50Of},
	)
}

// binaryInferer returns a call that posts a binary-extension request (the
// JSON header, then the blobs) to url over keep-alive connections without
// compression and returns the reply's binary outputs by name, split as a
// client does by the binary_data_size of each output in the reply's JSON
// header.
func binaryInferer() func(url, header string, blobs ...[]byte) (map[string][]byte, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	return func(url, header string, blobs ...[]byte) (map[string][]byte, error) {
		h, body := binaryRequest(header, blobs...)
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = h
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, reply)
		}
		return binaryOutputs(resp.Header.Get("Inference-Header-Content-Length"), reply)
	}
}

// binaryOutputs splits a binary-extension reply whose JSON header is
// headerLen bytes long into its binary outputs by name.
func binaryOutputs(headerLen string, reply []byte) (map[string][]byte, error) {
	n, err := strconv.Atoi(headerLen)
	if err != nil || n < 0 || n > len(reply) {
		return nil, fmt.Errorf("Inference-Header-Content-Length %q for a reply of %d bytes", headerLen, len(reply))
	}
	var hdr struct {
		Outputs []struct {
			Name       string `json:"name"`
			Parameters struct {
				Size int `json:"binary_data_size"`
			} `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(reply[:n], &hdr); err != nil {
		return nil, err
	}
	outs, rest := make(map[string][]byte, len(hdr.Outputs)), reply[n:]
	for _, o := range hdr.Outputs {
		if o.Parameters.Size > len(rest) {
			return nil, fmt.Errorf("output %s: %d bytes, %d left in the reply", o.Name, o.Parameters.Size, len(rest))
		}
		outs[o.Name], rest = rest[:o.Parameters.Size], rest[o.Parameters.Size:]
	}
	return outs, nil
}
