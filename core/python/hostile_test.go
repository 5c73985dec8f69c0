package python

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/fuzzshape"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// hostileWorker starts the identity testdata model's worker, initialized,
// without a server: the test speaks the frame protocol to it directly.
func hostileWorker(t *testing.T, arena int) *worker {
	t.Helper()
	return modelWorker(t, "identity", arena)
}

// modelWorker starts the worker of testdata model name, initialized, as
// instance name_0, without a server.
func modelWorker(t *testing.T, name string, arena int) *worker {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "models", name))
	servertest.Must(t, err)
	text, err := os.ReadFile(filepath.Join(dir, "config.pbtxt"))
	servertest.Must(t, err)
	cfg, err := modelconfig.Parse(text)
	servertest.Must(t, err)
	b := New(Options{Executable: servertest.Python(t), ArenaBytes: arena, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = b.Close() })
	in := &instance{b: b, name: name + "_0", model: name, open: map[int64]*openRequest{},
		spec: core.InstanceSpec{VersionFiles: core.VersionFiles{ModelName: name, Version: 1, ModelDir: dir, VersionDir: filepath.Join(dir, "1")},
			Name: name + "_0", Config: cfg}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := in.spawn(ctx)
	servertest.Must(t, err)
	return w
}

// executeRaw sends one execute of reqs, their descriptors as given (the
// blob area is out), and returns the decoded answer.
func executeRaw(t *testing.T, w *worker, reqs []wireRequest, out *frameOut) executeDone {
	t.Helper()
	done, _ := executeFrame(t, w, reqs, out)
	return done
}

// executeFrame is executeRaw, also returning the reply's frame, which the
// responses' tensor descriptors index.
func executeFrame(t *testing.T, w *worker, reqs []wireRequest, out *frameOut) (executeDone, frameIn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reply, err := w.exchange(ctx, true, func(seq int64) any {
		return rawHeader(appendExecute(nil, seq, 0, 0, reqs))
	}, out)
	if err != nil {
		t.Fatalf("execute: %v (the worker died)", err)
	}
	var done executeDone
	servertest.Must(t, decodeExecuteDone(reply, &done))
	return done, reply
}

func fp32Bytes(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestWorkerSurvivesMalformedTensors: a request whose tensor description
// is malformed (its shape does not match its bytes, an unknown datatype,
// negative or huge dims, bytes outside the frame) fails alone, with an
// error response; the good requests of the same batch are answered and the
// worker lives on.
func TestWorkerSurvivesMalformedTensors(t *testing.T) {
	w := hostileWorker(t, 0)
	good := func(out *frameOut, rid int64, v float32) wireRequest {
		d := out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, 2}, Data: fp32Bytes(v, v+1)})
		return wireRequest{RID: rid, CorrelationID: uint64(0), Parameters: "{}", Requested: []string{"OUTPUT0"}, Inputs: []tensorDesc{d}}
	}
	cases := []struct {
		name string
		desc func(out *frameOut) tensorDesc
		want string
	}{
		{"2^62 FP32 elements over no bytes", func(out *frameOut) tensorDesc {
			return tensorDesc{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1 << 62}, Off: 0, Len: 0}
		}, "INPUT0"},
		{"shape larger than the bytes", func(out *frameOut) tensorDesc {
			d := out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, 3}, Data: fp32Bytes(1, 2)})
			return d
		}, "INPUT0"},
		{"shape smaller than the bytes", func(out *frameOut) tensorDesc {
			return out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1}, Data: fp32Bytes(1, 2)})
		}, "INPUT0"},
		{"unknown datatype", func(out *frameOut) tensorDesc {
			d := out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1}, Data: fp32Bytes(1)})
			d.Datatype = "FP128"
			return d
		}, "FP128"},
		{"negative dim", func(out *frameOut) tensorDesc {
			d := out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1}, Data: fp32Bytes(1)})
			d.Shape = []int64{-1}
			return d
		}, "INPUT0"},
		{"negative dims whose product fits", func(out *frameOut) tensorDesc {
			d := out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1}, Data: fp32Bytes(1)})
			d.Shape = []int64{-1, -1}
			return d
		}, "INPUT0"},
		// The core lets this through (no elements); numpy cannot shape it.
		{"huge dims whose product is 0", func(out *frameOut) tensorDesc {
			return tensorDesc{Name: "INPUT0", Datatype: "FP32", Shape: []int64{math.MaxInt64, math.MaxInt64, 0}}
		}, "INPUT0"},
		{"bytes outside the frame", func(out *frameOut) tensorDesc {
			return tensorDesc{Name: "INPUT0", Datatype: "FP32", Shape: []int64{4}, Off: 1 << 40, Len: 16}
		}, "INPUT0"},
		{"bytes outside the arena", func(out *frameOut) tensorDesc {
			return tensorDesc{Name: "INPUT0", Datatype: "FP32", Shape: []int64{4}, Off: 0, Len: 16, Arena: true}
		}, "INPUT0"},
		{"BYTES framing past the end", func(out *frameOut) tensorDesc {
			return out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeBytes, Shape: []int64{1}, Data: []byte{9, 0, 0, 0, 'a'}})
		}, "INPUT0"},
		{"BYTES count not the shape's", func(out *frameOut) tensorDesc {
			return out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeBytes, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 'a'}})
		}, "INPUT0"},
		{"truncated BYTES length", func(out *frameOut) tensorDesc {
			return out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeBytes, Shape: []int64{1}, Data: []byte{1, 0}})
		}, "INPUT0"},
		{"BF16 of the wrong size", func(out *frameOut) tensorDesc {
			return out.add(&core.Tensor{Name: "INPUT0", DataType: core.TypeBF16, Shape: []int64{2}, Data: []byte{1, 2}})
		}, "INPUT0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &frameOut{}
			first := good(out, 1, 1)
			bad := wireRequest{RID: 2, CorrelationID: uint64(0), Parameters: "{}", Requested: []string{}, Inputs: []tensorDesc{c.desc(out)}}
			last := good(out, 3, 5)
			done := executeRaw(t, w, []wireRequest{first, bad, last}, out)
			if done.Error != "" || len(done.Responses) != 3 {
				t.Fatalf("batch error %q, %d responses: want one per request", done.Error, len(done.Responses))
			}
			if r := done.Responses[1]; r == nil || r.Error == nil || !strings.Contains(r.Error.Message, c.want) {
				t.Fatalf("the malformed request: %+v, want an error naming %q", r, c.want)
			} else if !strings.HasPrefix(r.Error.Message, "Failed to process the request(s) for model 'identity_0', message: ") ||
				core.Code(r.Error.Code) != core.CodeInvalidArg {
				t.Fatalf("the malformed request's error: %d %q", r.Error.Code, r.Error.Message)
			}
			for _, i := range []int{0, 2} {
				r := done.Responses[i]
				if r == nil || r.Error != nil || len(r.Outputs) != 1 || r.Outputs[0].Len != 8 {
					t.Fatalf("good request %d: %+v", i, r)
				}
			}
		})
	}
	// A batch of only a malformed request never reaches execute.
	out := &frameOut{}
	bad := wireRequest{RID: 9, CorrelationID: uint64(0), Parameters: "{}", Requested: []string{}, Inputs: []tensorDesc{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{3}}}}
	if done := executeRaw(t, w, []wireRequest{bad}, out); len(done.Responses) != 1 || done.Responses[0] == nil || done.Responses[0].Error == nil {
		t.Fatalf("a lone malformed request: %+v", done)
	}
	if err := w.err(); err != nil {
		t.Fatalf("the worker died: %v", err)
	}
}

// wireTensorHelper is one Python process running
// testdata/wire_tensor_fuzz.py for a whole fuzz run.
type wireTensorHelper struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

func (h *wireTensorHelper) build(desc tensorDesc, frame []byte) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	js, err := json.Marshal(desc)
	if err != nil {
		return "", err
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(js)))
	msg = append(msg, js...)
	msg = binary.LittleEndian.AppendUint32(msg, uint32(len(frame)))
	msg = append(msg, frame...)
	if _, err := h.in.Write(msg); err != nil {
		return "", err
	}
	line, err := h.out.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// FuzzWireTensor builds tensors from descriptors as the worker does
// (triton_python_backend_utils._wire_tensor, in the real interpreter, one
// process for the whole run): any datatype name, shape, offset and length
// over any frame is either refused with TritonModelException or built with
// exactly the descriptor's shape and bytes; no other exception (which
// would have ended the worker before) escapes.
func FuzzWireTensor(f *testing.F) {
	f.Add("FP32", fuzzshape.Bytes(1<<62), int64(0), int64(0), []byte{})
	f.Add("FP32", fuzzshape.Bytes(1, 2), int64(0), int64(8), make([]byte, 8))
	f.Add("FP32", fuzzshape.Bytes(-1, -2), int64(0), int64(8), make([]byte, 8))
	f.Add("FP32", fuzzshape.Bytes(math.MaxInt64, math.MaxInt64, 0), int64(0), int64(0), []byte{})
	f.Add("BYTES", fuzzshape.Bytes(2), int64(0), int64(9), []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0})
	f.Add("BYTES", fuzzshape.Bytes(1), int64(0), int64(5), []byte{9, 0, 0, 0, 'a'})
	f.Add("BF16", fuzzshape.Bytes(2), int64(1), int64(4), make([]byte, 5))
	f.Add("FP128", fuzzshape.Bytes(1), int64(0), int64(4), make([]byte, 4))
	f.Add("INT8", fuzzshape.Bytes(), int64(0), int64(1), []byte{7})
	f.Add("UINT64", fuzzshape.Bytes(1), int64(-8), int64(8), make([]byte, 8))
	cmd := exec.Command(servertest.Python(f), filepath.Join("testdata", "wire_tensor_fuzz.py"))
	cmd.Env = append(os.Environ(), "PYTHONPATH=shim")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	servertest.Must(f, err)
	out, err := cmd.StdoutPipe()
	servertest.Must(f, err)
	servertest.Must(f, cmd.Start())
	f.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	h := &wireTensorHelper{in: in, out: bufio.NewReader(out)}
	f.Fuzz(func(t *testing.T, datatype string, dims []byte, off, length int64, frame []byte) {
		shape := fuzzshape.Shape(dims)
		if shape == nil {
			shape = []int64{}
		}
		desc := tensorDesc{Name: "x", Datatype: datatype, Shape: shape, Off: int(off), Len: int(length)}
		got, err := h.build(desc, frame)
		if err != nil {
			t.Fatalf("the Python helper: %v", err)
		}
		switch {
		case strings.HasPrefix(got, "err "):
		case strings.HasPrefix(got, "ok "):
			n, err := strconv.ParseInt(got[3:], 10, 64)
			if err != nil || n != length || off < 0 || length < 0 || off+length > int64(len(frame)) {
				t.Fatalf("%+v over %d bytes: built %q", desc, len(frame), got)
			}
		default:
			t.Fatalf("%+v over %d bytes: %s", desc, len(frame), got)
		}
	})
}
