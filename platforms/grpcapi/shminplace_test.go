package grpcapi

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/shm"
)

// inPlaceElems is the FP32 length of the in-place tests' tensors: 128 KiB,
// above the ONNX Runtime instance's small-tensor cache, so that outputs are
// written where they go.
const inPlaceElems = 1 << 15

const identityPy = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
`

// inPlaceHarness serves FP32 identities over a guarded region table: ONNX
// Runtime with an output shape known before the run (identity_fixed),
// known after it (identity), behind a dynamic batcher (identity_batched),
// the Python backend's (identity_py), and a Go backend's that returns its
// input's own bytes (go_identity).
func inPlaceHarness(t *testing.T) (*harness, *shm.Manager) {
	t.Helper()
	regions := shm.NewManager(nil)
	servertest.Must(t, regions.InstallGuard())
	dims := strconv.Itoa(inPlaceElems)
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"identity": {Config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1))},
		"identity_fixed": {Config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ` + dims + ` ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ` + dims + ` ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, inPlaceElems))},
		"go_identity": {Config: `backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`},
		"identity_batched": {Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ` + dims + ` ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ` + dims + ` ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 1000000 }
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, inPlaceElems))},
	})
	dir := filepath.Join(root, "identity_py")
	servertest.Must(t, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "1", "model.py"), []byte(identityPy), 0o644))
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(`backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`), 0o644))
	py := python.New(python.Options{Executable: servertest.Python(t), ArenaBytes: python.DefaultArenaBytes})
	t.Cleanup(func() { _ = py.Close() })
	return start(t, servertest.Options{Repo: root, Backends: []core.Backend{py}}, Options{SharedMemory: regions}), regions
}

// inPlaceRequest asks model for OUTPUT0 of data (FP32, shape), the input
// from region in when in is not empty (raw otherwise), the output into
// region out at offset when out is not empty (raw otherwise).
func inPlaceRequest(model string, shape []int64, data []byte, in, out string, offset, outSize int) *pb.ModelInferRequest {
	req := &pb.ModelInferRequest{
		ModelName: model,
		Inputs:    []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: shape}},
	}
	if in != "" {
		req.Inputs[0].Parameters = shmParams(in, 0, int64(len(data)))
	} else {
		req.RawInputContents = [][]byte{data}
	}
	if out != "" {
		req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams(out, int64(offset), int64(outSize))}}
	}
	return req
}

func inPlaceData(seed int) []byte {
	data := make([]byte, 4*inPlaceElems)
	for i := range data {
		data[i] = byte(i*7 + seed)
	}
	return data
}

// TestSharedMemoryOutputsInPlaceGRPC: outputs into regions are right
// whether ONNX Runtime writes them in place (shape known before the run),
// copies them there from its own allocation (known after), or the Python
// backend copies them there from its arena; with the input in a region or
// raw; at an offset, into a region larger than the output. A region too
// small gets Triton's error, and an output region truncated under the run
// fails that call only (the Python backend's copy into it included).
func TestSharedMemoryOutputsInPlaceGRPC(t *testing.T) {
	h, regions := inPlaceHarness(t)
	data := inPlaceData(0)
	size := len(data)
	shape := []int64{inPlaceElems}
	for _, model := range []string{"identity", "identity_fixed", "identity_py"} {
		for _, inRegion := range []bool{true, false} {
			t.Run(model+"/input in region "+strconv.FormatBool(inRegion), func(t *testing.T) {
				in := ""
				if inRegion {
					in = "in"
					shmtest.Region(t, regions, in, data)
					defer shmtest.Unregister(t, regions, in)
				}
				outKey := shmtest.Region(t, regions, "out", make([]byte, size+200))
				defer shmtest.Unregister(t, regions, "out")
				resp, err := h.client.ModelInfer(ctx(t), inPlaceRequest(model, shape, data, in, "out", 100, size+100))
				servertest.Must(t, err)
				if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 0 || len(resp.Outputs) != 1 ||
					resp.Outputs[0].Shape[0] != inPlaceElems {
					t.Fatalf("response %v, %d raw", resp.Outputs, len(resp.RawOutputContents))
				}
				got := shmtest.Read(t, outKey)
				if !bytes.Equal(got[100:100+size], data) || !bytes.Equal(got[:100], make([]byte, 100)) ||
					!bytes.Equal(got[100+size:], make([]byte, 100)) {
					t.Fatal("region out does not hold OUTPUT0 at offset 100 and nothing else")
				}

				shmtest.Region(t, regions, "small", make([]byte, size-4))
				defer shmtest.Unregister(t, regions, "small")
				_, err = h.client.ModelInfer(ctx(t), inPlaceRequest(model, shape, data, in, "small", 0, size-4))
				wantStatus(t, err, codes.Internal, "shared memory size specified with the request for output 'OUTPUT0' ("+
					strconv.Itoa(size-4)+" bytes) should be at least "+strconv.Itoa(size)+" bytes to hold the results")
			})
		}
		t.Run(model+"/output region truncated", func(t *testing.T) {
			key := shmtest.Region(t, regions, "cut", make([]byte, size))
			servertest.Must(t, os.Truncate(shmtest.Path(key), 4096))
			_, err := h.client.ModelInfer(ctx(t), inPlaceRequest(model, shape, data, "", "cut", 0, size))
			wantStatus(t, err, codes.Internal, "shared memory region 'cut' is no longer backed by its object: it was truncated")
			shmtest.Unregister(t, regions, "cut")
			resp, err := h.client.ModelInfer(ctx(t), inPlaceRequest(model, shape, data, "", "", 0, 0))
			servertest.Must(t, err)
			if !bytes.Equal(resp.RawOutputContents[0], data) {
				t.Fatal("the next call: OUTPUT0 differs")
			}
		})
	}
}

// TestSharedMemoryBatchedInPlaceGRPC: a dynamic batcher gathers requests
// whose inputs and outputs are in regions with requests whose data is
// raw; each gets its own answer, in its region or in its response.
func TestSharedMemoryBatchedInPlaceGRPC(t *testing.T) {
	h, regions := inPlaceHarness(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		data := inPlaceData(i)
		var in, out, outKey string
		if i%2 == 0 {
			in, out = "in"+strconv.Itoa(i), "out"+strconv.Itoa(i)
			shmtest.Region(t, regions, in, data)
			outKey = shmtest.Region(t, regions, out, make([]byte, len(data)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.client.ModelInfer(ctx(t), inPlaceRequest("identity_batched", []int64{1, inPlaceElems}, data, in, out, 0, len(data)))
			switch {
			case err != nil:
				errs <- err
			case out == "" && !bytes.Equal(resp.RawOutputContents[0], data):
				errs <- errString("request " + strconv.Itoa(i) + ": raw OUTPUT0 differs")
			case out != "" && !bytes.Equal(shmtest.Read(t, outKey), data):
				errs <- errString("request " + strconv.Itoa(i) + ": region OUTPUT0 differs")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, err := h.client.ModelStatistics(ctx(t), &pb.ModelStatisticsRequest{Name: "identity_batched"})
	servertest.Must(t, err)
	if s := st.ModelStats[0]; s.ExecutionCount >= s.InferenceCount {
		t.Fatalf("no batch of several requests formed (%d executions for %d requests): the mix was not exercised", s.ExecutionCount, s.InferenceCount)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestSharedMemoryStreamInPlaceGRPC: on ModelStreamInfer too, ONNX Runtime
// reads inputs and writes outputs in place; a request whose input region
// was truncated gets the truncation error on the stream, and the stream
// goes on serving the next request.
func TestSharedMemoryStreamInPlaceGRPC(t *testing.T) {
	h, regions := inPlaceHarness(t)
	data := inPlaceData(3)
	size := len(data)
	shape := []int64{inPlaceElems}
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	shmtest.Region(t, regions, "in", data)
	outKey := shmtest.Region(t, regions, "out", make([]byte, size))
	cutKey := shmtest.Region(t, regions, "cut", data)
	servertest.Must(t, os.Truncate(shmtest.Path(cutKey), 4096))
	for _, c := range []struct {
		in, msg string
	}{
		{"cut", "shared memory region 'cut' is no longer backed by its object: it was truncated"},
		{"in", ""},
	} {
		servertest.Must(t, st.Send(inPlaceRequest("identity_fixed", shape, data, c.in, "out", 0, size)))
		r, err := st.Recv()
		servertest.Must(t, err)
		if r.ErrorMessage != c.msg {
			t.Fatalf("input %s: error %q, want %q", c.in, r.ErrorMessage, c.msg)
		}
	}
	if !bytes.Equal(shmtest.Read(t, outKey), data) {
		t.Fatal("region out does not hold OUTPUT0")
	}
	servertest.Must(t, st.CloseSend())
}

// TestSharedMemoryDecoupledTruncatedGRPC: a decoupled model reading its
// input in place from a region truncated under it gets the truncation
// error instead of a response computed from the lost bytes, and the
// stream goes on.
func TestSharedMemoryDecoupledTruncatedGRPC(t *testing.T) {
	h, regions, _ := shmHarness(t)
	key := shmtest.Object(t, 8192)
	servertest.Must(t, regions.RegisterSystem("cut", key, 4096, 12))
	servertest.Must(t, os.Truncate(shmtest.Path(key), 4096))
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	req := repeatRequest("r", 3)
	req.RawInputContents = nil
	req.Inputs[0].Parameters = shmParams("cut", 0, 12)
	servertest.Must(t, st.Send(req))
	r, err := st.Recv()
	servertest.Must(t, err)
	if want := "shared memory region 'cut' is no longer backed by its object: it was truncated"; r.ErrorMessage != want {
		t.Fatalf("error %q, want %q", r.ErrorMessage, want)
	}
	servertest.Must(t, st.Send(repeatRequest("next", 1)))
	for {
		r, err := st.Recv()
		servertest.Must(t, err)
		if r.ErrorMessage != "" {
			t.Fatalf("the next request: %s", r.ErrorMessage)
		}
		if r.InferResponse.GetId() == "next" {
			break
		}
	}
	servertest.Must(t, st.CloseSend())
}

// TestSharedMemoryAliasedInputTruncatedGRPC: a backend that returns an
// input's own bytes as its output (the Go identity) has them copied out of
// the input's region before the call's truncation check, so a region
// truncated under the call fails it instead of rendering the lost bytes;
// an intact one answers its data.
func TestSharedMemoryAliasedInputTruncatedGRPC(t *testing.T) {
	h, regions := inPlaceHarness(t)
	data := inPlaceData(5)
	shape := []int64{inPlaceElems}
	shmtest.Region(t, regions, "in", data)
	resp, err := h.client.ModelInfer(ctx(t), inPlaceRequest("go_identity", shape, data, "in", "", 0, 0))
	servertest.Must(t, err)
	if !bytes.Equal(resp.RawOutputContents[0], data) {
		t.Fatal("OUTPUT0 differs from the region's input")
	}
	key := shmtest.Region(t, regions, "cut", data)
	servertest.Must(t, os.Truncate(shmtest.Path(key), 4096))
	_, err = h.client.ModelInfer(ctx(t), inPlaceRequest("go_identity", shape, data, "cut", "", 0, 0))
	wantStatus(t, err, codes.Internal, "shared memory region 'cut' is no longer backed by its object: it was truncated")
}
