package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/shm"
)

// shmHarness serves `simple`, the decoupled `repeat`, FP32 identities of
// any length (`identity`) and of 65536 elements (`identity_fixed`), and a
// gate model (which holds its requests until the test lets them go) with a
// shared-memory table the test fills from Go, guarded against truncation
// as cmd/inferd's.
func shmHarness(t *testing.T) (*harness, *shm.Manager, *servertest.Gate) {
	t.Helper()
	regions := shm.NewManager(nil)
	servertest.Must(t, regions.InstallGuard())
	return shmHarnessWith(t, regions)
}

// shmHarnessWith is shmHarness over regions.
func shmHarnessWith(t *testing.T, regions *shm.Manager) (*harness, *shm.Manager, *servertest.Gate) {
	t.Helper()
	gate := servertest.NewGate()
	t.Cleanup(func() {
		select {
		case <-gate.Release:
		default:
			close(gate.Release)
		}
	})
	repo := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": simpleModel(),
		"chain":  servertest.Chain("chain"),
		"repeat": {Config: servertest.RepeatConfig},
		"identity": {Config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1))},
		"identity_fixed": {Config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 65536 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 65536 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, 65536))},
		"gate": {Config: `max_batch_size: 8
backend: "gate"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]
`},
	})
	h := start(t, servertest.Options{Repo: repo, Backends: []core.Backend{gate}}, Options{SharedMemory: regions})
	return h, regions, gate
}

func shmParams(region string, offset, size int64) map[string]*pb.InferParameter {
	return map[string]*pb.InferParameter{
		"shared_memory_region":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: region}},
		"shared_memory_offset":    {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: offset}},
		"shared_memory_byte_size": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: size}},
	}
}

// TestSharedMemoryModelInfer: INPUT0 read from a region while INPUT1 takes
// the first raw entry (inputs in shared memory consume none), OUTPUT0
// written to a region while OUTPUT1 comes back raw: the response lists
// both outputs by name, datatype and shape, with an empty raw entry for
// the one in shared memory, as Triton's allocator leaves it.
func TestSharedMemoryModelInfer(t *testing.T) {
	h, regions, _ := shmHarness(t)
	a, b := simpleInputs()
	// INPUT0 at offset 64 of its region.
	shmtest.Region(t, regions, "in", append(make([]byte, 64), int32s(a)...))
	outKey := shmtest.Region(t, regions, "out", make([]byte, 80))
	req := simpleRequest(true)
	req.Inputs[0].Parameters = shmParams("in", 64, 64)
	req.RawInputContents = [][]byte{int32s(b)}
	req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams("out", 0, 80)}, {Name: "OUTPUT1"}}
	resp, err := h.client.ModelInfer(ctx(t), req)
	servertest.Must(t, err)
	if len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 || len(resp.RawOutputContents[0]) != 0 {
		t.Fatalf("outputs %v, raw %d", resp.Outputs, len(resp.RawOutputContents))
	}
	for i, o := range resp.Outputs {
		if o.Name != []string{"OUTPUT0", "OUTPUT1"}[i] || o.Datatype != "INT32" || !slices.Equal(o.Shape, []int64{1, 16}) || o.Parameters != nil {
			t.Fatalf("output %d: %v", i, o)
		}
	}
	sum, diff := make([]int32, 16), make([]int32, 16)
	for i := range a {
		sum[i], diff[i] = a[i]+b[i], a[i]-b[i]
	}
	if got := shmtest.Read(t, outKey); !bytes.Equal(got[:64], int32s(sum)) || !bytes.Equal(got[64:], make([]byte, 16)) {
		t.Fatalf("region out holds %v", decodeInt32s(got))
	}
	if !slices.Equal(decodeInt32s(resp.RawOutputContents[1]), diff) {
		t.Fatalf("OUTPUT1 %v", decodeInt32s(resp.RawOutputContents[1]))
	}
}

// TestSharedMemoryModelInferErrors: Triton's parameter checks
// (ParseSharedMemoryParams), region bounds and the output region too
// small, each with its code and text.
func TestSharedMemoryModelInferErrors(t *testing.T) {
	h, regions, _ := shmHarness(t)
	a, _ := simpleInputs()
	shmtest.Region(t, regions, "in", int32s(a))
	shmtest.Region(t, regions, "small", make([]byte, 32))
	str := func(s string) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: s}}
	}
	i64 := func(v int64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: v}}
	}
	u64 := func(v uint64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: v}}
	}
	cases := []struct {
		name   string
		input  map[string]*pb.InferParameter // INPUT0's parameters
		output map[string]*pb.InferParameter // OUTPUT0's, when set
		code   codes.Code
		msg    string
	}{
		{"region not a string", map[string]*pb.InferParameter{"shared_memory_region": i64(1), "shared_memory_byte_size": i64(64)}, nil,
			codes.InvalidArgument, "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param."},
		{"offset without region", map[string]*pb.InferParameter{"shared_memory_offset": i64(0)}, nil,
			codes.InvalidArgument, "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'"},
		{"byte size without region", map[string]*pb.InferParameter{"shared_memory_byte_size": i64(64)}, nil,
			codes.InvalidArgument, "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'"},
		{"offset not int64", map[string]*pb.InferParameter{"shared_memory_region": str("in"), "shared_memory_offset": u64(0), "shared_memory_byte_size": i64(64)}, nil,
			codes.InvalidArgument, "invalid value type for 'shared_memory_offset' parameter for tensor 'INPUT0', expected int64_param."},
		{"byte size not int64", map[string]*pb.InferParameter{"shared_memory_region": str("in"), "shared_memory_byte_size": u64(64)}, nil,
			codes.InvalidArgument, "invalid value type for 'shared_memory_byte_size' parameter for tensor 'INPUT0', expected int64_param."},
		{"byte size missing", map[string]*pb.InferParameter{"shared_memory_region": str("in")}, nil,
			codes.InvalidArgument, "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'INPUT0'"},
		{"unknown region", shmParams("nope", 0, 64), nil, codes.NotFound, "Unable to find shared memory region: 'nope'"},
		{"negative offset", shmParams("in", -1, 64), nil, codes.InvalidArgument, "Invalid offset for shared memory region: 'in'"},
		{"past the region", shmParams("in", 8, 64), nil, codes.InvalidArgument, "Invalid offset + byte size for shared memory region: 'in'"},
		{"negative byte size", shmParams("in", 8, -1), nil, codes.InvalidArgument,
			"Integer overflow detected: byte_size (18446744073709551615) + offset (8) exceeds maximum value (18446744073709551615) for region 'in'"},
		{"byte size not the tensor's", shmParams("in", 0, 60), nil, codes.InvalidArgument,
			"[request id: 7] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"},
		{"output region too small", shmParams("in", 0, 64), shmParams("small", 0, 32), codes.Internal,
			"shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results"},
		{"output region unknown", shmParams("in", 0, 64), shmParams("nope", 0, 64), codes.NotFound, "Unable to find shared memory region: 'nope'"},
		{"output region and classification", shmParams("in", 0, 64),
			map[string]*pb.InferParameter{"shared_memory_region": str("small"), "shared_memory_byte_size": i64(32), "classification": i64(1)},
			codes.InvalidArgument, "output can't set both 'shared_memory_region' and 'classification'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := simpleRequest(true)
			req.Inputs[0].Parameters = c.input
			if _, ok := c.input["shared_memory_region"]; ok {
				req.RawInputContents = req.RawInputContents[1:]
			}
			if c.output != nil {
				req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: c.output}}
			}
			_, err := h.client.ModelInfer(ctx(t), req)
			wantStatus(t, err, c.code, c.msg)
		})
	}
	t.Run("contents beside a region", func(t *testing.T) {
		req := simpleRequest(false)
		req.Inputs[0].Parameters = shmParams("in", 0, 64)
		_, err := h.client.ModelInfer(ctx(t), req)
		wantStatus(t, err, codes.InvalidArgument, "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'simple'")
	})
}

// TestSharedMemoryStream: ModelStreamInfer writes a request's outputs into
// its regions too. A decoupled model's responses each write the same
// region, as Triton's stream allocator does, and the region is held until
// the request's last response: an unregister meanwhile waits, and
// returns once the request is over.
func TestSharedMemoryStream(t *testing.T) {
	h, regions, _ := shmHarness(t)
	a, b := simpleInputs()
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)

	outKey := shmtest.Region(t, regions, "out", make([]byte, 64))
	req := simpleRequest(true)
	req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams("out", 0, 64)}}
	servertest.Must(t, st.Send(req))
	r, err := st.Recv()
	servertest.Must(t, err)
	if r.ErrorMessage != "" || len(r.InferResponse.Outputs) != 1 || len(r.InferResponse.RawOutputContents[0]) != 0 {
		t.Fatalf("%v", r)
	}
	sum := make([]int32, 16)
	for i := range a {
		sum[i] = a[i] + b[i]
	}
	if got := shmtest.Read(t, outKey); !bytes.Equal(got, int32s(sum)) {
		t.Fatalf("region holds %v", decodeInt32s(got))
	}
	shmtest.Unregister(t, regions, "out")

	// repeat sends one response per element, half a second apart.
	repKey := shmtest.Region(t, regions, "rep", make([]byte, 4))
	rr := repeatRequest("r", 3)
	rr.RawInputContents = [][]byte{int32s([]int32{10, 20, 30})}
	rr.Parameters = map[string]*pb.InferParameter{"wait_us": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 500000}}}
	rr.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUT", Parameters: shmParams("rep", 0, 4)}, {Name: "IDX"}}
	servertest.Must(t, st.Send(rr))
	unregisterDone := make(chan error, 1)
	for i := range 3 {
		r, err := st.Recv()
		servertest.Must(t, err)
		resp := r.InferResponse
		if r.ErrorMessage != "" || len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 {
			t.Fatalf("response %d: %v", i, r)
		}
		for j, o := range resp.Outputs {
			raw := decodeInt32s(resp.RawOutputContents[j])
			if (o.Name == "OUT" && len(raw) != 0) || (o.Name == "IDX" && !slices.Equal(raw, []int32{int32(i)})) {
				t.Fatalf("response %d: %v", i, r)
			}
		}
		if got := decodeInt32s(shmtest.Read(t, repKey)); !slices.Equal(got, []int32{int32(10 * (i + 1))}) {
			t.Fatalf("response %d: region holds %v", i, got)
		}
		switch i {
		case 0:
			go func() {
				c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				unregisterDone <- regions.Unregister(c, shm.System, "rep")
			}()
		case 1:
			// The request has a response to go: its region is held.
			select {
			case err := <-unregisterDone:
				t.Fatalf("unregister returned (%v) while the request held the region", err)
			default:
			}
		}
	}
	select {
	case err := <-unregisterDone:
		servertest.Must(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("unregister still waits after the request ended")
	}
	servertest.Must(t, st.CloseSend())
}

// TestSharedMemoryHoldsReleasedGRPC: a ModelInfer call whose output names a
// region lets it go however it ends: refused after the region was taken,
// failed in the core, or cancelled by its client while the model runs.
func TestSharedMemoryHoldsReleasedGRPC(t *testing.T) {
	h, regions, gate := shmHarness(t)
	out := []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams("out", 0, 64)}}
	cases := []struct {
		name string
		send func(t *testing.T)
	}{
		{"decode error after the region", func(t *testing.T) {
			req := simpleRequest(true)
			req.Outputs = append(slices.Clone(out), &pb.ModelInferRequest_InferRequestedOutputTensor{Name: "OUTPUT1", Parameters: shmParams("nope", 0, 64)})
			_, err := h.client.ModelInfer(ctx(t), req)
			wantStatus(t, err, codes.NotFound, "Unable to find shared memory region: 'nope'")
		}},
		{"core error", func(t *testing.T) {
			req := simpleRequest(true)
			req.Outputs = out
			req.Inputs[0].Shape = []int64{1, 15}
			_, err := h.client.ModelInfer(ctx(t), req)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument {
				t.Fatal(err)
			}
		}},
		{"client cancel", func(t *testing.T) {
			c, cancel := context.WithCancel(ctx(t))
			req := &pb.ModelInferRequest{ModelName: "gate", Outputs: out,
				Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}},
				RawInputContents: [][]byte{make([]byte, 64)}}
			done := make(chan error, 1)
			go func() {
				_, err := h.client.ModelInfer(c, req)
				done <- err
			}()
			select {
			case <-gate.Entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the request never reached the model")
			}
			cancel()
			if st := status.Convert(<-done); st.Code() != codes.Canceled {
				t.Fatal(st)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shmtest.Region(t, regions, "out", make([]byte, 64))
			c.send(t)
			shmtest.Unregister(t, regions, "out")
		})
	}
}

// TestSharedMemoryTruncatedGRPC: an object truncated under its region fails
// the call that touches it (INTERNAL), input or output side, and the
// server goes on serving.
func TestSharedMemoryTruncatedGRPC(t *testing.T) {
	t.Run("guarded", func(t *testing.T) { truncatedGRPC(t, true) })
	t.Run("copying", func(t *testing.T) { truncatedGRPC(t, false) })
}

// truncatedGRPC is TestSharedMemoryTruncatedGRPC with regions guarded or
// not (copied at decode and encode).
func truncatedGRPC(t *testing.T, guarded bool) {
	regions := shm.NewManager(nil)
	if guarded {
		servertest.Must(t, regions.InstallGuard())
	}
	h, regions, _ := shmHarnessWith(t, regions)
	a, _ := simpleInputs()
	for _, side := range []string{"input", "output"} {
		t.Run(side, func(t *testing.T) {
			key := shmtest.Region(t, regions, "cut", int32s(a))
			servertest.Must(t, os.Truncate(shmtest.Path(key), 0))
			req := simpleRequest(true)
			if side == "input" {
				req.Inputs[0].Parameters = shmParams("cut", 0, 64)
				req.RawInputContents = req.RawInputContents[1:]
			} else {
				req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams("cut", 0, 64)}}
			}
			_, err := h.client.ModelInfer(ctx(t), req)
			wantStatus(t, err, codes.Internal, "shared memory region 'cut' is no longer backed by its object: it was truncated")
			shmtest.Unregister(t, regions, "cut")
			resp, err := h.client.ModelInfer(ctx(t), simpleRequest(true))
			servertest.Must(t, err)
			checkSimple(t, resp)
		})
	}
}

// TestSharedMemoryEnsemble: an ensemble's input is read from a region and
// its output written into one, as for any model: shared memory is the
// frontend's business, the steps exchange ordinary tensors.
func TestSharedMemoryEnsemble(t *testing.T) {
	h, regions, _ := shmHarness(t)
	a, b := simpleInputs()
	shmtest.Region(t, regions, "in", int32s(a))
	outKey := shmtest.Region(t, regions, "out", make([]byte, 64))
	req := &pb.ModelInferRequest{ModelName: "chain",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "IN0", Datatype: "INT32", Shape: []int64{1, 16}, Parameters: shmParams("in", 0, 64)},
			{Name: "IN1", Datatype: "INT32", Shape: []int64{1, 16}}},
		RawInputContents: [][]byte{int32s(b)},
		Outputs:          []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUT0", Parameters: shmParams("out", 0, 64)}, {Name: "OUT1"}},
	}
	resp, err := h.client.ModelInfer(ctx(t), req)
	servertest.Must(t, err)
	twice := func(v []int32) []int32 {
		out := make([]int32, len(v))
		for i := range v {
			out[i] = 2 * v[i]
		}
		return out
	}
	if got := decodeInt32s(shmtest.Read(t, outKey)); !slices.Equal(got, twice(a)) {
		t.Fatalf("region out holds %v", got)
	}
	if len(resp.RawOutputContents) != 2 {
		t.Fatalf("%d raw outputs", len(resp.RawOutputContents))
	}
	for i, o := range resp.Outputs {
		raw := decodeInt32s(resp.RawOutputContents[i])
		if (o.Name == "OUT0" && len(raw) != 0) || (o.Name == "OUT1" && !slices.Equal(raw, twice(b))) {
			t.Fatalf("%s: %v", o.Name, raw)
		}
	}
	shmtest.Unregister(t, regions, "out")
}

// TestSharedMemoryRegisterUnderLoad: callers infer through their regions
// while their regions are unregistered and registered again under them:
// every call either finds its regions and answers right, or is refused as
// naming an unknown region; nothing hangs and the race detector sees
// nothing.
func TestSharedMemoryRegisterUnderLoad(t *testing.T) {
	h, regions, _ := shmHarness(t)
	a, b := simpleInputs()
	sum := make([]int32, 16)
	for i := range a {
		sum[i] = a[i] + b[i]
	}
	const callers, calls = 4, 25
	keys := make([][2]string, callers)
	for c := range callers {
		keys[c] = [2]string{shmtest.ObjectWith(t, int32s(a)), shmtest.ObjectWith(t, make([]byte, 64))}
	}
	register := func(c int) {
		// Already registered (not yet unregistered) is fine here.
		_ = regions.RegisterSystem(fmt.Sprintf("in%d", c), keys[c][0], 0, 64)
		_ = regions.RegisterSystem(fmt.Sprintf("out%d", c), keys[c][1], 0, 64)
	}
	for c := range callers {
		register(c)
	}
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		defer func() { churned <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := n % callers
			for _, name := range []string{fmt.Sprintf("in%d", c), fmt.Sprintf("out%d", c)} {
				uctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := regions.Unregister(uctx, shm.System, name)
				cancel()
				if err != nil {
					t.Errorf("unregister %s: %v", name, err)
					return
				}
			}
			register(c)
			n++
		}
	}()
	var wg sync.WaitGroup
	var answered, refused atomic.Int64
	errs := make(chan error, callers*calls)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				req := simpleRequest(true)
				req.Inputs[0].Parameters = shmParams(fmt.Sprintf("in%d", c), 0, 64)
				req.RawInputContents = req.RawInputContents[1:]
				req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams(fmt.Sprintf("out%d", c), 0, 64)}}
				_, err := h.client.ModelInfer(ctx(t), req)
				if st := status.Convert(err); err != nil && (st.Code() != codes.NotFound || !strings.HasPrefix(st.Message(), "Unable to find shared memory region: '")) {
					errs <- err
					continue
				}
				if err != nil {
					refused.Add(1)
					continue
				}
				answered.Add(1)
				// Only this caller's answers land in its output object.
				got := decodeInt32s(shmtest.Read(t, keys[c][1]))
				if !slices.Equal(got, sum) {
					errs <- fmt.Errorf("caller %d: region holds %v", c, got)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	n := <-churned
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d answered, %d refused, %d re-registrations", answered.Load(), refused.Load(), n)
	if answered.Load() == 0 {
		t.Error("no call found its regions")
	}
}

// identityRequest asks model for OUTPUT0 of n FP32 elements read from
// region in.
func identityRequest(model, in string, n int) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{
		ModelName: model,
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{int64(n)},
			Parameters: shmParams(in, 0, int64(4*n))}},
	}
}

// TestSharedMemoryInPlaceGRPC: with the guard, ONNX Runtime reads a large
// input straight from its region; an object truncated under it makes ORT's
// own (C) reads fault, which fails that request with the truncation error
// while the server lives and other regions work, and the truncated region
// fails every later request until it is unregistered.
func TestSharedMemoryInPlaceGRPC(t *testing.T) {
	h, regions, _ := shmHarness(t)
	const n = 1 << 16 // 256 KiB: wrapped in place, above the instance's small-tensor cache
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, model := range []string{"identity", "identity_fixed"} {
		t.Run(model, func(t *testing.T) {
			shmtest.Region(t, regions, "in", data)
			defer shmtest.Unregister(t, regions, "in")
			resp, err := h.client.ModelInfer(ctx(t), identityRequest(model, "in", n))
			servertest.Must(t, err)
			if len(resp.RawOutputContents) != 1 || !bytes.Equal(resp.RawOutputContents[0], data) {
				t.Fatalf("OUTPUT0 differs from the region's input")
			}

			key := shmtest.Region(t, regions, "cut", data)
			servertest.Must(t, os.Truncate(shmtest.Path(key), 4096))
			const msg = "shared memory region 'cut' is no longer backed by its object: it was truncated"
			_, err = h.client.ModelInfer(ctx(t), identityRequest(model, "cut", n))
			wantStatus(t, err, codes.Internal, msg)
			_, err = h.client.ModelInfer(ctx(t), identityRequest(model, "cut", 16))
			wantStatus(t, err, codes.Internal, msg)

			resp, err = h.client.ModelInfer(ctx(t), identityRequest(model, "in", n))
			servertest.Must(t, err)
			if !bytes.Equal(resp.RawOutputContents[0], data) {
				t.Fatal("another region after the truncation: OUTPUT0 differs")
			}
			shmtest.Unregister(t, regions, "cut")
			servertest.Must(t, os.Truncate(shmtest.Path(key), int64(len(data))))
			shmRegion2(t, regions, "cut", key, len(data))
			if _, err := h.client.ModelInfer(ctx(t), identityRequest(model, "cut", n)); err != nil {
				t.Fatalf("registered again: %v", err)
			}
			shmtest.Unregister(t, regions, "cut")
		})
	}
}

// shmRegion2 registers the existing object key of size bytes as name.
func shmRegion2(t *testing.T, regions *shm.Manager, name, key string, size int) {
	t.Helper()
	servertest.Must(t, regions.RegisterSystem(name, key, 0, uint64(size)))
}
