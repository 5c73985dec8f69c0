package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/internal/onnxbuild"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// The binary serves a stateful model over both ports: the server metadata
// lists the sequence extension, a sequence runs over HTTP with a number
// id and over a gRPC stream with a string id, each answering its own
// running sums, and the metrics count every request.
func TestSequenceLaunch(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "acc", onnxbuild.AccumulatorConfig(onnxbuild.Int32), onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)))
	r := start(t, "--model-repository="+root, "--grpc-address=127.0.0.1")

	if s, body := get(t, r.http+"/v2"); s != 200 || !strings.Contains(body, `"extensions":["classification","sequence",`) {
		t.Fatalf("server metadata: %d %s", s, body)
	}
	for i, v := range []int{1, 2, 3} {
		body := fmt.Sprintf(`{"inputs":[{"name":"INPUT","shape":[1,1],"datatype":"INT32","data":[%d]}],"parameters":{"sequence_id":5,"sequence_start":%t,"sequence_end":%t}}`, v, i == 0, i == 2)
		want := fmt.Sprintf(`"name":"OUTPUT","datatype":"INT32","shape":[1,1],"data":[%d]`, []int{1, 3, 6}[i])
		if s, b := post(t, r.http+"/v2/models/acc/infer", body); s != 200 || !strings.Contains(b, want) {
			t.Fatalf("HTTP step %d: %d %s, want %s", i, s, b, want)
		}
	}

	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pb.NewGRPCInferenceServiceClient(conn).ModelStreamInfer(ctx)
	must(t, err)
	values := []int32{10, 20}
	for i, v := range values {
		must(t, st.Send(&pb.ModelInferRequest{ModelName: "acc",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT", Datatype: "INT32", Shape: []int64{1, 1}}},
			RawInputContents: [][]byte{binary.LittleEndian.AppendUint32(nil, uint32(v))},
			Parameters: map[string]*pb.InferParameter{
				"sequence_id":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "a-string-id"}},
				"sequence_start": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: i == 0}},
				"sequence_end":   {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: i == len(values)-1}},
			}}))
	}
	must(t, st.CloseSend())
	for i, want := range []int32{10, 30} {
		resp, err := st.Recv()
		must(t, err)
		raw := resp.GetInferResponse().GetRawOutputContents()
		if resp.GetErrorMessage() != "" || len(raw) != 1 || int32(binary.LittleEndian.Uint32(raw[0])) != want {
			t.Fatalf("gRPC step %d: %v, want OUTPUT %d", i, resp, want)
		}
	}

	_, text := get(t, r.metrics+"/metrics")
	for series, want := range map[string]string{"nv_inference_request_success": "5", "nv_inference_count": "5"} {
		if got := metricValue(t, text, series+`{model="acc",version="1"}`); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
}

// accStep is the HTTP body of one request of sequence id adding x.
func accStep(id, x int, start, end bool) string {
	return fmt.Sprintf(`{"inputs":[{"name":"INPUT","shape":[1,1],"datatype":"INT32","data":[%d]}],"parameters":{"sequence_id":%d,"sequence_start":%t,"sequence_end":%t}}`, x, id, start, end)
}

// The exit, as tritonserver's, lets a live sequence finish over HTTP: once
// the stop began, a new START is refused (503, Triton's words) while the
// live sequence's requests run with its state, and the process exits, with
// success, once its END ran. A sequence that never ends holds the exit
// until the idle timeout ends it or, when that is longer, until
// --exit-timeout-secs passes, a failed exit.
func TestSequenceExit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		idleUs   int
		exitSecs int
		end      bool   // the client finishes the sequence during the exit
		wantErr  string // "" for a clean exit
	}{
		{"END during the exit", onnxbuild.SequenceIdleMicroseconds, 120, true, ""},
		{"idle timeout", 200_000, 120, false, ""},
		{"exit timeout", onnxbuild.SequenceIdleMicroseconds, 2, false, "Exit timeout expired. Exiting immediately."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := strings.Replace(onnxbuild.AccumulatorConfig(onnxbuild.Int32),
				fmt.Sprintf("max_sequence_idle_microseconds: %d", onnxbuild.SequenceIdleMicroseconds),
				fmt.Sprintf("max_sequence_idle_microseconds: %d", tc.idleUs), 1)
			writeModel(t, root, "acc", cfg, onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)))
			r := start(t, "--model-repository="+root, fmt.Sprintf("--exit-timeout-secs=%d", tc.exitSecs))
			infer := r.http + "/v2/models/acc/infer"
			step := func(x, want int, end bool) {
				t.Helper()
				wantOut := fmt.Sprintf(`"name":"OUTPUT","datatype":"INT32","shape":[1,1],"data":[%d]`, want)
				if s, b := post(t, infer, accStep(5, x, x == 1, end)); s != 200 || !strings.Contains(b, wantOut) {
					t.Fatalf("sequence 5 adding %d: %d %s, want %s", x, s, b, wantOut)
				}
			}
			step(1, 1, false)
			r.cancel()
			if tc.end {
				// The stop has begun once a START is refused; until then
				// one-request sequences still run.
				const refusal = "Server is stopping, scheduler for model has stopped accepting new inference requests"
				for id := 100; ; id++ {
					s, b := post(t, infer, accStep(id, 1, true, true))
					if s == 503 && strings.Contains(b, refusal) {
						break
					}
					if s != 200 || id > 100_000 {
						t.Fatalf("START %d during the exit: %d %s, want 200 until refused with 503 %q", id, s, b, refusal)
					}
				}
				step(2, 3, false)
				step(3, 6, true)
			}
			select {
			case err := <-r.done:
				r.done <- err
				if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("run = %v, want error %q", err, tc.wantErr)
				}
			case <-time.After(90 * time.Second):
				t.Fatal("server did not stop")
			}
		})
	}
}
