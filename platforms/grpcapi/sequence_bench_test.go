package grpcapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The sequence benchmarks' load: benchSequences clients at once, each
// running sequences of benchSteps requests one request at a time, on a
// model with benchSlots slots (max_batch_size, one instance with one
// intra-op thread).
const (
	benchSequences = 256
	benchSteps     = 32
	benchSlots     = 4
)

// seqBench is one stateful model the sequence benchmarks serve.
type seqBench struct {
	family string // model names are family_direct and family_oldest
	onnx   []byte
	// config is the model's config under the direct strategy; strategies
	// holds each strategy's block, put first in sequence_batching.
	config     string
	strategies map[string]string
	// in and want are the one-row INPUT of each step, the same for every
	// sequence, and the OUTPUT a sequence answers to it.
	in, want [][]byte
	elem     core.DataType
	// stateBytes is the size of one sequence's state.
	stateBytes int
	close      func(got, want []byte) error // compares OUTPUTs
}

// modelConfig is b's config under strategy, with benchSlots slots and one
// intra-op thread.
func (sb seqBench) modelConfig(b *testing.B, strategy string) string {
	cfg := sb.config
	for _, e := range [][2]string{
		{"max_batch_size: 8", "max_batch_size: " + strconv.Itoa(benchSlots)},
		{"instance_group", `parameters { key: "intra_op_thread_count" value { string_value: "1" } }` + "\ninstance_group"},
		{"sequence_batching {", "sequence_batching {\n  " + sb.strategies[strategy]},
	} {
		if !strings.Contains(cfg, e[0]) {
			b.Fatalf("the %s config has no %q:\n%s", sb.family, e[0], cfg)
		}
		cfg = strings.Replace(cfg, e[0], e[1], 1)
	}
	return cfg
}

// BenchmarkSequences measures stateful serving on the implicit-state
// accumulator (onnxbuild.Accumulator, INT32, a run of a few µs), direct
// and oldest strategies without a queue delay; see runSequenceBench.
//
//	go test ./platforms/grpcapi -run '^$' -bench 'BenchmarkSequences$' -benchtime 8192x -count 3
func BenchmarkSequences(b *testing.B) {
	in, want := make([][]byte, benchSteps), make([][]byte, benchSteps)
	for k := range benchSteps {
		in[k] = binary.LittleEndian.AppendUint32(nil, uint32(k+1))
		want[k] = binary.LittleEndian.AppendUint32(nil, uint32((k+1)*(k+2)/2))
	}
	runSequenceBench(b, seqBench{
		family: "acc", onnx: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)),
		config:     onnxbuild.AccumulatorConfig(onnxbuild.Int32),
		strategies: map[string]string{"direct": "direct { }", "oldest": "oldest { max_candidate_sequences: " + strconv.Itoa(benchSlots) + " }"},
		in:         in, want: want, elem: core.TypeInt32, stateBytes: 4,
		close: func(got, want []byte) error {
			if !bytes.Equal(got, want) {
				return fmt.Errorf("OUTPUT %v, want %v", got, want)
			}
			return nil
		},
	})
}

// The recurrent cell of BenchmarkSequencesRNN: FP32 INPUT [-1, rnnIn],
// state [-1, rnnHidden], weights of 8 MiB in all, about as compute-bound
// as the MLP of BENCHMARKS.md figure 1.
const rnnIn, rnnHidden = 1024, 1024

// rnnCell is a stateful model whose run costs what a real one does:
// OUTPUT = STATE_OUT = tanh(INPUT·Wx + STATE_IN·Wh + b), with Wx, Wh and b
// onnxbuild's MLP weights and bias.
func rnnCell() ([]byte, error) {
	g := onnxbuild.NewGraph("rnn_cell")
	g.Input("INPUT", onnxbuild.Float, -1, rnnIn)
	g.Input("STATE_IN", onnxbuild.Float, -1, rnnHidden)
	g.Output("OUTPUT", onnxbuild.Float, -1, rnnHidden)
	g.Output("STATE_OUT", onnxbuild.Float, -1, rnnHidden)
	for _, init := range []struct {
		name string
		dims []int64
		vals []float64
	}{
		{"Wx", []int64{rnnIn, rnnHidden}, onnxbuild.MLPWeights(0, rnnIn, rnnHidden)},
		{"Wh", []int64{rnnHidden, rnnHidden}, onnxbuild.MLPWeights(1, rnnHidden, rnnHidden)},
		{"b", []int64{rnnHidden}, onnxbuild.MLPBias(0, rnnHidden)},
	} {
		raw, err := onnxbuild.Encode(onnxbuild.Float, init.vals)
		if err != nil {
			return nil, err
		}
		g.Initializer(init.name, onnxbuild.Float, init.dims, raw)
	}
	g.Node("MatMul", []string{"INPUT", "Wx"}, []string{"xw"})
	g.Node("MatMul", []string{"STATE_IN", "Wh"}, []string{"hw"})
	g.Node("Add", []string{"xw", "hw"}, []string{"sum"})
	g.Node("Add", []string{"sum", "b"}, []string{"pre"})
	g.Node("Tanh", []string{"pre"}, []string{"OUTPUT"})
	g.Node("Identity", []string{"OUTPUT"}, []string{"STATE_OUT"})
	return onnxbuild.Model(g, onnxbuild.DefaultOpset)
}

const rnnConfig = `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1024 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1024 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  state [ {
    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1024 ]
    initial_state { name: "zero" data_type: TYPE_FP32 dims: [ 1024 ] zero_data: true }
  } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`

// BenchmarkSequencesRNN is BenchmarkSequences on a compute-bound stateful
// model (rnnCell, a batch-4 run of about a millisecond), where batching
// pays: both strategies wait up to 500 µs (figure 1's queue delay) for a
// request in each of the benchSlots slots; see runSequenceBench.
//
//	go test ./platforms/grpcapi -run '^$' -bench BenchmarkSequencesRNN -benchtime 4096x -count 3
func BenchmarkSequencesRNN(b *testing.B) {
	in := make([][]byte, benchSteps)
	for k := range benchSteps {
		for i := range rnnIn {
			in[k] = binary.LittleEndian.AppendUint32(in[k], math.Float32bits(float32(math.Sin(float64(i*(k+1))))))
		}
	}
	runSequenceBench(b, seqBench{
		family: "rnn", onnx: onnxbuild.Must(rnnCell()), config: rnnConfig,
		strategies: map[string]string{
			"direct": "direct { max_queue_delay_microseconds: 500 minimum_slot_utilization: 1.0 }",
			"oldest": "oldest { max_candidate_sequences: " + strconv.Itoa(benchSlots) + " preferred_batch_size: [ " + strconv.Itoa(benchSlots) + " ] max_queue_delay_microseconds: 500 }",
		},
		in: in, elem: core.TypeFP32, stateBytes: 4 * rnnHidden, close: sidebyside.CloseFP32,
	})
}

// runSequenceBench measures, in one run, sb's model served with the direct
// and the oldest strategy over gRPC (each client its own ModelStreamInfer
// stream, as Triton's stream sequence client) and over HTTP (the binary
// extension), benchSequences clients each running whole sequences, and
// the same model in-process: one instance executing batches of
// benchSlots sequences back to back, the state fed back in Go. Every
// response is checked against the in-process answer for its step. The
// "ratio" sub-benchmark reports each server's throughput over the
// in-process one, and oldest's over direct's.
func runSequenceBench(b *testing.B, sb seqBench) {
	models := map[string]servertest.Model{}
	for strategy := range sb.strategies {
		models[sb.family+"_"+strategy] = servertest.Model{Config: sb.modelConfig(b, strategy), ONNX: sb.onnx}
	}
	srv := startBenchServers(b, models)
	client := dialBench(b, srv.grpcAddr, true)
	ref := newSeqReference(b, srv.root, sb.family+"_direct", sb.modelConfig(b, "direct"), sb)
	if sb.want == nil { // the in-process answers, one sequence alone
		sb.want = ref.trajectory(b)
	}
	ref.want = sb.want

	rs := sidebyside.Results{}
	rs.Run(b, "in-process-ort/batch4", 1, benchSlots, ref.call)
	var ids uint64
	for _, strategy := range []string{"direct", "oldest"} {
		model := sb.family + "_" + strategy
		for _, fe := range []struct {
			name string
			run  seqRunner
		}{
			{"grpc-stream", oneAtATime(grpcStreamStep(client, model, sb))},
			{"http-binary", oneAtATime(httpBinaryStep(srv.httpBase+"/v2/models/"+model+"/infer", sb))},
			{"grpc-stream-ahead2", grpcStreamAhead(client, model, sb, 2)},
		} {
			name := fe.name + "/" + strategy + "/c" + strconv.Itoa(benchSequences)
			b.Run(name, func(b *testing.B) {
				before := sidebyside.ModelStats(b, srv.core, model)
				rs.Record(b, name, measureSequences(b, fe.run, &ids))
				sidebyside.ReportExecutions(b, before, sidebyside.ModelStats(b, srv.core, model))
			})
		}
	}
	c := "/c" + strconv.Itoa(benchSequences)
	rs.Report(b,
		sidebyside.Ratio{Unit: "grpc-direct/ort-thru", Num: "grpc-stream/direct" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc-oldest/ort-thru", Num: "grpc-stream/oldest" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "http-direct/ort-thru", Num: "http-binary/direct" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "http-oldest/ort-thru", Num: "http-binary/oldest" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc-ahead2-direct/ort-thru", Num: "grpc-stream-ahead2/direct" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc-ahead2-oldest/ort-thru", Num: "grpc-stream-ahead2/oldest" + c, Den: "in-process-ort/batch4", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc-oldest/direct-thru", Num: "grpc-stream/oldest" + c, Den: "grpc-stream/direct" + c, Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc-oldest/direct-p50", Num: "grpc-stream/oldest" + c, Den: "grpc-stream/direct" + c, Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "http-oldest/direct-thru", Num: "http-binary/oldest" + c, Den: "http-binary/direct" + c, Of: sidebyside.InferOf},
	)
}

// seqCursor is one client's place in its current sequence.
type seqCursor struct {
	id   uint64 // the current sequence's id, never 0
	step int    // the next step
	// conn is the transport's per-client state (a gRPC stream).
	conn any
}

// stepFunc sends c's next step and checks the answer.
type stepFunc func(c *seqCursor) error

// seqRunner runs c's sequence from its first step to its last, checking
// every answer, and puts each step's latency in lat.
type seqRunner func(c *seqCursor, lat []time.Duration) error

// oneAtATime runs a sequence one step at a time, each sent once the last
// is answered.
func oneAtATime(step stepFunc) seqRunner {
	return func(c *seqCursor, lat []time.Duration) error {
		for c.step = 0; c.step < benchSteps; c.step++ {
			t0 := time.Now()
			if err := step(c); err != nil {
				return fmt.Errorf("step %d: %w", c.step, err)
			}
			lat[c.step] = time.Since(t0)
		}
		return nil
	}
}

// measureSequences runs b.N requests, rounded up to whole sequences, over
// benchSequences clients, each running one sequence after another to its
// end (a client that stopped midway would hold its slot, and the
// sequences waiting for one, until the idle timeout). It reports the p50
// latency of a request and the throughput as sidebyside.Measure does.
// ids are the sequence ids used so far, which it advances.
func measureSequences(b *testing.B, run seqRunner, ids *uint64) sidebyside.Result {
	n := (b.N + benchSteps - 1) / benchSteps
	lat := make([]time.Duration, n*benchSteps)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	for range benchSequences {
		wg.Go(func() {
			c := &seqCursor{}
			defer func() {
				if s, ok := c.conn.(pb.GRPCInferenceService_ModelStreamInferClient); ok {
					_ = s.CloseSend()
				}
			}()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				c.id = *ids + uint64(k) + 1
				if err := run(c, lat[k*benchSteps:(k+1)*benchSteps]); err != nil {
					b.Errorf("sequence %d: %v", c.id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	*ids += uint64(n)
	slices.Sort(lat)
	r := sidebyside.Result{P50: lat[len(lat)/2], ReqPerS: float64(len(lat)) / elapsed.Seconds()}
	r.InferPer = r.ReqPerS
	b.ReportMetric(float64(r.P50.Microseconds()), "p50-µs")
	b.ReportMetric(r.ReqPerS, "req/s")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu-cores")
	return r
}

// processCPU is the user and system CPU time of this process so far: load
// generator, server and ONNX Runtime threads together.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// grpcStreamStep sends each client's steps on its own ModelStreamInfer
// stream, one request at a time.
func grpcStreamStep(client pb.GRPCInferenceServiceClient, model string, sb seqBench) stepFunc {
	return func(c *seqCursor) error {
		st, _ := c.conn.(pb.GRPCInferenceService_ModelStreamInferClient)
		if st == nil {
			var err error
			if st, err = client.ModelStreamInfer(context.Background()); err != nil {
				return err
			}
			c.conn = st
		}
		if err := st.Send(sbRequest(model, sb, c.id, c.step)); err != nil {
			return err
		}
		r, err := st.Recv()
		if err != nil {
			return err
		}
		if r.GetErrorMessage() != "" {
			return fmt.Errorf("%s", r.GetErrorMessage())
		}
		raw := r.GetInferResponse().GetRawOutputContents()
		if len(raw) != 1 {
			return fmt.Errorf("%d outputs, want OUTPUT alone", len(raw))
		}
		return sb.close(raw[0], sb.want[c.step])
	}
}

// grpcStreamAhead runs each client's sequences on its own ModelStreamInfer
// stream keeping up to ahead steps in flight: the next step is sent before
// the last is answered, as a client streaming a sequence's inputs does.
func grpcStreamAhead(client pb.GRPCInferenceServiceClient, model string, sb seqBench, ahead int) seqRunner {
	return func(c *seqCursor, lat []time.Duration) error {
		st, _ := c.conn.(pb.GRPCInferenceService_ModelStreamInferClient)
		if st == nil {
			var err error
			if st, err = client.ModelStreamInfer(context.Background()); err != nil {
				return err
			}
			c.conn = st
		}
		window := make(chan time.Time, ahead) // the send times of the steps in flight
		sent := make(chan error, 1)
		go func() {
			for k := range benchSteps {
				window <- time.Now()
				if err := st.Send(sbRequest(model, sb, c.id, k)); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		for k := range benchSteps {
			r, err := st.Recv()
			if err != nil {
				return err
			}
			lat[k] = time.Since(<-window)
			if r.GetErrorMessage() != "" {
				return fmt.Errorf("step %d: %s", k, r.GetErrorMessage())
			}
			raw := r.GetInferResponse().GetRawOutputContents()
			if len(raw) != 1 {
				return fmt.Errorf("step %d: %d outputs, want OUTPUT alone", k, len(raw))
			}
			if err := sb.close(raw[0], sb.want[k]); err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
		}
		return <-sent
	}
}

// sbRequest is step k of sequence id to model.
func sbRequest(model string, sb seqBench, id uint64, k int) *pb.ModelInferRequest {
	in := sb.in[k]
	return &pb.ModelInferRequest{ModelName: model,
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT", Datatype: sb.elem.String(), Shape: []int64{1, int64(len(in) / 4)}}},
		RawInputContents: [][]byte{in},
		Parameters: map[string]*pb.InferParameter{"sequence_id": seqID(id),
			"sequence_start": boolParam(k == 0), "sequence_end": boolParam(k == benchSteps-1)},
	}
}

// httpBinaryStep posts each step as a binary-extension request over
// keep-alive connections, the output asked for in binary.
func httpBinaryStep(url string, sb seqBench) stepFunc {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchSequences, DisableCompression: true}}
	datatype := sb.elem.String()
	return func(c *seqCursor) error {
		in := sb.in[c.step]
		header := fmt.Sprintf(`{"inputs":[{"name":"INPUT","shape":[1,%d],"datatype":%q,"parameters":{"binary_data_size":%d}}],"outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}}],"parameters":{"sequence_id":%d,"sequence_start":%t,"sequence_end":%t}}`,
			len(in)/4, datatype, len(in), c.id, c.step == 0, c.step == benchSteps-1)
		req, err := http.NewRequest(http.MethodPost, url, io.MultiReader(strings.NewReader(header), bytes.NewReader(in)))
		if err != nil {
			return err
		}
		req.ContentLength = int64(len(header) + len(in))
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		want := sb.want[c.step]
		if len(body) < len(want) {
			return fmt.Errorf("a reply of %d bytes", len(body))
		}
		return sb.close(body[len(body)-len(want):], want)
	}
}

// seqReference is the in-process side: a second ONNX Runtime backend with
// servertest.Start's options and one instance of the model, which a Go
// loop runs on batches of benchSlots sequences at the same step, feeding
// STATE_OUT back as the next STATE_IN as the sequence batcher does,
// without a frontend or a scheduler.
type seqReference struct {
	inst  core.BatchInstance
	sb    seqBench
	step  int
	state []byte // benchSlots rows of state
	want  [][]byte
}

func newSeqReference(b *testing.B, root, model, config string, sb seqBench) *seqReference {
	b.Helper()
	cfg, err := modelconfig.Parse([]byte(config))
	servertest.Must(b, err)
	servertest.Must(b, modelconfig.Normalize(cfg, model, true))
	lib, err := onnxrt.FindLibrary("")
	servertest.Must(b, err)
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, DefaultMaxBatchSize: 4})
	servertest.Must(b, err)
	b.Cleanup(func() { _ = backend.Close() })
	dir := filepath.Join(root, model)
	inst, err := backend.NewBatchInstance(context.Background(), core.InstanceSpec{
		VersionFiles: core.VersionFiles{ModelName: model, Version: 1, ModelDir: dir, VersionDir: filepath.Join(dir, "1")},
		Name:         model + "_0_0", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
	})
	servertest.Must(b, err)
	b.Cleanup(func() { _ = inst.Close() })
	return &seqReference{inst: inst, sb: sb}
}

// execute runs one step of rows sequences whose states are state, all fed
// the step's input, and returns OUTPUT and STATE_OUT.
func (r *seqReference) execute(step, rows int, state []byte) (out, next []byte, err error) {
	in := bytes.Repeat(r.sb.in[step], rows)
	if state == nil { // a sequence's first step starts from zero
		state = make([]byte, rows*r.sb.stateBytes)
	}
	bt := &core.ConcatBatch{
		Inputs: []*core.Tensor{
			{Name: "INPUT", DataType: r.sb.elem, Shape: []int64{int64(rows), int64(len(r.sb.in[step]) / 4)}, Data: in},
			{Name: "STATE_IN", DataType: r.sb.elem, Shape: []int64{int64(rows), int64(r.sb.stateBytes / 4)}, Data: state},
		},
		Outputs: []string{"OUTPUT", "STATE_OUT"},
	}
	if err := r.inst.Execute(context.Background(), bt); err != nil {
		return nil, nil, err
	}
	return bt.Results[0].Data, bt.Results[1].Data, nil
}

// trajectory is the OUTPUT of each step of one sequence run alone.
func (r *seqReference) trajectory(b *testing.B) [][]byte {
	want := make([][]byte, benchSteps)
	var state []byte
	for k := range benchSteps {
		out, next, err := r.execute(k, 1, state)
		servertest.Must(b, err)
		want[k], state = bytes.Clone(out), bytes.Clone(next)
	}
	return want
}

// call executes one step of benchSlots sequences as one batch and checks
// each row's OUTPUT.
func (r *seqReference) call() error {
	if r.step == benchSteps { // the next sequences start from zero
		r.step, r.state = 0, nil
	}
	out, next, err := r.execute(r.step, benchSlots, r.state)
	if err != nil {
		return err
	}
	row := len(out) / benchSlots
	for k := range benchSlots {
		if err := r.sb.close(out[k*row:(k+1)*row], r.want[r.step]); err != nil {
			return fmt.Errorf("in-process step %d row %d: %w", r.step, k, err)
		}
	}
	r.state = next
	r.step++
	return nil
}
