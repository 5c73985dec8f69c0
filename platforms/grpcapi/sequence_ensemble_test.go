package grpcapi

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// startSequenceEnsemble serves `seq_ens`, an ensemble whose second step is
// the implicit-state accumulator: pair(IN0, IN1) → acc(sum) → RUNNING, the
// running sum of IN0+IN1 over the sequence, with DIFF = IN0-IN1 beside it.
func startSequenceEnsemble(t *testing.T) *harness {
	return start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"pair": {Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 1))},
		"acc": {Config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), ONNX: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"seq_ens": servertest.Ensemble(servertest.EnsembleConfig("seq_ens", 8,
			[]string{"IN0:TYPE_INT32:[ 1 ]", "IN1:TYPE_INT32:[ 1 ]"}, []string{"RUNNING:TYPE_INT32:[ 1 ]", "DIFF:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "pair", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=sum", "OUTPUT1=DIFF"}},
			servertest.Step{Model: "acc", In: []string{"INPUT=sum"}, Out: []string{"OUTPUT=RUNNING"}})),
	})}, Options{})
}

// pairRequest is one step of a sequence through seq_ens: IN0 = a, IN1 = b.
func pairRequest(rid string, a, b int32, id *pb.InferParameter, start, end bool) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "seq_ens", Id: rid,
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "IN0", Datatype: "INT32", Shape: []int64{1, 1}}, {Name: "IN1", Datatype: "INT32", Shape: []int64{1, 1}}},
		RawInputContents: [][]byte{int32s([]int32{a}), int32s([]int32{b})},
		Parameters:       map[string]*pb.InferParameter{"sequence_id": id, "sequence_start": boolParam(start), "sequence_end": boolParam(end)}}
}

// ensembleOutputs are RUNNING and DIFF of a seq_ens response.
func ensembleOutputs(resp *pb.ModelInferResponse) (running, diff int32, err error) {
	got := map[string]int32{}
	for i, o := range resp.GetOutputs() {
		if raw := resp.GetRawOutputContents(); i < len(raw) && len(raw[i]) == 4 {
			got[o.GetName()] = int32(binary.LittleEndian.Uint32(raw[i]))
		}
	}
	if len(got) != 2 || len(resp.GetOutputs()) != 2 {
		return 0, 0, fmt.Errorf("outputs %v, want RUNNING and DIFF", resp.GetOutputs())
	}
	return got["RUNNING"], got["DIFF"], nil
}

// TestSequenceEnsembleOverGRPC: 16 interleaved sequences through an
// ensemble with a stateful step, with ModelInfer: the ensemble passes each
// request's correlation id and flags to its steps, so each response is its
// own sequence's running sum.
func TestSequenceEnsembleOverGRPC(t *testing.T) {
	h := startSequenceEnsemble(t)
	const sequences, steps = 16, 6
	c := ctx(t)
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Go(func() {
			var id any = uint64(1000 + i)
			if i%2 == 1 {
				id = fmt.Sprintf("ens-%d", i)
			}
			var sum int32
			for k := range steps {
				a, b := int32(i*10+k), int32(k+1)
				sum += a + b
				resp, err := h.client.ModelInfer(c, pairRequest(fmt.Sprint(k), a, b, seqID(id), k == 0, k == steps-1))
				if err != nil {
					t.Errorf("sequence %v step %d: %v", id, k, err)
					return
				}
				if running, diff, err := ensembleOutputs(resp); err != nil || running != sum || diff != a-b {
					t.Errorf("sequence %v step %d: RUNNING %d DIFF %d %v, want %d %d", id, k, running, diff, err, sum, a-b)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSequenceEnsembleOnOneStream sends 16 sequences through the ensemble
// on one stream without waiting for any response: each sequence's requests
// reach the stateful step in the order sent.
func TestSequenceEnsembleOnOneStream(t *testing.T) {
	h := startSequenceEnsemble(t)
	const sequences, steps = 16, 6
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	sent := make(chan error, 1)
	go func() {
		for k := range steps {
			for i := range sequences {
				if err := st.Send(pairRequest(fmt.Sprintf("%d/%d", i, k), int32(i*10+k), int32(k+1), seqID(uint64(i+1)), k == 0, k == steps-1)); err != nil {
					sent <- err
					return
				}
			}
		}
		sent <- st.CloseSend()
	}()
	sums := make(map[string]int32)
	for range sequences * steps {
		r, err := st.Recv()
		servertest.Must(t, err)
		if r.GetErrorMessage() != "" {
			t.Fatal(r.GetErrorMessage())
		}
		resp := r.GetInferResponse()
		var i, k int
		if _, err := fmt.Sscanf(resp.GetId(), "%d/%d", &i, &k); err != nil {
			t.Fatalf("response id %q", resp.GetId())
		}
		var want int32
		for s := 0; s <= k; s++ {
			want += int32(i*10+s) + int32(s+1)
		}
		if running, _, err := ensembleOutputs(resp); err != nil || running != want {
			t.Fatalf("sequence %d step %d: RUNNING %d %v, want %d", i, k, running, err, want)
		}
		sums[resp.GetId()] = want
	}
	servertest.Must(t, <-sent)
	if len(sums) != sequences*steps {
		t.Fatalf("%d distinct responses, want %d", len(sums), sequences*steps)
	}
}
