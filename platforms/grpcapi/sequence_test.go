package grpcapi

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// startSequences serves stateful models over the real ONNX Runtime: `acc`
// keeps each sequence's running sum in implicit state (8 slots, so 64
// sequences go through the backlog), `controls` and `controls_str` echo
// the control inputs the sequence batcher feeds them (a UINT64 and a
// STRING CORRID), and `simple` has no sequence batching.
func startSequences(t *testing.T) *harness {
	repo := servertest.WriteRepo(t, map[string]servertest.Model{
		"acc": {Config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), ONNX: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"controls": {Config: onnxbuild.SequenceControlsConfig(onnxbuild.Int32, onnxbuild.Uint64),
			ONNX: onnxbuild.Must(onnxbuild.SequenceControls(onnxbuild.Int32, onnxbuild.Uint64))},
		"controls_str": {Config: onnxbuild.SequenceControlsConfig(onnxbuild.Int32, onnxbuild.String),
			ONNX: onnxbuild.Must(onnxbuild.SequenceControls(onnxbuild.Int32, onnxbuild.String))},
		"simple": simpleModel(),
	})
	return start(t, servertest.Options{Repo: repo}, Options{})
}

// seqID is a sequence id parameter as Triton's Python client sends it: an
// int64_param for a number (a uint64 past int64's range as its two's
// complement), a string_param for a string.
func seqID(id any) *pb.InferParameter {
	switch id := id.(type) {
	case uint64:
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(id)}}
	case string:
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: id}}
	}
	panic(fmt.Sprintf("sequence id %T", id))
}

func boolParam(b bool) *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: b}}
}

// seqRequest is one step of a sequence to model: INPUT [1, 1] holds v,
// and the parameters are the id (nil: none) and both flags, as Triton's
// Python client sends them.
func seqRequest(model, rid string, v int32, id *pb.InferParameter, start, end bool) *pb.ModelInferRequest {
	req := &pb.ModelInferRequest{ModelName: model, Id: rid,
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT", Datatype: "INT32", Shape: []int64{1, 1}}},
		RawInputContents: [][]byte{int32s([]int32{v})}}
	if id != nil {
		req.Parameters = map[string]*pb.InferParameter{"sequence_id": id, "sequence_start": boolParam(start), "sequence_end": boolParam(end)}
	}
	return req
}

// accOutput is the one value of an accumulator response's OUTPUT, its only
// output (the state output stays in the server).
func accOutput(resp *pb.ModelInferResponse) (int32, error) {
	outs, raw := resp.GetOutputs(), resp.GetRawOutputContents()
	if len(outs) != 1 || outs[0].GetName() != "OUTPUT" || len(raw) != 1 || len(raw[0]) != 4 {
		return 0, fmt.Errorf("outputs %v with %d raw contents, want OUTPUT alone", outs, len(raw))
	}
	return int32(binary.LittleEndian.Uint32(raw[0])), nil
}

// sequenceKinds are the two kinds of sequence id.
var sequenceKinds = []struct {
	name string
	id   func(i int) any
}{
	{"uint64 ids", func(i int) any { return uint64(1)<<63 + uint64(i) }},
	{"string ids", func(i int) any { return fmt.Sprintf("sequence-%d", i) }},
}

// seqValue is what sequence i adds at step k, and seqSum the running sum
// after it.
func seqValue(i, k int) int32 { return int32(i*100 + k + 1) }

func seqSum(i, k int) int32 {
	var s int32
	for j := 0; j <= k; j++ {
		s += seqValue(i, j)
	}
	return s
}

// TestSequencesInterleavedOverGRPC runs 64 sequences at once against the
// implicit-state accumulator with ModelInfer, each client sending its next
// step when the last is answered: every response is that sequence's
// running sum, with uint64 ids and with string ids.
func TestSequencesInterleavedOverGRPC(t *testing.T) {
	h := startSequences(t)
	const sequences, steps = 64, 8
	for _, kind := range sequenceKinds {
		t.Run(kind.name, func(t *testing.T) {
			c := ctx(t)
			var wg sync.WaitGroup
			for i := range sequences {
				wg.Go(func() {
					id := kind.id(i)
					for k := range steps {
						rid := fmt.Sprintf("%v/%d", id, k)
						resp, err := h.client.ModelInfer(c, seqRequest("acc", rid, seqValue(i, k), seqID(id), k == 0, k == steps-1))
						if err != nil {
							t.Errorf("sequence %v step %d: %v", id, k, err)
							return
						}
						if got, err := accOutput(resp); err != nil || resp.GetId() != rid || got != seqSum(i, k) {
							t.Errorf("sequence %v step %d: id %q OUTPUT %d %v, want %q %d", id, k, resp.GetId(), got, err, rid, seqSum(i, k))
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestSequencesInterleavedOnOneStream sends 64 sequences on one
// ModelStreamInfer stream without waiting for any response, step by step
// across the sequences: each sequence's requests run in the order they
// were sent, so every response is its sequence's running sum, and the
// responses come back in request order.
func TestSequencesInterleavedOnOneStream(t *testing.T) {
	h := startSequences(t)
	const sequences, steps = 64, 8
	for _, kind := range sequenceKinds {
		t.Run(kind.name, func(t *testing.T) {
			st, err := h.client.ModelStreamInfer(ctx(t))
			servertest.Must(t, err)
			sent := make(chan error, 1)
			go func() {
				for k := range steps {
					for i := range sequences {
						id := kind.id(i)
						if err := st.Send(seqRequest("acc", fmt.Sprintf("%d/%d", i, k), seqValue(i, k), seqID(id), k == 0, k == steps-1)); err != nil {
							sent <- err
							return
						}
					}
				}
				sent <- st.CloseSend()
			}()
			for k := range steps {
				for i := range sequences {
					r, err := st.Recv()
					servertest.Must(t, err)
					if r.GetErrorMessage() != "" {
						t.Fatalf("sequence %d step %d: %s", i, k, r.GetErrorMessage())
					}
					resp := r.GetInferResponse()
					if got, err := accOutput(resp); err != nil || resp.GetId() != fmt.Sprintf("%d/%d", i, k) || got != seqSum(i, k) {
						t.Fatalf("response for sequence %d step %d: id %q OUTPUT %d %v, want %d", i, k, resp.GetId(), got, err, seqSum(i, k))
					}
				}
			}
			servertest.Must(t, <-sent)
			if _, err := st.Recv(); err == nil {
				t.Fatal("the stream did not end after the last response")
			}
		})
	}
}

// TestSequenceLikeTritonsStreamClient sends what Triton's
// simple_grpc_sequence_stream_infer_client.py sends
// (triton-inference-server/client src/python/examples): on one stream,
// every request of two number sequences and a string one, one sequence
// after the other, without waiting; request ids "<sequence id>_<step>".
func TestSequenceLikeTritonsStreamClient(t *testing.T) {
	h := startSequences(t)
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	want := map[string][]int32{}
	n := 0
	for _, sq := range servertest.ClientSequences() {
		key := fmt.Sprint(sq.ID)
		want[key] = sq.Sums
		for i, v := range sq.Steps {
			servertest.Must(t, st.Send(seqRequest("acc", fmt.Sprintf("%s_%d", key, i+1), v, seqID(sq.ID), i == 0, i == len(sq.Steps)-1)))
			n++
		}
	}
	servertest.Must(t, st.CloseSend())
	got := map[string][]int32{}
	for range n {
		r, err := st.Recv()
		servertest.Must(t, err)
		if r.GetErrorMessage() != "" {
			t.Fatal(r.GetErrorMessage())
		}
		v, err := accOutput(r.GetInferResponse())
		servertest.Must(t, err)
		id := r.GetInferResponse().GetId()
		key := id[:strings.LastIndexByte(id, '_')]
		got[key] = append(got[key], v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestSequenceControlsOverGRPC: the control inputs the model sees for each
// step of a sequence sent with ModelInfer, a number id and a string id:
// START on the first, END on the last, READY on every one, and the id as
// CORRID.
func TestSequenceControlsOverGRPC(t *testing.T) {
	h := startSequences(t)
	for _, tc := range []struct {
		model string
		id    any
	}{
		{"controls", uint64(18446744073709551615)},
		{"controls_str", "a-string-id"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			for step := range 3 {
				resp, err := h.client.ModelInfer(ctx(t), seqRequest(tc.model, "r", int32(step+5), seqID(tc.id), step == 0, step == 2))
				servertest.Must(t, err)
				got := map[string]string{}
				for i, o := range resp.GetOutputs() {
					raw := resp.GetRawOutputContents()[i]
					switch o.GetDatatype() {
					case "INT32":
						got[o.GetName()] = fmt.Sprint(int32(binary.LittleEndian.Uint32(raw)))
					case "UINT64":
						got[o.GetName()] = fmt.Sprint(binary.LittleEndian.Uint64(raw))
					case "BYTES":
						got[o.GetName()] = string(raw[4:]) // one element after its length
					}
				}
				flag := func(b bool) string {
					if b {
						return "1"
					}
					return "0"
				}
				want := map[string]string{"OUTPUT": fmt.Sprint(step + 5), "OUTPUT_START": flag(step == 0), "OUTPUT_END": flag(step == 2),
					"OUTPUT_READY": "1", "OUTPUT_CORRID": fmt.Sprint(tc.id)}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d: %v, want %v", step, got, want)
				}
			}
		})
	}
}

// TestSequenceErrorsOverGRPC: each way a request can miss a sequence,
// answered with Triton's text and code by ModelInfer, and in-band by
// ModelStreamInfer, whose stream stays open (synchronous errors carry the
// request id alone).
func TestSequenceErrorsOverGRPC(t *testing.T) {
	h := startSequences(t)
	withParams := func(req *pb.ModelInferRequest, params map[string]*pb.InferParameter) *pb.ModelInferRequest {
		req.Parameters = params
		return req
	}
	batchOfTwo := seqRequest("acc", "r", 1, seqID(uint64(5)), true, false)
	batchOfTwo.Inputs[0].Shape = []int64{2, 1}
	batchOfTwo.RawInputContents[0] = int32s([]int32{1, 2})
	for _, tc := range []struct {
		name string
		req  *pb.ModelInferRequest
		code codes.Code
		msg  string
	}{
		{"no correlation id", seqRequest("acc", "r", 1, nil, false, false), codes.InvalidArgument,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"zero id", seqRequest("acc", "r", 1, seqID(uint64(0)), true, false), codes.InvalidArgument,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"empty string id", seqRequest("acc", "r", 1, seqID(""), true, false), codes.InvalidArgument,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"an id cut to nothing at a NUL", seqRequest("acc", "r", 1, seqID("\x00abc"), true, false), codes.InvalidArgument,
			"inference request to model 'acc' must specify a non-zero or non-empty correlation ID"},
		{"no START for an unknown number id", seqRequest("acc", "r", 1, seqID(uint64(77)), false, false), codes.InvalidArgument,
			"inference request for sequence 77 to model 'acc' must specify the START flag on the first request of the sequence"},
		{"no START for a negative int64 id", seqRequest("acc", "r", 1, seqID(uint64(1<<64-2)), false, false), codes.InvalidArgument,
			"inference request for sequence 18446744073709551614 to model 'acc' must specify the START flag on the first request of the sequence"},
		{"no START for an unknown string id", seqRequest("acc", "r", 1, seqID("abc"), false, true), codes.InvalidArgument,
			"inference request for sequence abc to model 'acc' must specify the START flag on the first request of the sequence"},
		{"a batch of two", batchOfTwo, codes.InvalidArgument,
			"inference request to model 'acc' must specify batch-size 1 due to requirements of sequence batcher"},
		{"a string id for a UINT64 CORRID", seqRequest("controls", "r9", 1, seqID("abc"), true, false), codes.InvalidArgument,
			"[request id: r9] sequence batching control 'CORRID' data-type is 'BYTES', but model 'controls' expects 'UINT64'"},
		{"a number id for a STRING CORRID", seqRequest("controls_str", "", 1, seqID(uint64(3)), true, false), codes.InvalidArgument,
			"[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'controls_str' expects 'BYTES'"},
		{"a string id over 128 bytes", seqRequest("acc", "r", 1, seqID(strings.Repeat("x", 129)), true, false), codes.Unimplemented,
			"string correlation ID cannot be longer than 128 characters"},
		{"a uint64_param id", withParams(seqRequest("acc", "r", 1, nil, false, false), map[string]*pb.InferParameter{
			"sequence_id": {ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: 3}}}), codes.InvalidArgument,
			"invalid value type for 'sequence_id' parameter, expected int64_param or string_param."},
		{"a number START", withParams(seqRequest("acc", "r", 1, nil, false, false), map[string]*pb.InferParameter{
			"sequence_id": seqID(uint64(3)), "sequence_start": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}}}), codes.InvalidArgument,
			"invalid value type for 'sequence_start' parameter, expected bool_param."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.ModelInfer(ctx(t), tc.req)
			wantStatus(t, err, tc.code, tc.msg)

			st, err := h.client.ModelStreamInfer(ctx(t))
			servertest.Must(t, err)
			servertest.Must(t, st.Send(tc.req))
			servertest.Must(t, st.Send(seqRequest("simple", "after", 1, nil, false, false)))
			r, err := st.Recv()
			servertest.Must(t, err)
			if r.GetErrorMessage() != tc.msg || r.GetInferResponse().GetId() != tc.req.GetId() || r.GetInferResponse().GetModelName() != "" {
				t.Fatalf("stream: %v", r)
			}
			// The stream goes on: the next request is answered (here with
			// the error of a wrong input).
			if r, err = st.Recv(); err != nil || r.GetInferResponse().GetId() != "after" {
				t.Fatalf("after the error: %v %v", r, err)
			}
			servertest.Must(t, st.CloseSend())
		})
	}

	t.Run("a sequence that ended needs a new START", func(t *testing.T) {
		for _, step := range []struct {
			start, end bool
			want       int32
			msg        string
		}{
			{true, false, 4, ""},
			{false, true, 8, ""},
			{false, false, 0, "inference request for sequence 42 to model 'acc' must specify the START flag on the first request of the sequence"},
			{true, true, 4, ""}, // a new sequence under the same id starts from zero
		} {
			resp, err := h.client.ModelInfer(ctx(t), seqRequest("acc", "r", 4, seqID(uint64(42)), step.start, step.end))
			if step.msg != "" {
				wantStatus(t, err, codes.InvalidArgument, step.msg)
				continue
			}
			servertest.Must(t, err)
			if got, err := accOutput(resp); err != nil || got != step.want {
				t.Fatalf("start %t end %t: %d %v, want %d", step.start, step.end, got, err, step.want)
			}
		}
	})

	t.Run("a model without sequence batching ignores the parameters", func(t *testing.T) {
		for _, id := range []any{uint64(7), "s", uint64(0)} {
			req := simpleRequest(true)
			req.Parameters = map[string]*pb.InferParameter{"sequence_id": seqID(id), "sequence_start": boolParam(false), "sequence_end": boolParam(true)}
			resp, err := h.client.ModelInfer(ctx(t), req)
			servertest.Must(t, err)
			checkSimple(t, resp)
		}
	})
}

// TestDecoupledSequencesOnOneStream sends 32 sequences to a decoupled
// model.py (testdata/seqcount: a running sum per correlation id in the
// model's memory, each request answered twice) on one stream, every step
// sent without waiting: a sequence's requests run in the order sent, so
// each answer is its sequence's running sum, and each request gets its two
// responses.
func TestDecoupledSequencesOnOneStream(t *testing.T) {
	root := t.TempDir()
	servertest.Must(t, os.CopyFS(filepath.Join(root, "seqcount"), os.DirFS("testdata/seqcount")))
	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	h := start(t, servertest.Options{Repo: root, Backends: []core.Backend{py}}, Options{})
	const sequences, steps = 32, 8
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	for k := range steps {
		for i := range sequences {
			servertest.Must(t, st.Send(seqRequest("seqcount", fmt.Sprintf("%d/%d", i, k), seqValue(i, k), seqID(fmt.Sprint("s", i)), k == 0, k == steps-1)))
		}
	}
	servertest.Must(t, st.CloseSend())
	got := map[string][]int32{}
	for range 2 * sequences * steps {
		r, err := st.Recv()
		servertest.Must(t, err)
		if r.GetErrorMessage() != "" {
			t.Fatalf("%s: %s", r.GetInferResponse().GetId(), r.GetErrorMessage())
		}
		v, err := accOutput(r.GetInferResponse())
		servertest.Must(t, err)
		got[r.GetInferResponse().GetId()] = append(got[r.GetInferResponse().GetId()], v)
	}
	for i := range sequences {
		for k := range steps {
			id := fmt.Sprintf("%d/%d", i, k)
			if want := seqSum(i, k); len(got[id]) != 2 || got[id][0] != want || got[id][1] != want {
				t.Errorf("%s: %v, want %d twice", id, got[id], want)
			}
		}
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("the stream did not end after the last response")
	}
}

// TestSequenceBacklogTimeoutOverGRPC: with the one slot held by an open
// sequence, a new sequence waits in the backlog, and its request's
// timeout passing there answers Triton's UNAVAILABLE, with ModelInfer and
// in-band on a stream; the held sequence goes on.
func TestSequenceBacklogTimeoutOverGRPC(t *testing.T) {
	cfg := onnxbuild.AccumulatorConfig(onnxbuild.Int32)
	if !strings.Contains(cfg, "max_batch_size: 8") {
		t.Fatalf("the accumulator's config has no max_batch_size 8:\n%s", cfg)
	}
	h := start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{"acc1": {
		Config: strings.Replace(cfg, "max_batch_size: 8", "max_batch_size: 1", 1),
		ONNX:   onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)),
	}})}, Options{})
	_, err := h.client.ModelInfer(ctx(t), seqRequest("acc1", "a", 5, seqID(uint64(1)), true, false))
	servertest.Must(t, err)
	const msg = "timeout of the corresponding sequence has been expired"
	backlogged := func(id uint64) *pb.ModelInferRequest {
		req := seqRequest("acc1", "b", 5, seqID(id), true, false)
		req.Parameters["timeout"] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1000}}
		return req
	}
	_, err = h.client.ModelInfer(ctx(t), backlogged(2))
	wantStatus(t, err, codes.Unavailable, msg)

	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	servertest.Must(t, st.Send(backlogged(3)))
	r, err := st.Recv()
	servertest.Must(t, err)
	// Answered once in flight, as Triton's reaper responds: the id, model
	// name and final flag with the text.
	if r.GetErrorMessage() != msg || r.GetInferResponse().GetId() != "b" || r.GetInferResponse().GetModelName() != "acc1" {
		t.Fatalf("stream: %v", r)
	}
	servertest.Must(t, st.CloseSend())

	resp, err := h.client.ModelInfer(ctx(t), seqRequest("acc1", "a", 6, seqID(uint64(1)), false, true))
	servertest.Must(t, err)
	if got, err := accOutput(resp); err != nil || got != 11 {
		t.Fatalf("sequence 1 after: %d %v", got, err)
	}
}
