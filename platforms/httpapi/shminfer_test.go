package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/shm"
)

// shmModels are the models of the shared-memory tests: an FP32 identity of
// four elements, 128 KiB ones, a BYTES identity, the same FP32 identity behind a dynamic
// batcher, and one on the gate backend, which holds its requests until
// the test lets them go.
func shmModels(t testing.TB) map[string]testModel {
	id4 := onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4))
	return map[string]testModel{
		"id4": {config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, onnx: id4},
		"batched": {config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 50000 }
`, onnx: id4},
		"id_bytes": standardModels(t)["id_bytes"],
		// 128 KiB FP32 identities (above ONNX Runtime's small-tensor
		// cache): an output shape known after the run, and before it.
		"identity": {config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`, onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1))},
		"identity_fixed": {config: `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 32768 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 32768 ] } ]
`, onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, 32768))},
		"gate": {config: `max_batch_size: 8
backend: "gate"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`, files: map[string]string{"1/version": ""}},
	}
}

// shmServer serves shmModels with a shared-memory table the test fills
// from Go, as a client registering its regions would.
func shmServer(t *testing.T) (base string, regions *shm.Manager, gate *servertest.Gate) {
	t.Helper()
	regions = shm.NewManager(nil)
	must(t, regions.InstallGuard()) // as cmd/inferd does: regions read and written in place
	gate = servertest.NewGate()
	t.Cleanup(func() {
		select {
		case <-gate.Release:
		default:
			close(gate.Release)
		}
	})
	base, _ = startServer(t, writeRepo(t, shmModels(t)), serverOpts{
		api: Options{SharedMemory: regions}, backends: []core.Backend{gate}})
	return base, regions, gate
}

func fp32s(vals ...float32) []byte {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// shmParams is the parameters object placing a tensor in a region.
func shmParams(region string, offset, size int) string {
	return fmt.Sprintf(`{"shared_memory_region":%q,"shared_memory_offset":%d,"shared_memory_byte_size":%d}`, region, offset, size)
}

// shmRequest is an id4-shaped request: the input in region in (data
// inline when in is ""), the output in region out (JSON when out is "").
func shmRequest(in string, inOff, inSize int, out string, outSize int) string {
	input := `{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[9,8,7,6]}`
	if in != "" {
		input = `{"name":"INPUT0","datatype":"FP32","shape":[1,4],"parameters":` + shmParams(in, inOff, inSize) + `}`
	}
	output := `{"name":"OUTPUT0"}`
	if out != "" {
		output = `{"name":"OUTPUT0","parameters":` + shmParams(out, 0, outSize) + `}`
	}
	return `{"inputs":[` + input + `],"outputs":[` + output + `]}`
}

// TestSharedMemoryInfer: inputs read from and outputs written to regions,
// with Triton's answers: an output in a region is described by name,
// datatype and shape only; every misuse gets Triton's text and status.
func TestSharedMemoryInfer(t *testing.T) {
	base, regions, _ := shmServer(t)
	shmtest.Region(t, regions, "in", fp32s(1, 2, 3, 4))
	shmtest.Region(t, regions, "in2", append(fp32s(0, 0, 0, 0), fp32s(5, 6, 7, 8)...))
	shmtest.Region(t, regions, "small", make([]byte, 8))
	bytesIn := core.AppendBytesElement(nil, []byte("hello"))
	shmtest.Region(t, regions, "bytes_in", bytesIn)
	url := base + "/v2/models/id4/infer"
	header := `{"model_name":"id4","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4]}]}`
	cases := []struct {
		name, model, body string
		status            int
		want              string // the whole body
		out               []byte // what region "out" holds afterwards
	}{
		{name: "in and out", body: shmRequest("in", 0, 16, "out", 16), status: 200, want: header, out: fp32s(1, 2, 3, 4)},
		{name: "offset, out JSON", body: shmRequest("in2", 16, 16, "", 0), status: 200,
			want: `{"model_name":"id4","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4],"data":[5.0,6.0,7.0,8.0]}]}`},
		{name: "JSON in, out larger than the output", body: shmRequest("", 0, 0, "out", 32), status: 200, want: header, out: fp32s(9, 8, 7, 6)},
		{name: "output region too small", body: shmRequest("in", 0, 16, "small", 8), status: 500,
			want: `{"error":"shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at least 16 bytes to hold the results"}`},
		{name: "unknown input region", body: shmRequest("nope", 0, 16, "", 0), status: 404,
			want: `{"error":"Unable to find shared memory region: 'nope'"}`},
		{name: "unknown output region", body: shmRequest("in", 0, 16, "nope", 16), status: 404,
			want: `{"error":"Unable to find shared memory region: 'nope'"}`},
		{name: "offset past the region", body: shmRequest("in", 16, 4, "", 0), status: 400,
			want: `{"error":"Invalid offset for shared memory region: 'in'"}`},
		{name: "offset and size past the region", body: shmRequest("in", 4, 16, "", 0), status: 400,
			want: `{"error":"Invalid offset + byte size for shared memory region: 'in'"}`},
		{name: "size and offset overflow", body: strings.Replace(shmRequest("in", 4, 0, "", 0), `"shared_memory_byte_size":0`, `"shared_memory_byte_size":18446744073709551615`, 1), status: 400,
			want: `{"error":"Integer overflow detected: byte_size (18446744073709551615) + offset (4) exceeds maximum value (18446744073709551615) for region 'in'"}`},
		{name: "byte size not the tensor's", body: shmRequest("in", 0, 12, "", 0), status: 400,
			want: `{"error":"[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'id4'. Expected 16, got 12"}`},
		{name: "output in a region and binary", status: 400,
			body: `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"OUTPUT0","parameters":{"shared_memory_region":"out","shared_memory_byte_size":16,"binary_data":true}}]}`,
			want: `{"error":"Output can't set both 'shared_memory_region' and 'binary_data'"}`},
		{name: "BYTES in and out", model: "id_bytes", status: 200,
			body: `{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"parameters":` + shmParams("bytes_in", 0, len(bytesIn)) + `}],` +
				`"outputs":[{"name":"OUTPUT0","parameters":` + shmParams("out", 0, 32) + `}]}`,
			want: `{"model_name":"id_bytes","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[1,1]}]}`,
			out:  bytesIn},
		{name: "BYTES output region too small", model: "id_bytes", status: 500,
			body: `{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"parameters":` + shmParams("bytes_in", 0, len(bytesIn)) + `}],` +
				`"outputs":[{"name":"OUTPUT0","parameters":` + shmParams("small", 0, 8) + `}]}`,
			want: `{"error":"shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at least 9 bytes to hold the results"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outKey := shmtest.Region(t, regions, "out", make([]byte, 32))
			defer func() { must(t, regions.Unregister(context.Background(), shm.System, "out")) }()
			u := url
			if c.model != "" {
				u = base + "/v2/models/" + c.model + "/infer"
			}
			status, h, body := post(t, u, c.body)
			if status != c.status || string(body) != c.want {
				t.Fatalf("got %d %s, want %d %s", status, body, c.status, c.want)
			}
			if status == 200 && h.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", h.Get("Content-Type"))
			}
			got := shmtest.Read(t, outKey)
			want := append(append([]byte{}, c.out...), make([]byte, 32-len(c.out))...)
			if !bytes.Equal(got, want) {
				t.Errorf("region out holds % x, want % x", got, want)
			}
		})
	}
}

// TestSharedMemoryParameterErrors: malformed shared-memory parameters get
// the decoder's parse errors, before any region is looked up (500, as
// Triton's TritonJson errors).
func TestSharedMemoryParameterErrors(t *testing.T) {
	base, _, _ := shmServer(t)
	for _, c := range []struct{ params, want string }{
		{`{"shared_memory_region":1,"shared_memory_byte_size":16}`, "Unable to parse 'shared_memory_region'"},
		{`{"shared_memory_region":"in","shared_memory_offset":-1,"shared_memory_byte_size":16}`, "Unable to parse 'shared_memory_offset'"},
		{`{"shared_memory_region":"in","shared_memory_byte_size":"16"}`, "Unable to parse 'shared_memory_byte_size'"},
	} {
		body := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"parameters":` + c.params + `}]}`
		status, _, got := post(t, base+"/v2/models/id4/infer", body)
		if status != 500 || !strings.HasPrefix(string(got), `{"error":"`+c.want+": attempt to access JSON non-") {
			t.Errorf("%s: got %d %s, want 500 %s", c.params, status, got, c.want)
		}
	}
}

// TestSharedMemoryOff: without a table (client shared memory off) a tensor
// naming a region finds none, as before the extension.
func TestSharedMemoryOff(t *testing.T) {
	models := shmModels(t)
	delete(models, "gate")
	base, _ := startServer(t, writeRepo(t, models), serverOpts{})
	for _, body := range []string{shmRequest("in", 0, 16, "", 0), shmRequest("", 0, 0, "out", 16)} {
		status, _, got := post(t, base+"/v2/models/id4/infer", body)
		if status != 404 || !strings.Contains(string(got), "Unable to find shared memory region: '") {
			t.Errorf("got %d %s", status, got)
		}
	}
}

// TestSharedMemoryHoldsReleased: whichever way a request that names an
// output region ends (answered, refused by the decoder after the region
// was taken, failed in the core, cancelled by its client), the region is
// let go, so unregistering it returns.
func TestSharedMemoryHoldsReleased(t *testing.T) {
	base, regions, gate := shmServer(t)
	shmtest.Region(t, regions, "in", fp32s(1, 2, 3, 4))
	url := base + "/v2/models/id4/infer"
	cases := []struct {
		name string
		send func(t *testing.T)
	}{
		{"answered", func(t *testing.T) {
			if status, _, body := post(t, url, shmRequest("in", 0, 16, "out", 16)); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
		}},
		{"decode error after the region", func(t *testing.T) {
			body := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[` +
				`{"name":"OUTPUT0","parameters":` + shmParams("out", 0, 16) + `},{"name":"OUTPUT0"}]}`
			if status, _, body := post(t, url, body); status != 400 || !strings.Contains(string(body), "already exists in request") {
				t.Fatalf("%d %s", status, body)
			}
		}},
		{"core error", func(t *testing.T) {
			body := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,5],"data":[1,2,3,4,5]}],"outputs":[` +
				`{"name":"OUTPUT0","parameters":` + shmParams("out", 0, 16) + `}]}`
			if status, _, body := post(t, url, body); status != 400 || !strings.Contains(string(body), "unexpected shape for input 'INPUT0'") {
				t.Fatalf("%d %s", status, body)
			}
		}},
		{"client cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/models/gate/infer", strings.NewReader(shmRequest("in", 0, 16, "out", 16)))
			must(t, err)
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			select {
			case <-gate.Entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the request never reached the model")
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the cancelled request was answered")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shmtest.Region(t, regions, "out", make([]byte, 16))
			c.send(t)
			shmtest.Unregister(t, regions, "out")
		})
	}
}

// TestSharedMemoryUnregisterWaits: a request in flight keeps its output
// region mapped while an unregister waits for it; the unregister returns
// once the request has ended, and the output is in the region.
func TestSharedMemoryUnregisterWaits(t *testing.T) {
	base, regions, gate := shmServer(t)
	shmtest.Region(t, regions, "in", fp32s(1, 2, 3, 4))
	outKey := shmtest.Region(t, regions, "out", make([]byte, 16))
	answered := make(chan []byte, 1)
	go func() {
		resp, err := http.Post(base+"/v2/models/gate/infer", "application/json", strings.NewReader(shmRequest("in", 0, 16, "out", 16)))
		if err != nil {
			answered <- []byte(err.Error())
			return
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		answered <- b.Bytes()
	}()
	select {
	case <-gate.Entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the request never reached the model")
	}
	unregisterDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		unregisterDone <- regions.Unregister(ctx, shm.System, "out")
	}()
	// The name is free at once; the mapping waits for the request.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := regions.Status(shm.System, "out"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("region out is still registered")
		}
	}
	select {
	case err := <-unregisterDone:
		t.Fatalf("unregister returned (%v) while a request held the region", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate.Release)
	body := <-answered
	if want := `{"model_name":"gate","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4]}]}`; string(body) != want {
		t.Fatalf("answer %s", body)
	}
	if err := <-unregisterDone; err != nil {
		t.Fatal(err)
	}
	if got := shmtest.Read(t, outKey); !bytes.Equal(got, fp32s(1, 2, 3, 4)) {
		t.Fatalf("region holds % x", got)
	}
}

// TestSharedMemoryTruncated: an object truncated under its registered
// region fails the request that touches it, input or output side, with an
// error (500: the server's memory failed it, not the request's form), and
// the server goes on serving: Triton itself dies of SIGBUS there.
func TestSharedMemoryTruncated(t *testing.T) {
	base, regions, _ := shmServer(t)
	shmtest.Region(t, regions, "in", fp32s(1, 2, 3, 4))
	url := base + "/v2/models/id4/infer"
	for _, c := range []struct {
		name   string
		body   func(victim string) string
		victim string
	}{
		{"input", func(v string) string { return shmRequest(v, 0, 16, "", 0) }, "cut_in"},
		{"output", func(v string) string { return shmRequest("in", 0, 16, v, 16) }, "cut_out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := shmtest.Region(t, regions, c.victim, fp32s(1, 2, 3, 4))
			must(t, os.Truncate(shmtest.Path(key), 0))
			status, _, body := post(t, url, c.body(c.victim))
			want := `{"error":"shared memory region '` + c.victim + `' is no longer backed by its object: it was truncated"}`
			if status != 500 || string(body) != want {
				t.Fatalf("got %d %s, want 500 %s", status, body, want)
			}
			shmtest.Region(t, regions, "next", make([]byte, 16))
			if status, _, body := post(t, url, shmRequest("in", 0, 16, "next", 16)); status != 200 {
				t.Fatalf("the next request: %d %s", status, body)
			}
			shmtest.Unregister(t, regions, c.victim)
			shmtest.Unregister(t, regions, "next")
		})
	}
}

// TestSharedMemoryDynamicBatching: requests through regions and requests
// with their data inline are batched together and each gets its own
// answer.
func TestSharedMemoryDynamicBatching(t *testing.T) {
	base, regions, _ := shmServer(t)
	const n = 16
	keys := make([]string, n)
	for i := 0; i < n; i += 2 {
		shmtest.Region(t, regions, fmt.Sprintf("in%d", i), fp32s(float32(i), float32(i)+0.5, -float32(i), 1))
		keys[i] = shmtest.Region(t, regions, fmt.Sprintf("out%d", i), make([]byte, 16))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := []float32{float32(i), float32(i) + 0.5, -float32(i), 1}
			var body string
			if i%2 == 0 {
				body = shmRequest(fmt.Sprintf("in%d", i), 0, 16, fmt.Sprintf("out%d", i), 16)
			} else {
				body = fmt.Sprintf(`{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[%v,%v,%v,%v]}]}`, want[0], want[1], want[2], want[3])
			}
			resp, err := http.Post(base+"/v2/models/batched/infer", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var r struct {
				Outputs []struct {
					Shape []int64
					Data  []float32
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || len(r.Outputs) != 1 {
				errs <- fmt.Errorf("request %d: %d %v %+v", i, resp.StatusCode, err, r)
				return
			}
			got := r.Outputs[0].Data
			if i%2 == 0 {
				if r.Outputs[0].Data != nil {
					errs <- fmt.Errorf("request %d: data %v beside the region", i, got)
					return
				}
				got = nil
				b, err := os.ReadFile(shmtest.Path(keys[i]))
				if err != nil {
					errs <- err
					return
				}
				for j := 0; j < 16; j += 4 {
					got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				errs <- fmt.Errorf("request %d: got %v, want %v", i, got, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSharedMemoryDeviceRegions: inputs and outputs in CUDA regions take
// the same path as system ones up to the device copies, which a stand-in
// device does in host memory here. A region on a device the model's
// instances cannot read (a GPU, for this CPU instance) is copied to the
// host first, and the output copied in from the host; one they can read
// (-1, host memory, standing in for the GPU of a KIND_GPU instance) is read
// and written by ONNX Runtime by address, never copied.
func TestSharedMemoryDeviceRegions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    string
		device   int64
		inCopies int32
		writes   int32
	}{
		{"copied to the host", "id4", 0, 1, 1},
		{"read in place", "id4", -1, 0, 0},
		{"batched: copied to the host", "batched", -1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &shmtest.Device{Mem: map[byte][]byte{1: fp32s(1, 2, 3, 4), 2: make([]byte, 16)}}
			regions := shm.NewManager(dev)
			base, _ := startServer(t, writeRepo(t, map[string]testModel{tc.model: shmModels(t)[tc.model]}), serverOpts{api: Options{SharedMemory: regions}})
			must(t, regions.RegisterCUDA("gin", shmtest.Handle(1), tc.device, 16))
			must(t, regions.RegisterCUDA("gout", shmtest.Handle(2), tc.device, 16))
			status, _, body := post(t, base+"/v2/models/"+tc.model+"/infer", shmRequest("gin", 0, 16, "gout", 16))
			if want := `{"model_name":"` + tc.model + `","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4]}]}`; status != 200 || string(body) != want {
				t.Fatalf("%d %s", status, body)
			}
			if !bytes.Equal(dev.Mem[2], fp32s(1, 2, 3, 4)) {
				t.Fatalf("device output % x", dev.Mem[2])
			}
			if got := dev.CopiesOut.Load(); got != tc.inCopies {
				t.Fatalf("input region copied to the host %d times, want %d", got, tc.inCopies)
			}
			if got := dev.CopiesIn.Load(); got != tc.writes {
				t.Fatalf("output region written from the host %d times, want %d", got, tc.writes)
			}
		})
	}
}
