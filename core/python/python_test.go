package python_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
)

// logBuffer collects the server log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type env struct {
	srv     *core.Server
	backend *python.Backend
	root    string
	log     *logBuffer
}

// copyModels copies testdata models into a fresh repository.
func copyModels(t testing.TB, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, name := range names {
		src := filepath.Join("testdata", "models", name)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			dst := filepath.Join(root, name, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		servertest.Must(t, err)
	}
	return root
}

type options struct {
	mode           core.ControlMode
	verbose        int
	allowFails     bool
	keepDead       bool       // restart-dead-workers=false
	verboseNow     func() int // the run-time verbose level, if set
	noArena        bool
	noAutoComplete bool
	stubTimeout    time.Duration // 0: the backend's default
}

func start(t testing.TB, o options, names ...string) *env {
	t.Helper()
	e := &env{root: copyModels(t, names...), log: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	arena := python.DefaultArenaBytes
	if o.noArena {
		arena = 0
	}
	b := python.New(python.Options{Executable: servertest.Python(t), LogVerbose: o.verbose, Verbose: o.verboseNow, KeepDead: o.keepDead, ArenaBytes: arena, StubTimeout: o.stubTimeout, Logger: log})
	t.Cleanup(func() { _ = b.Close() })
	e.backend = b
	e.srv = servertest.Start(t, servertest.Options{Repo: e.root, Mode: o.mode, AllowFailures: o.allowFails, Backends: []core.Backend{b}, Logger: log, NoAutoComplete: o.noAutoComplete})
	return e
}

func fp32(name string, shape []int64, vals ...float32) *core.Tensor {
	data := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	return &core.Tensor{Name: name, DataType: core.TypeFP32, Shape: shape, Data: data}
}

func floats(t *core.Tensor) []float32 {
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out
}

func bytesTensor(name string, vals ...string) *core.Tensor {
	var data []byte
	for _, v := range vals {
		data = binary.LittleEndian.AppendUint32(data, uint32(len(v)))
		data = append(data, v...)
	}
	return &core.Tensor{Name: name, DataType: core.TypeBytes, Shape: []int64{int64(len(vals))}, Data: data}
}

func strings1(t *testing.T, tensor *core.Tensor) []string {
	t.Helper()
	elems, err := core.BytesElements(tensor.Data)
	servertest.Must(t, err)
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = string(e)
	}
	return out
}

func (e *env) infer(req *core.InferRequest) (*core.InferResponse, error) {
	req.ModelVersion = core.LatestVersion
	return e.srv.Infer(context.Background(), req)
}

func output(resp *core.InferResponse, name string) *core.Tensor {
	for _, o := range resp.Outputs {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// TestAddSubAndInitArgs: a model.py serves from its own process and
// initialize receives Triton's seven string arguments (as
// triton-inference-server/server qa/python_models/init_args/model.py checks).
func TestAddSubAndInitArgs(t *testing.T) {
	e := start(t, options{}, "add_sub", "init_args")
	resp, err := e.infer(&core.InferRequest{ModelName: "add_sub",
		Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 4}, 1, 2, 3, 4), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}})
	servertest.Must(t, err)
	if got := floats(output(resp, "OUTPUT0")); got[3] != 5 || floats(output(resp, "OUTPUT1"))[3] != 3 {
		t.Fatalf("add_sub: %v %v", got, floats(output(resp, "OUTPUT1")))
	}
	resp, err = e.infer(&core.InferRequest{ModelName: "init_args", ID: "r1",
		Parameters:  map[string]any{"my_param": "x", "n": int64(3)},
		Correlation: core.Correlation{ID: 7, Flags: core.FlagSequenceStart},
		Inputs:      []*core.Tensor{fp32("IN", []int64{1}, 1)}})
	servertest.Must(t, err)
	var args map[string]string
	servertest.Must(t, json.Unmarshal([]byte(strings1(t, output(resp, "ARGS"))[0]), &args))
	if len(args) != 7 || args["model_instance_name"] != "init_args_0_0" || args["model_instance_kind"] != "CPU" ||
		args["model_instance_device_id"] != "0" || args["model_version"] != "1" || args["model_name"] != "init_args" ||
		args["model_repository"] != filepath.Join(e.root, "init_args") {
		t.Fatalf("initialize args: %v", args)
	}
	var cfg struct {
		Parameters map[string]map[string]string `json:"parameters"`
		Input      []struct {
			DataType string `json:"data_type"`
		} `json:"input"`
	}
	servertest.Must(t, json.Unmarshal([]byte(args["model_config"]), &cfg))
	if cfg.Parameters["custom_key"]["string_value"] != "custom_value" || cfg.Input[0].DataType != "TYPE_FP32" {
		t.Fatalf("model_config: %s", args["model_config"])
	}
	var info struct {
		Name, RequestedType, Parameters, RequestID, ModelDir string
		Types, Requested                                     []string
		Constructed, Flags, PID                              int
		CorrelationID                                        any `json:"correlation_id"`
	}
	raw := strings1(t, output(resp, "INFO"))[0]
	raw = strings.NewReplacer(`"requested_type"`, `"RequestedType"`, `"request_id"`, `"RequestID"`, `"model_dir"`, `"ModelDir"`).Replace(raw)
	servertest.Must(t, json.Unmarshal([]byte(raw), &info))
	if info.Name != "1.model" || strings.Join(info.Types, ",") != "str" || info.Constructed != 1 || info.RequestedType != "set" ||
		strings.Join(info.Requested, ",") != "ARGS,INFO" || info.RequestID != "r1" || info.Flags != 1 || info.CorrelationID != float64(7) ||
		info.ModelDir != filepath.Join(e.root, "init_args", "1") {
		t.Fatalf("request as the model saw it: %s", raw)
	}
	var params map[string]any
	if json.Unmarshal([]byte(info.Parameters), &params) != nil || params["my_param"] != "x" || params["n"] != float64(3) || len(params) != 2 {
		t.Fatalf("parameters(): %q", info.Parameters)
	}
	if info.PID == os.Getpid() || info.PID == 0 {
		t.Fatalf("the model ran in the server's process (%d)", info.PID)
	}
}

// TestBatchedRequests: a dynamic batcher hands execute several requests,
// each with its own rows (triton-inference-server/python_backend
// README.md, "execute").
func TestBatchedRequests(t *testing.T) {
	e := start(t, options{}, "add_sub")
	var wg sync.WaitGroup
	batches := make([]int64, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := float32(i)
			resp, err := e.infer(&core.InferRequest{ModelName: "add_sub",
				Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 4}, v, v, v, v), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}})
			if err != nil {
				t.Error(err)
				return
			}
			if got := floats(output(resp, "OUTPUT0")); got[0] != v+1 || len(got) != 4 || output(resp, "OUTPUT0").Shape[0] != 1 {
				t.Errorf("request %d: %v %v", i, got, output(resp, "OUTPUT0").Shape)
			}
			batches[i], _ = resp.Parameters["batch"].(int64)
		}()
	}
	wg.Wait()
	if batches[0]+batches[1]+batches[2] <= 3 {
		t.Fatalf("no execute call got more than one request: %v", batches)
	}
}

// TestExecuteErrors: an exception fails the batch with Triton's text, a
// per-request error fails only its request, and every return-value rule
// of Triton's stub holds (triton-inference-server/python_backend
// src/pb_stub.cc; server qa/python_models/wrong_model, execute_error,
// error_code).
func TestExecuteErrors(t *testing.T) {
	e := start(t, options{}, "wrong_model", "execute_error", "bad_return", "error_code")
	_, err := e.infer(&core.InferRequest{ModelName: "wrong_model", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}})
	if core.CodeOf(err) != core.CodeInternal || !strings.HasPrefix(err.Error(), "Failed to process the request(s) for model 'wrong_model_0_0', message: NameError: name 'lorem_ipsum' is not defined") {
		t.Fatalf("NameError: %v", err)
	}
	// Three requests in one batch (preferred_batch_size 3): only the
	// second fails.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, v := range []float32{1, -1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.infer(&core.InferRequest{ModelName: "execute_error", Inputs: []*core.Tensor{fp32("IN", []int64{1, 1}, v)}})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || errs[1].Error() != "An error occurred during execution" {
		t.Fatalf("per-request errors: %v", errs)
	}
	mode := func(m int32) *core.InferRequest {
		return &core.InferRequest{ModelName: "bad_return", Inputs: []*core.Tensor{{Name: "MODE", DataType: core.TypeInt32, Shape: []int64{1},
			Data: binary.LittleEndian.AppendUint32(nil, uint32(m))}}}
	}
	const batch = "Failed to process the request(s) for model 'bad_return_0', message: "
	for m, want := range map[int32]string{
		0: batch + "triton_python_backend_utils.TritonModelException: Expected a list in the execute return, found type '<class 'tuple'>'.",
		1: batch + "triton_python_backend_utils.TritonModelException: Number of InferenceResponse objects do not match the number of InferenceRequest objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:2",
		2: batch + "triton_python_backend_utils.TritonModelException: Expected an 'InferenceResponse' object in the execute function return list, found type '<class 'str'>'.",
		3: "Python model 'bad_return_0' did not produce a response for the request",
	} {
		if _, err := e.infer(mode(m)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("mode %d: %v\nwant %s", m, err, want)
		}
	}
	// The sender in default mode, and an FP64 output for an FP32 one with
	// an unrequested extra output dropped.
	if resp, err := e.infer(mode(4)); err != nil || len(resp.Outputs) != 1 || resp.Outputs[0].DataType != core.TypeFP64 {
		t.Fatalf("sender in default mode: %v %+v", err, resp)
	}
	resp, err := e.infer(mode(5))
	if err != nil || len(resp.Outputs) != 1 || resp.Outputs[0].Name != "OUT" || resp.Outputs[0].DataType != core.TypeFP64 {
		t.Fatalf("pruning and datatype: %v %+v", err, resp)
	}
	for name, code := range map[string]core.Code{"NOT_FOUND": core.CodeNotFound, "UNSUPPORTED": core.CodeUnsupported, "INTERNAL": core.CodeInternal, "CANCELLED": core.CodeCancelled} {
		_, err := e.infer(&core.InferRequest{ModelName: "error_code", Inputs: []*core.Tensor{bytesTensor("CODE", name)}})
		if core.CodeOf(err) != code || err.Error() != "error code: "+name {
			t.Errorf("%s: %v (%v)", name, err, core.CodeOf(err))
		}
	}
}

// TestLoadFailures: a model that cannot start is UNAVAILABLE with the
// Python error's last line, and the others serve (missing model file, no
// TritonPythonModel class, an error in initialize, a bad
// FORCE_CPU_ONLY_INPUT_TENSORS).
func TestLoadFailures(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit}, "init_error", "no_class", "add_sub")
	for model, want := range map[string]string{
		"init_error": "NameError: name 'lorem_ipsum' is not defined",
		"no_class":   "AttributeError: module '1.model' has no attribute 'TritonPythonModel'",
	} {
		err := e.srv.Load(context.Background(), model, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", model, err)
		}
	}
	servertest.Must(t, os.Remove(filepath.Join(e.root, "add_sub", "1", "model.py")))
	if err := e.srv.Load(context.Background(), "add_sub", nil); err == nil || !strings.Contains(err.Error(), "Python model file not found in '"+filepath.Join(e.root, "add_sub", "1", "model.py")+"'") {
		t.Errorf("missing model.py: %v", err)
	}
	err := e.srv.Load(context.Background(), "add_sub", &core.LoadOverride{ConfigJSON: `{"backend":"python","parameters":{"FORCE_CPU_ONLY_INPUT_TENSORS":{"string_value":"maybe"}}}`,
		Files: map[string][]byte{"1/model.py": []byte("class TritonPythonModel:\n    pass\n")}})
	if err == nil || !strings.Contains(err.Error(), "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: maybe'") {
		t.Errorf("FORCE_CPU_ONLY_INPUT_TENSORS: %v", err)
	}
}

type streamed struct {
	mu     sync.Mutex
	outs   []int32
	finals int
}

func (s *streamed) emit(r *core.InferResponse, final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r != nil {
		s.outs = append(s.outs, int32(binary.LittleEndian.Uint32(output(r, "OUT").Data)))
	}
	if final {
		s.finals++
	}
	return nil
}

func repeatRequest(n int, delayUs uint32) *core.InferRequest {
	data := make([]byte, 0, 4*n)
	for i := range n {
		data = binary.LittleEndian.AppendUint32(data, uint32(i))
	}
	req := &core.InferRequest{ModelName: "repeat", ModelVersion: core.LatestVersion,
		Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeInt32, Shape: []int64{int64(n)}, Data: data}}}
	if delayUs > 0 {
		req.Inputs = append(req.Inputs, &core.Tensor{Name: "DELAY", DataType: core.TypeUint32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, delayUs)})
	}
	return req
}

// TestDecoupled: a decoupled model.py streams 0, 1 and 1,000 responses
// from a thread after execute returned, then a final flag; a client that
// goes away is seen by is_cancelled (triton-inference-server/python_backend
// README.md, "Decoupled mode", examples/decoupled/repeat_model.py).
func TestDecoupled(t *testing.T) {
	e := start(t, options{}, "repeat")
	mv, release, err := e.srv.Acquire("repeat", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	for _, n := range []int{0, 1, 1000} {
		var got streamed
		if err := mv.InferStream(context.Background(), repeatRequest(n, 0), got.emit); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got.outs) != n || got.finals != 1 {
			t.Fatalf("n=%d: %d responses, %d finals", n, len(got.outs), got.finals)
		}
		for i, v := range got.outs {
			if v != int32(i) {
				t.Fatalf("n=%d: response %d is %d", n, i, v)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got streamed
	err = mv.InferStream(ctx, repeatRequest(100000, 1000), func(r *core.InferResponse, final bool) error {
		if got.emit(r, final); len(got.outs) == 5 {
			cancel()
		}
		return nil
	})
	if core.CodeOf(err) != core.CodeCancelled || len(got.outs) > 7 {
		t.Fatalf("cancelled stream: %v after %d responses", err, len(got.outs))
	}
}

// TestBLS: a model calls another through this server's core; a call to an
// unknown model is an error response, not an exception; BLS in
// initialize raises (triton-inference-server/python_backend README.md,
// "Business Logic Scripting").
func TestBLS(t *testing.T) {
	e := start(t, options{}, "bls", "add_sub")
	call := func(model string) (*core.InferResponse, error) {
		return e.infer(&core.InferRequest{ModelName: "bls", Inputs: []*core.Tensor{
			bytesTensor("MODEL", model), fp32("INPUT0", []int64{1, 4}, 1, 2, 3, 4), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}})
	}
	resp, err := call("add_sub")
	if err != nil || floats(output(resp, "OUTPUT0"))[3] != 5 || floats(output(resp, "OUTPUT1"))[0] != 0 {
		t.Fatalf("BLS to add_sub: %v %+v", err, resp)
	}
	_, err = call("nope")
	if err == nil || !strings.Contains(err.Error(), "Model nope - Error when running inference: Failed for execute the inference request. Model 'nope' is not ready.") ||
		!strings.Contains(err.Error(), "init: BLS is only supported during the 'execute' function.") {
		t.Fatalf("BLS to an unknown model: %v", err)
	}
}

// TestWorkerDeath: with restart-dead-workers=false, a worker that exits
// fails its request and every later one with Triton's text ("Stub
// process '<instance>' is not healthy.", as triton-inference-server/
// python_backend src/python_be.cc words it).
func TestWorkerDeath(t *testing.T) {
	e := start(t, options{keepDead: true}, "crash")
	if _, err := e.infer(&core.InferRequest{ModelName: "crash", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
		t.Fatal(err)
	}
	const dead = "Stub process 'crash_0' is not healthy."
	for range 2 {
		_, err := e.infer(&core.InferRequest{ModelName: "crash", Inputs: []*core.Tensor{fp32("IN", []int64{1}, -1)}})
		if core.CodeOf(err) != core.CodeInternal || err.Error() != dead {
			t.Fatalf("after the worker died: %v", err)
		}
	}
	// The version is not ready, nor is a strict server; a reload brings
	// it back.
	if e.srv.ModelReady("crash", core.LatestVersion) || e.srv.Ready() {
		t.Fatal("a model with a dead worker reports ready")
	}
	if !strings.Contains(e.log.String(), "Model 'crash' version 1 is not ready: Stub process 'crash_0' is not healthy.") {
		t.Errorf("no readiness log line:\n%s", e.log.String())
	}
	servertest.Must(t, e.srv.Load(context.Background(), "crash", &core.LoadOverride{ConfigJSON: `{"backend":"python","max_batch_size":0,` +
		`"input":[{"name":"IN","data_type":"TYPE_FP32","dims":[1]}],"output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[1]}]}`}))
	if !e.srv.ModelReady("crash", core.LatestVersion) {
		t.Fatal("not ready after a reload")
	}
}

// TestRestartDeadWorkers: by default (restart-dead-workers) the instance
// gets a new worker and the model is ready again.
func TestRestartDeadWorkers(t *testing.T) {
	e := start(t, options{}, "crash")
	_, err := e.infer(&core.InferRequest{ModelName: "crash", Inputs: []*core.Tensor{fp32("IN", []int64{1}, -1)}})
	if err == nil || err.Error() != "Stub process 'crash_0' is not healthy." {
		t.Fatalf("the request the worker died in: %v", err)
	}
	servesAgain(t, e, "crash", time.Now().Add(30*time.Second))
}

// TestIsReady: is_ready() decides readiness; a non-boolean answer is an
// error that makes the model not ready (triton-inference-server/
// python_backend README.md, "is_ready").
func TestIsReady(t *testing.T) {
	e := start(t, options{}, "ready_check", "add_sub")
	answer := filepath.Join(e.root, "ready_check", "answer")
	for _, tc := range []struct {
		text  string
		ready bool
		log   string
	}{
		{"true", true, ""},
		{"false", false, "Model 'ready_check_0' is not ready (user-defined check failed)."},
		{"yes", false, "is_ready() must return a boolean value"},
	} {
		servertest.Must(t, os.WriteFile(answer, []byte(tc.text), 0o644))
		if got := e.srv.ModelReady("ready_check", core.LatestVersion); got != tc.ready {
			t.Errorf("%s: ready %v", tc.text, got)
		}
		if tc.log != "" && !strings.Contains(e.log.String(), tc.log) {
			t.Errorf("%s: no %q in the log", tc.text, tc.log)
		}
	}
	if !e.srv.ModelReady("add_sub", core.LatestVersion) {
		t.Fatal("a model without is_ready is not ready")
	}
	// A readiness check during an execute longer than the check's 5 s
	// limit is answered: the worker's helper starts reading once the model
	// code has run long.
	servertest.Must(t, os.WriteFile(answer, []byte("true"), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := e.infer(&core.InferRequest{ModelName: "ready_check", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 6)}})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if !e.srv.ModelReady("ready_check", core.LatestVersion) {
		t.Error("not ready during a long execute: is_ready() was not answered")
	}
	servertest.Must(t, <-done)
}

// TestLoggerAndPrint: Logger messages reach the server log with the file
// and line, verbose only with --log-verbose; print() reaches it too
// (triton-inference-server/python_backend README.md, "Logging").
// TestVerboseAtRunTime: a change of the verbose level (/v2/logging,
// LogSettings) reaches running workers with their next execute.
func TestVerboseAtRunTime(t *testing.T) {
	var level atomic.Int32
	e := start(t, options{verboseNow: func() int { return int(level.Load()) }}, "logger")
	count := func() int { return strings.Count(e.log.String(), "Verbose Msg!") }
	for i, want := range []int{0, 1, 1} {
		if i == 1 {
			level.Store(1)
		}
		if i == 2 {
			level.Store(0)
		}
		if _, err := e.infer(&core.InferRequest{ModelName: "logger", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
			t.Fatal(err)
		}
		// The verbose line is a message on the socket, before the reply.
		if got := count(); got != want {
			t.Fatalf("request %d: %d verbose lines logged, want %d", i, got, want)
		}
	}
}

func TestLoggerAndPrint(t *testing.T) {
	for _, verbose := range []int{0, 1} {
		e := start(t, options{verbose: verbose}, "logger")
		if _, err := e.infer(&core.InferRequest{ModelName: "logger", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
			t.Fatal(err)
		}
		// print() output comes through the worker's stdout pipe, which
		// may trail the response.
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(e.log.String(), "printed from execute") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		log := e.log.String()
		for _, want := range []string{"level=INFO msg=\"Info Msg!\"", "level=WARN msg=\"Warning Msg!\"", "level=ERROR msg=\"Error Msg!\"", "file=model.py:7", "file=model.py:8", "printed from execute"} {
			if !strings.Contains(log, want) {
				t.Errorf("verbose=%d: no %q in the log:\n%s", verbose, want, log)
			}
		}
		if strings.Contains(log, "Verbose Msg!") != (verbose == 1) {
			t.Errorf("verbose=%d: verbose message shown %v", verbose, !(verbose == 1))
		}
	}
}

// TestAutoCompleteAndImports: auto_complete_config fills in a config-less
// model; default_model_filename and both import styles work, with
// __name__ "1.other" (triton-inference-server/python_backend README.md,
// "auto_complete_config"; module import in src/pb_stub.cc).
func TestAutoCompleteAndImports(t *testing.T) {
	e := start(t, options{}, "auto", "helper_import")
	mv, release, err := e.srv.Acquire("auto", core.LatestVersion)
	servertest.Must(t, err)
	release()
	if mv.Config.GetMaxBatchSize() != 4 || len(mv.Config.GetInput()) != 1 || mv.Config.GetInput()[0].GetName() != "IN" || mv.Config.GetOutput()[0].GetName() != "OUT" {
		t.Fatalf("auto-completed config: %v", mv.Config)
	}
	resp, err := e.infer(&core.InferRequest{ModelName: "auto", Inputs: []*core.Tensor{fp32("IN", []int64{1, 2}, 1, 2)}})
	if err != nil || floats(resp.Outputs[0])[1] != 20 {
		t.Fatalf("auto: %v %+v", err, resp)
	}
	resp, err = e.infer(&core.InferRequest{ModelName: "helper_import", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}})
	if err != nil || strings1(t, resp.Outputs[0])[0] != "1.other helper helper" {
		t.Fatalf("imports: %v %+v", err, resp)
	}
}

// TestFinalizeAndReap: unloading calls finalize once per instance and the
// worker processes exit (triton-inference-server/python_backend
// README.md, "finalize").
func TestFinalizeAndReap(t *testing.T) {
	marker := t.TempDir()
	e := start(t, options{mode: core.ModeExplicit}, "add_sub")
	cfg, err := os.ReadFile(filepath.Join(e.root, "add_sub", "config.pbtxt"))
	servertest.Must(t, err)
	cfg = append(cfg, []byte(`instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "marker" value: { string_value: "`+marker+`" } }
`)...)
	servertest.Must(t, os.WriteFile(filepath.Join(e.root, "add_sub", "config.pbtxt"), cfg, 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "add_sub", nil))
	pids := workerPIDs()
	if len(pids) != 2 {
		t.Fatalf("%d workers for two instances", len(pids))
	}
	servertest.Must(t, e.srv.Unload(context.Background(), "add_sub"))
	files, _ := os.ReadDir(marker)
	if len(files) != 2 {
		t.Fatalf("finalize ran %d times for two instances", len(files))
	}
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Fatalf("worker %d still running after the unload", pid)
		}
	}
}

// workerPIDs lists this test process's Python workers.
func workerPIDs() []int {
	var pids []int
	for _, pid := range servertest.Children(os.Getpid()) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte("inferd_python_worker.py")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestLargeTensors: 4 MiB tensors go both ways through the shared arena,
// and through the socket without one, byte for byte; a batch larger than
// the arena falls back to the socket for what does not fit.
func TestLargeTensors(t *testing.T) {
	for _, noArena := range []bool{false, true} {
		e := start(t, options{noArena: noArena}, "identity")
		const n = 1 << 18 // 1 MiB, over the arena's threshold
		// Each caller sends its own values: with two executions in flight
		// per worker (pipelining), one's bytes must never show in another's.
		var wg sync.WaitGroup
		for c := range 4 {
			data := make([]byte, 4*n)
			for i := range n {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32((i+c*131)%977)*0.5))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					resp, err := e.infer(&core.InferRequest{ModelName: "identity",
						Inputs: []*core.Tensor{{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, n}, Data: data}}})
					if err != nil || !bytes.Equal(resp.Outputs[0].Data, data) {
						t.Errorf("arena=%v, caller %d: wrong answer (err %v)", !noArena, c, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// TestCustomMetrics: a model's MetricFamily counters, gauges and
// histograms are exported by the backend's collector, and go with the
// model (triton-inference-server/python_backend README.md, "Custom
// Metrics").
func TestCustomMetrics(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit}, "custom_metrics")
	servertest.Must(t, e.srv.Load(context.Background(), "custom_metrics", nil))
	for i, v := range []float32{0.5, 5, 50} {
		resp, err := e.infer(&core.InferRequest{ModelName: "custom_metrics", Inputs: []*core.Tensor{fp32("IN", []int64{1}, v)}})
		if err != nil || math.Float64frombits(binary.LittleEndian.Uint64(resp.Outputs[0].Data)) != float64(i+1) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.backend)
	families, err := reg.Gather()
	servertest.Must(t, err)
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	if m := got["custom_requests_total"].GetMetric(); len(m) != 1 || m[0].GetCounter().GetValue() != 3 || m[0].GetLabel()[0].GetValue() != "custom_metrics" {
		t.Fatalf("counter: %v", m)
	}
	if m := got["custom_last_input"].GetMetric(); len(m) != 1 || m[0].GetGauge().GetValue() != 50 {
		t.Fatalf("gauge: %v", m)
	}
	h := got["custom_input_value"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 55.5 || h.GetBucket()[0].GetCumulativeCount() != 1 || h.GetBucket()[1].GetCumulativeCount() != 2 {
		t.Fatalf("histogram: %v", h)
	}
	if m := got["nv_trt_llm_kv_cache_block_metrics"].GetMetric(); len(m) != 3 {
		t.Fatalf("KV cache family: %v", m)
	}
	if m := got["custom_refused"].GetMetric(); len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
		t.Fatalf("a family named like the server's own was not refused with the expected text: %v", m)
	}
	servertest.Must(t, e.srv.Unload(context.Background(), "custom_metrics"))
	families, err = reg.Gather()
	servertest.Must(t, err)
	if len(families) != 0 {
		t.Fatalf("metrics left after the unload: %v", families)
	}
}

// TestExecutionEnvPath: EXECUTION_ENV_PATH names an environment folder
// (with $$TRITON_MODEL_DIRECTORY) or a packed one built here, and the
// model runs with its interpreter; a folder without bin/activate fails
// (triton-inference-server/python_backend README.md, "Creating Custom
// Execution Environments").
func TestExecutionEnvPath(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit}, "init_args")
	python := servertest.Python(t)
	modelDir := filepath.Join(e.root, "init_args")
	envDir := filepath.Join(modelDir, "env")
	servertest.Must(t, os.MkdirAll(filepath.Join(envDir, "bin"), 0o755))
	servertest.Must(t, os.Symlink(python, filepath.Join(envDir, "bin", "python3")))
	archive := filepath.Join(t.TempDir(), "env.tar.gz")
	servertest.Must(t, writePack(archive, python))
	load := func(env string) error {
		cfg, err := os.ReadFile(filepath.Join(modelDir, "config.pbtxt"))
		servertest.Must(t, err)
		cfg = append(cfg, []byte(`parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "`+env+`" } }`+"\n")...)
		servertest.Must(t, os.WriteFile(filepath.Join(modelDir, "config.pbtxt"), cfg, 0o644))
		defer func() {
			cfg = cfg[:bytes.LastIndex(cfg, []byte("parameters { key: \"EXECUTION_ENV_PATH\""))]
			servertest.Must(t, os.WriteFile(filepath.Join(modelDir, "config.pbtxt"), cfg, 0o644))
		}()
		return e.srv.Load(context.Background(), "init_args", nil)
	}
	executable := func() string {
		resp, err := e.infer(&core.InferRequest{ModelName: "init_args", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}})
		servertest.Must(t, err)
		var info struct{ Executable string }
		servertest.Must(t, json.Unmarshal([]byte(strings1(t, output(resp, "INFO"))[0]), &info))
		return info.Executable
	}
	if err := load("$$TRITON_MODEL_DIRECTORY/env"); err == nil || !strings.Contains(err.Error(), "should contain an 'activate' script.") {
		t.Fatalf("no activate: %v", err)
	}
	servertest.Must(t, os.WriteFile(filepath.Join(envDir, "bin", "activate"), []byte("# activate\n"), 0o644))
	servertest.Must(t, load("$$TRITON_MODEL_DIRECTORY/env"))
	if got := executable(); got != filepath.Join(envDir, "bin", "python3") {
		t.Fatalf("folder environment: the model ran %s", got)
	}
	servertest.Must(t, load(archive))
	if got := executable(); !strings.HasSuffix(got, "/bin/python3") || !strings.Contains(got, "/inferd-") || !strings.Contains(got, "/python-") {
		t.Fatalf("packed environment: the model ran %s", got)
	}
}

// writePack writes a conda-pack-like archive: bin/activate and a
// bin/python3 that runs python under its own name (a link out of the
// archive's folder would be refused).
func writePack(path, python string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		h    *tar.Header
		body string
	}{
		{&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
		{&tar.Header{Name: "bin/activate", Typeflag: tar.TypeReg, Mode: 0o644}, "# activate\n"},
		{&tar.Header{Name: "bin/python3", Typeflag: tar.TypeReg, Mode: 0o755}, "#!/bin/bash\nexec -a \"$0\" " + python + " \"$@\"\n"},
	} {
		e.h.Size = int64(len(e.body))
		if err := tw.WriteHeader(e.h); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// TestAsyncAndStreamingBLS: async def execute works; BLS streams a
// decoupled model's responses (exec(decoupled=True)) and async_exec calls
// an ensemble of a Python model (triton-inference-server/python_backend
// README.md, "Async Execute", "Using BLS with Decoupled Models").
func TestAsyncAndStreamingBLS(t *testing.T) {
	e := start(t, options{}, "async_model", "bls_stream", "repeat", "pair", "add_sub")
	resp, err := e.infer(&core.InferRequest{ModelName: "async_model", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 41)}})
	if err != nil || floats(resp.Outputs[0])[0] != 42 {
		t.Fatalf("async execute: %v %+v", err, resp)
	}
	resp, err = e.infer(&core.InferRequest{ModelName: "bls_stream", Inputs: []*core.Tensor{{Name: "N", DataType: core.TypeInt32, Shape: []int64{1},
		Data: binary.LittleEndian.AppendUint32(nil, 100)}}})
	servertest.Must(t, err)
	sum := int64(binary.LittleEndian.Uint64(output(resp, "SUM").Data))
	count := int64(binary.LittleEndian.Uint64(output(resp, "COUNT").Data))
	if sum != 99*100/2 || count != 100 || floats(output(resp, "ENSEMBLE"))[0] != 2 {
		t.Fatalf("streaming BLS: sum %d count %d ensemble %v", sum, count, floats(output(resp, "ENSEMBLE")))
	}
}

// TestWorkerKilledUnderLoad: a worker killed while requests run and queue
// fails them all with Triton's text, promptly: none hangs
// (Triton's "Stub process ... is not healthy", triton-inference-server/
// python_backend src/python_be.cc).
func TestWorkerKilledUnderLoad(t *testing.T) {
	e := start(t, options{}, "repeat", "add_sub")
	pids := workerPIDs()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, err := e.infer(&core.InferRequest{ModelName: "add_sub",
					Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 4}, 1, 2, 3, 4), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}})
				errs <- err
				return
			}
			mv, release, err := e.srv.Acquire("repeat", core.LatestVersion)
			if err != nil {
				errs <- err
				return
			}
			defer release()
			errs <- mv.InferStream(context.Background(), repeatRequest(1000, 200), func(*core.InferResponse, bool) error { return nil })
		}()
	}
	time.Sleep(100 * time.Millisecond)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("requests hung after the workers were killed")
	}
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "is not healthy") {
				t.Errorf("error %v", err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no request saw the workers die")
	}
}

// TestShimModule runs testdata/shim_test.py: the module's checks that
// need no server, in the real interpreter.
func TestShimModule(t *testing.T) {
	cmd := exec.Command(servertest.Python(t), filepath.Join("testdata", "shim_test.py"))
	cmd.Env = append(os.Environ(), "PYTHONPATH=shim")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestAutoCompleteNoneAndCancel: auto_complete_config returning None
// fails the load with Triton's text; a client that goes away while
// execute runs is seen by is_cancelled() (triton-inference-server/
// python_backend README.md, "Request Cancellation Handling").
func TestAutoCompleteNoneAndCancel(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit}, "auto_none", "cancel_check")
	if err := e.srv.Load(context.Background(), "auto_none", nil); err == nil || !strings.Contains(err.Error(), "must return a valid pb.ModelConfig object.") {
		t.Fatalf("auto_complete_config returning None: %v", err)
	}
	servertest.Must(t, e.srv.Load(context.Background(), "cancel_check", nil))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	_, err := e.srv.Infer(ctx, &core.InferRequest{ModelName: "cancel_check", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}})
	if core.CodeOf(err) != core.CodeCancelled {
		t.Fatalf("cancelled request: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "cancel_check", "cancelled")); err != nil {
		t.Fatal("the model did not see the cancellation:", err)
	}
}

// TestMoreRules: writable inputs, a requested output the model did not
// produce, one instance by default, the decoupled return and exception
// rules, the sender's rules, and an interpreter without numpy
// (Triton's texts: triton-inference-server/python_backend src/pb_stub.cc,
// src/response_sender.cc).
func TestMoreRules(t *testing.T) {
	e := start(t, options{}, "misc", "decoupled_bad")
	resp, err := e.infer(&core.InferRequest{ModelName: "misc", Inputs: []*core.Tensor{fp32("IN", []int64{2}, 1, 2)}})
	if err != nil || len(resp.Outputs) != 1 || floats(resp.Outputs[0])[0] != 5 {
		t.Fatalf("misc: %v %+v", err, resp)
	}
	if n := len(workerPIDs()); n != 2 {
		t.Fatalf("%d workers for two models without instance groups, want one each", n)
	}
	mv, release, err := e.srv.Acquire("decoupled_bad", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	run := func(mode int32) (int, error) {
		n := 0
		err := mv.InferStream(context.Background(), &core.InferRequest{ModelName: "decoupled_bad", ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{{Name: "MODE", DataType: core.TypeInt32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, uint32(mode))}}},
			func(r *core.InferResponse, _ bool) error {
				if r != nil {
					n++
				}
				return nil
			})
		return n, err
	}
	if _, err := run(0); err == nil || !strings.Contains(err.Error(), "Python model 'decoupled_bad_0' is using the decoupled mode and the execute function must return None.") {
		t.Errorf("decoupled returning []: %v", err)
	}
	if n, err := run(1); n != 1 || err == nil || !strings.HasPrefix(err.Error(), "Failed to process the request(s) for model 'decoupled_bad_0', message: ValueError: boom") {
		t.Errorf("decoupled exception: %d responses, %v", n, err)
	}
	if _, err := run(2); err != nil {
		t.Fatal(err)
	}
	want := "Inference Response object must be provided when the response flags is set to zero. | Unable to send response. Unsupported flag provided. | Unable to send response. Response sender has been closed."
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("sender rules: no %q in the log:\n%s", want, e.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// An interpreter without numpy: Debian's, without its site packages.
	wrapper := filepath.Join(t.TempDir(), "python-without-numpy")
	servertest.Must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+servertest.Python(t)+" -S \"$@\"\n"), 0o755))
	b := python.New(python.Options{Executable: wrapper})
	defer b.Close()
	_, err = b.NewInstance(context.Background(), core.InstanceSpec{VersionFiles: core.VersionFiles{ModelName: "misc", Version: 1,
		ModelDir: filepath.Join(e.root, "misc"), VersionDir: filepath.Join(e.root, "misc", "1")}, Name: "misc_0", Config: mv.Config})
	if err == nil || !strings.Contains(err.Error(), "No module named 'numpy'") {
		t.Fatalf("no numpy: %v", err)
	}
}

// TestInitExitWithoutAutoComplete: a model whose initialize kills its
// process fails the load with Triton's text, and with auto-complete off
// its auto_complete_config never runs (triton-inference-server/server
// qa/python_models/init_exit/model.py).
func TestInitExitWithoutAutoComplete(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit, noAutoComplete: true}, "init_exit")
	err := e.srv.Load(context.Background(), "init_exit", nil)
	if err == nil || !strings.Contains(err.Error(), "Stub process 'init_exit_0' is not healthy.") {
		t.Fatalf("initialize exiting: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "init_exit", "auto_complete_ran")); err == nil {
		t.Fatal("auto_complete_config ran with auto-complete off")
	}
}

// TestPipelinedStatistics: an execute that waited in the worker's socket
// behind the one before (pipelining) is not counted as model time: two
// 200 ms executes sent together record about 400 ms of compute_infer, not
// the 600 ms their waits would add up to.
func TestPipelinedStatistics(t *testing.T) {
	e := start(t, options{}, "sleepy")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.infer(&core.InferRequest{ModelName: "sleepy", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mv, release, err := e.srv.Acquire("sleepy", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	s := mv.Stats.Snapshot()
	infer := time.Duration(s.ComputeInfer.Ns)
	if s.ExecutionCount != 2 || infer < 400*time.Millisecond || infer >= 500*time.Millisecond {
		t.Fatalf("%d executions, compute_infer %v: want 2 executions of the model's 2 × 200 ms", s.ExecutionCount, infer)
	}
}

// TestBrokenReplyFailsOnlyItsRequests: an execute whose answer cannot be
// decoded fails its own requests, not those of the execute waiting behind
// it in the worker (pipelining).
func TestBrokenReplyFailsOnlyItsRequests(t *testing.T) {
	e := start(t, options{}, "broken_reply")
	errs := make(chan error, 2)
	for i, v := range []float32{13, 1} {
		if i == 1 {
			time.Sleep(50 * time.Millisecond) // the broken one runs first
		}
		go func() {
			_, err := e.infer(&core.InferRequest{ModelName: "broken_reply", Inputs: []*core.Tensor{fp32("IN", []int64{1}, v)}})
			if v == 13 {
				if err == nil || !strings.Contains(err.Error(), "malformed message") {
					err = fmt.Errorf("the broken reply: %v, want a malformed-message error", err)
				} else {
					err = nil
				}
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
