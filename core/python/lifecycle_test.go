package python_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
)

// startLifecycle loads testdata's lifecycle model with count instances and
// the given string parameters, and a marker folder where each worker notes
// its pid and its child's.
func startLifecycle(t *testing.T, o options, count int, params map[string]string) (*env, string) {
	t.Helper()
	o.mode = core.ModeExplicit
	e := start(t, o, "lifecycle")
	marker := t.TempDir()
	path := filepath.Join(e.root, "lifecycle", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	text := strings.Replace(string(cfg), "count: 1", "count: "+strconv.Itoa(count), 1)
	params["marker"] = marker
	for k, v := range params {
		text += `parameters { key: "` + k + `" value: { string_value: "` + v + `" } }` + "\n"
	}
	servertest.Must(t, os.WriteFile(path, []byte(text), 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "lifecycle", nil))
	return e, marker
}

// lifecyclePIDs reads the marker folder: each worker's pid and its child's.
func lifecyclePIDs(t *testing.T, marker string) map[int]int {
	t.Helper()
	entries, err := os.ReadDir(marker)
	servertest.Must(t, err)
	out := map[int]int{}
	for _, e := range entries {
		worker, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(marker, e.Name()))
		servertest.Must(t, err)
		child, err := strconv.Atoi(string(data))
		servertest.Must(t, err)
		out[worker] = child
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// waitGone fails the test unless every pid has stopped within a minute.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d still runs", what, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestShutdown: Backend.Shutdown asks every worker to finalize at once;
// those that have not exited when its context ends are killed with their
// children, and Shutdown returns with an error naming them instead of
// waiting for a finalize that hangs. No worker restarts afterwards.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name string
		hang string
	}{{"finalize returns", "no"}, {"finalize hangs", "yes"}} {
		t.Run(tc.name, func(t *testing.T) {
			e, marker := startLifecycle(t, options{}, 2, map[string]string{"hang_finalize": tc.hang})
			pids := lifecyclePIDs(t, marker)
			if len(pids) != 2 {
				t.Fatalf("%d workers noted for two instances", len(pids))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- e.backend.Shutdown(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Shutdown did not return after its deadline")
			}
			if tc.hang == "yes" {
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "lifecycle_0_0") || !strings.Contains(err.Error(), "lifecycle_0_1") {
					t.Fatalf("Shutdown with hung finalizes: %v", err)
				}
			} else if err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			for worker, child := range pids {
				if _, err := os.Stat(filepath.Join(marker, "finalized-"+strconv.Itoa(worker))); err != nil {
					t.Errorf("worker %d was not asked to finalize: %v", worker, err)
				}
				waitGone(t, "worker", worker)
				waitGone(t, "the model's child", child)
			}
			// Workers that die in a shutdown are not restarted.
			time.Sleep(time.Second)
			if got := workerPIDs(); len(got) != 0 {
				t.Fatalf("workers %v run after Shutdown", got)
			}
			if _, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err == nil {
				t.Fatal("a request succeeded after Shutdown")
			}
		})
	}
}

// restarts reads inferd_python_worker_restarts_total of instance, or -1
// when the backend exports none for it.
func restarts(t *testing.T, e *env, instance string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.backend)
	families, err := reg.Gather()
	servertest.Must(t, err)
	for _, f := range families {
		if f.GetName() != "inferd_python_worker_restarts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["instance"] == instance && labels["model"] == "lifecycle" && labels["version"] == "1" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestDeadWorker: a worker killed with SIGKILL, or exiting by itself, fails
// the request it held at once with Triton's text, its children go, and the
// log says how it ended with its last stderr lines. By default a new worker
// takes its place: the model serves and is ready again and the restart
// counter says 1. With restart-dead-workers=false the instance stays not
// ready, as in Triton. Either way the unload returns, though the model's
// child held the dead worker's stdout and stderr.
func TestDeadWorker(t *testing.T) {
	const dead = "Stub process 'lifecycle_0_0' is not healthy."
	for _, tc := range []struct {
		name     string
		keepDead bool
		kill     bool     // SIGKILL while it runs a request; else it exits on one
		log      []string // in the log after the death
	}{
		{"killed, restarted", false, true, []string{`status="killed by signal SIGKILL"`}},
		{"exits, restarted", false, false, []string{`status="exit status 3"`, `lifecycle: exiting on a negative input`}},
		{"killed, restart-dead-workers=false", true, true, []string{`status="killed by signal SIGKILL"`, "restart-dead-workers=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, marker := startLifecycle(t, options{keepDead: tc.keepDead}, 1, map[string]string{})
			if _, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
				t.Fatal(err)
			}
			first := lifecyclePIDs(t, marker)
			if len(first) != 1 || restarts(t, e, "lifecycle_0_0") != 0 {
				t.Fatalf("workers %v, restarts %v", first, restarts(t, e, "lifecycle_0_0"))
			}
			held := make(chan error, 1)
			input := float32(-1)
			if tc.kill {
				input = 2
			}
			go func() {
				_, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, input)}})
				held <- err
			}()
			if tc.kill {
				for {
					if _, err := os.Stat(filepath.Join(marker, "executing")); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				for pid := range first {
					servertest.Must(t, syscall.Kill(pid, syscall.SIGKILL))
				}
			}
			select {
			case err := <-held:
				if err == nil || err.Error() != dead {
					t.Fatalf("the request the worker held: %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("the request the dead worker held did not fail")
			}
			for worker, child := range first {
				waitGone(t, "the dead worker", worker)
				waitGone(t, "the dead worker's child", child)
			}
			if tc.keepDead {
				// Nothing restarts it: it stays dead and not ready.
				time.Sleep(2 * time.Second)
				if e.srv.ModelReady("lifecycle", core.LatestVersion) {
					t.Fatal("ready with a dead worker and restart-dead-workers=false")
				}
				if _, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err == nil || err.Error() != dead {
					t.Fatalf("a request to the dead instance: %v", err)
				}
				if got := workerPIDs(); len(got) != 0 || restarts(t, e, "lifecycle_0_0") != 0 {
					t.Fatalf("workers %v, restarts %v", got, restarts(t, e, "lifecycle_0_0"))
				}
			} else {
				deadline := time.Now().Add(time.Minute)
				for {
					resp, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 7)}})
					if err == nil && floats(resp.Outputs[0])[0] == 7 && e.srv.ModelReady("lifecycle", core.LatestVersion) {
						break
					}
					if err != nil && err.Error() != dead {
						t.Fatalf("while restarting: %v", err)
					}
					if time.Now().After(deadline) {
						t.Fatalf("no restart: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if n := restarts(t, e, "lifecycle_0_0"); n != 1 {
					t.Fatalf("restarts counted %v", n)
				}
			}
			logged := e.log.String()
			for _, want := range append(tc.log, `msg="Python worker died" model=lifecycle version=1 instance=lifecycle_0_0`) {
				if !strings.Contains(logged, want) {
					t.Errorf("the log lacks %q:\n%s", want, logged)
				}
			}
			all := lifecyclePIDs(t, marker)
			unloaded := make(chan error, 1)
			go func() { unloaded <- e.srv.Unload(context.Background(), "lifecycle") }()
			select {
			case err := <-unloaded:
				servertest.Must(t, err)
			case <-time.After(time.Minute):
				t.Fatal("the unload hangs")
			}
			for worker, child := range all {
				waitGone(t, "worker", worker)
				waitGone(t, "the model's child", child)
			}
			if n := restarts(t, e, "lifecycle_0_0"); n != -1 {
				t.Fatalf("the restart counter of an unloaded instance: %v", n)
			}
		})
	}
}

// TestSettingsRestart: restart-dead-workers is on unless set to false.
func TestSettingsRestart(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		keepDead bool
		err      bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"restart-dead-workers": "true"}, false, false},
		{map[string]string{"restart-dead-workers": "false"}, true, false},
		{map[string]string{"restart-dead-workers": "maybe"}, false, true},
	} {
		o, err := python.Settings(tc.settings)
		if (err != nil) != tc.err || o.KeepDead != tc.keepDead {
			t.Errorf("%v: KeepDead %v, err %v", tc.settings, o.KeepDead, err)
		}
	}
}

// TestOutputWithoutNewlines: a model that writes to stdout without ever
// ending a line has it logged in lines of at most 64 KiB as it writes, not
// held in memory; what a worker writes last without a newline is logged
// when it exits.
func TestOutputWithoutNewlines(t *testing.T) {
	e := start(t, options{keepDead: true}, "no_newline")
	if _, err := e.infer(&core.InferRequest{ModelName: "no_newline", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`msg=(x+) .*stream=stdout`)
	deadline := time.Now().Add(time.Minute)
	for {
		var sizes []int
		for _, m := range line.FindAllStringSubmatch(e.log.String(), -1) {
			sizes = append(sizes, len(m[1]))
		}
		if len(sizes) >= 3 {
			for _, n := range sizes {
				if n != 64<<10 {
					t.Fatalf("stdout logged in lines of %v bytes", sizes)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("200 KiB without a newline logged as %v", sizes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.infer(&core.InferRequest{ModelName: "no_newline", Inputs: []*core.Tensor{fp32("IN", []int64{1}, -1)}}); err == nil {
		t.Fatal("the worker did not exit")
	}
	deadline = time.Now().Add(time.Minute)
	last := regexp.MustCompile(`msg="last words" .*stream=stderr`)
	for !last.MatchString(e.log.String()) || !strings.Contains(e.log.String(), `msg="Python worker died" model=no_newline version=1 instance=no_newline_0 pid=`) ||
		!strings.Contains(e.log.String(), `status="exit status 1" stderr="last words"`) {
		if time.Now().After(deadline) {
			t.Fatal("the last partial line is not logged, nor in the death's log line")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gather collects the backend's metrics by family name.
func gather(t *testing.T, e *env) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.backend)
	families, err := reg.Gather()
	servertest.Must(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// TestSharedCustomMetrics: a custom metric that two instances created
// lives while either does: the worker that created it exiting leaves it,
// and its value, to the other. Label sets that read alike as text
// ({a: "b,c=d"} and {a: "b", c: "d"}) are two metrics.
func TestSharedCustomMetrics(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit, keepDead: true}, "shared_metrics")
	marker := t.TempDir()
	path := filepath.Join(e.root, "shared_metrics", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	cfg = append(cfg, `parameters { key: "marker" value: { string_value: "`+marker+`" } }`+"\n"...)
	servertest.Must(t, os.WriteFile(path, cfg, 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "shared_metrics", nil))

	sets := gather(t, e)["label_sets"].GetMetric()
	values := map[string]float64{}
	for _, m := range sets {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+":"+strconv.Quote(l.GetValue()))
		}
		values[strings.Join(labels, " ")] = m.GetGauge().GetValue()
	}
	if len(values) != 2 || values[`a:"b,c=d"`] != 1 || values[`a:"b" c:"d"`] != 2 {
		t.Fatalf("label sets: %v", values)
	}

	creator := 0
	entries, err := os.ReadDir(marker)
	servertest.Must(t, err)
	for _, entry := range entries {
		role, _ := os.ReadFile(filepath.Join(marker, entry.Name()))
		if string(role) == "creator" {
			creator, _ = strconv.Atoi(entry.Name())
		}
	}
	if creator == 0 {
		t.Fatal("no instance created the shared counter")
	}
	servertest.Must(t, syscall.Kill(creator, syscall.SIGKILL))
	waitGone(t, "the killed worker", creator)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(e.log.String(), `msg="Python worker died" model=shared_metrics`) {
		if time.Now().After(deadline) {
			t.Fatal("the worker's death was not noticed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := gather(t, e)
	if m := got["shared_total"].GetMetric(); len(m) != 1 || m[0].GetCounter().GetValue() != 2 {
		t.Fatalf("the shared counter after its creator died: %v", m)
	}
	if m := got["label_sets"].GetMetric(); len(m) != 2 {
		t.Fatalf("label sets after one instance died: %v", m)
	}
	servertest.Must(t, e.srv.Unload(context.Background(), "shared_metrics"))
	for name := range gather(t, e) {
		t.Errorf("%s left after the unload", name)
	}
}

// TestDecoupledInputsOutliveExecute: a decoupled model that reads its
// requests' inputs after execute returned, while later executions with
// other large inputs (the shared arena's size) run, reads its own.
func TestDecoupledInputsOutliveExecute(t *testing.T) {
	e := start(t, options{}, "keep_inputs")
	mv, release, err := e.srv.Acquire("keep_inputs", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	const n = 1 << 18 // 1 MiB of FP32, over the arena's threshold
	var wg sync.WaitGroup
	for c := range 8 {
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(c)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &core.InferRequest{ModelName: "keep_inputs", ModelVersion: core.LatestVersion,
				Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeFP32, Shape: []int64{n}, Data: data}}}
			var got []float32
			err := mv.InferStream(context.Background(), req, func(r *core.InferResponse, final bool) error {
				if r != nil {
					got = floats(output(r, "OUT"))
				}
				return nil
			})
			if err != nil || len(got) != 2 || got[0] != float32(c) || got[1] != float32(c) {
				t.Errorf("request %d read %v (err %v)", c, got, err)
			}
		}()
	}
	wg.Wait()
}

// TestSlowStreamHoldsOnlyItsRequest: a stream whose consumer does not take
// responses (a client that stopped reading) holds back its own request's
// sends only; the worker's other requests are answered meanwhile, and the
// held stream gets all its responses, in order, once it reads again.
func TestSlowStreamHoldsOnlyItsRequest(t *testing.T) {
	e := start(t, options{}, "repeat")
	mv, release, err := e.srv.Acquire("repeat", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	unblock := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	var held streamed
	heldDone := make(chan error, 1)
	go func() {
		// Its sends begin at once and execute returns 200 ms later
		// (LINGER): the execution ends while the consumer holds the first
		// response, and neither the worker nor the instance may wait for
		// that consumer.
		req := repeatRequest(10, 0)
		req.Inputs = append(req.Inputs, &core.Tensor{Name: "LINGER", DataType: core.TypeUint32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, 200000)})
		heldDone <- mv.InferStream(context.Background(), req, func(r *core.InferResponse, final bool) error {
			once.Do(func() { close(entered) })
			<-unblock
			return held.emit(r, final)
		})
	}()
	// Once the held stream's first send waits on its consumer, the other
	// requests must not wait for it.
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the held stream sent nothing")
	}
	others := make(chan error, 1)
	go func() {
		for range 3 {
			var got streamed
			if err := mv.InferStream(context.Background(), repeatRequest(3, 0), got.emit); err != nil || len(got.outs) != 3 || got.finals != 1 {
				others <- fmt.Errorf("%v, %d responses, %d finals", err, len(got.outs), got.finals)
				return
			}
		}
		others <- nil
	}()
	select {
	case err := <-others:
		servertest.Must(t, err)
	case <-time.After(time.Minute):
		close(unblock)
		t.Fatal("a stream that is not read holds back the worker's other requests")
	}
	close(unblock)
	select {
	case err := <-heldDone:
		servertest.Must(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the held stream did not finish once read")
	}
	if held.finals != 1 || len(held.outs) != 10 {
		t.Fatalf("held stream: %d responses, %d finals", len(held.outs), held.finals)
	}
	for i, v := range held.outs {
		if v != int32(i) {
			t.Fatalf("held stream: response %d is %d", i, v)
		}
	}
}

// TestUnloadHungFinalize: an unload whose finalize hangs returns once the
// stub timeout has passed, the worker and the child its model started
// killed, though the child holds the worker's stdout and stderr.
func TestUnloadHungFinalize(t *testing.T) {
	e := &env{root: copyModels(t, "lifecycle"), log: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.backend = python.New(python.Options{Executable: servertest.Python(t), StubTimeout: 5 * time.Second, ArenaBytes: python.DefaultArenaBytes, Logger: log})
	t.Cleanup(func() { _ = e.backend.Close() })
	e.srv = servertest.Start(t, servertest.Options{Repo: e.root, Mode: core.ModeExplicit, Backends: []core.Backend{e.backend}, Logger: log})
	marker := t.TempDir()
	path := filepath.Join(e.root, "lifecycle", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	cfg = append(cfg, `parameters { key: "marker" value: { string_value: "`+marker+`" } }
parameters { key: "hang_finalize" value: { string_value: "yes" } }
`...)
	servertest.Must(t, os.WriteFile(path, cfg, 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "lifecycle", nil))
	pids := lifecyclePIDs(t, marker)
	unloaded := make(chan error, 1)
	go func() { unloaded <- e.srv.Unload(context.Background(), "lifecycle") }()
	select {
	case err := <-unloaded:
		servertest.Must(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the unload hangs on a finalize that does not return")
	}
	for worker, child := range pids {
		if _, err := os.Stat(filepath.Join(marker, "finalized-"+strconv.Itoa(worker))); err != nil {
			t.Errorf("finalize was not called: %v", err)
		}
		waitGone(t, "worker", worker)
		waitGone(t, "the model's child", child)
	}
}

// TestRestartRetries: while a dead worker's replacement fails to
// initialize, the instance is not ready and its requests fail at once;
// restarts are retried (with a backoff) until one succeeds, and it is ready
// again. Only the restart that succeeded is counted.
func TestRestartRetries(t *testing.T) {
	const dead = "Stub process 'lifecycle_0_0' is not healthy."
	e, marker := startLifecycle(t, options{}, 1, map[string]string{})
	servertest.Must(t, os.WriteFile(filepath.Join(marker, "refuse"), nil, 0o644))
	for pid := range lifecyclePIDs(t, marker) {
		servertest.Must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	deadline := time.Now().Add(time.Minute)
	for strings.Count(e.log.String(), `msg="failed to restart the Python worker" model=lifecycle instance=lifecycle_0_0`) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no failed restarts logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.srv.ModelReady("lifecycle", core.LatestVersion) {
		t.Fatal("ready while no worker runs")
	}
	if _, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err == nil || err.Error() != dead {
		t.Fatalf("a request while no worker runs: %v", err)
	}
	servertest.Must(t, os.Remove(filepath.Join(marker, "refuse")))
	deadline = time.Now().Add(time.Minute)
	for !e.srv.ModelReady("lifecycle", core.LatestVersion) {
		if time.Now().After(deadline) {
			t.Fatal("not ready again once a restart could succeed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if n := restarts(t, e, "lifecycle_0_0"); n != 1 {
		t.Fatalf("restarts counted %v", n)
	}
}

// TestRestartKeepsModelServing: while a dead worker's restart is under way
// (its initialize held), the model's other instance serves every request
// and the model stays ready; with a single instance the model is not ready
// meanwhile, and a request sent during the restart waits for it instead of
// failing. Triton's rule, one unhealthy instance makes the model not ready,
// holds for restart-dead-workers=false (TestDeadWorker).
func TestRestartKeepsModelServing(t *testing.T) {
	for _, count := range []int{2, 1} {
		t.Run(fmt.Sprintf("%d instances", count), func(t *testing.T) {
			e, marker := startLifecycle(t, options{}, count, map[string]string{})
			infer := func() error {
				resp, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 5)}})
				if err == nil && floats(resp.Outputs[0])[0] != 5 {
					err = fmt.Errorf("answered %v", floats(resp.Outputs[0]))
				}
				return err
			}
			servertest.Must(t, infer())
			hold := filepath.Join(marker, "hold")
			servertest.Must(t, os.WriteFile(hold, nil, 0o644))
			var victim int
			for pid := range lifecyclePIDs(t, marker) {
				victim = pid
				break
			}
			servertest.Must(t, syscall.Kill(victim, syscall.SIGKILL))
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(e.log.String(), `msg="restarting the Python worker"`) {
				if time.Now().After(deadline) {
					t.Fatal("no restart began")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := e.srv.ModelReady("lifecycle", core.LatestVersion); got != (count > 1) {
				t.Fatalf("ready %v while one of %d instances restarts", got, count)
			}
			if count > 1 {
				for i := range 20 {
					if err := infer(); err != nil {
						t.Fatalf("request %d while the other instance restarts: %v", i, err)
					}
				}
			}
			waited := make(chan error, 1)
			go func() { waited <- infer() }()
			time.Sleep(300 * time.Millisecond)
			servertest.Must(t, os.Remove(hold))
			select {
			case err := <-waited:
				if err != nil {
					t.Fatalf("a request sent during the restart: %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("a request sent during the restart got no answer")
			}
			counted := func() float64 {
				total := 0.0
				for i := range count {
					total += restarts(t, e, fmt.Sprintf("lifecycle_0_%d", i))
				}
				return total
			}
			for counted() != 1 || !e.srv.ModelReady("lifecycle", core.LatestVersion) {
				if time.Now().After(deadline) {
					t.Fatalf("after the restart: ready %v, restarts counted %v", e.srv.ModelReady("lifecycle", core.LatestVersion), counted())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestReadinessOfAWedgedWorker: while a worker takes nothing from its socket
// (stopped with SIGSTOP) and an execute's 8 MiB frame, sent through the
// socket, waits to be written, a readiness check answers "not ready" within
// its deadline instead of waiting for its turn to write for ever; once the
// worker runs again the execute is answered and the model is ready.
func TestReadinessOfAWedgedWorker(t *testing.T) {
	e := start(t, options{noArena: true}, "wedged")
	data, err := os.ReadFile(filepath.Join(e.root, "wedged", "pid"))
	servertest.Must(t, err)
	pid, err := strconv.Atoi(string(data))
	servertest.Must(t, err)
	if !e.srv.ModelReady("wedged", core.LatestVersion) {
		t.Fatal("not ready before the worker was stopped")
	}
	servertest.Must(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	big := make([]float32, 2<<20)
	for i := range big {
		big[i] = float32(i % 1000)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := e.infer(&core.InferRequest{ModelName: "wedged", Inputs: []*core.Tensor{fp32("IN", []int64{int64(len(big))}, big...)}})
		if err == nil && floats(resp.Outputs[0])[len(big)-1] != big[len(big)-1] {
			err = errors.New("wrong answer")
		}
		answered <- err
	}()
	time.Sleep(500 * time.Millisecond) // the execute's frame fills the socket
	ready := make(chan bool, 1)
	go func() { ready <- e.srv.ModelReady("wedged", core.LatestVersion) }()
	select {
	case got := <-ready:
		if got {
			t.Fatal("ready while its worker is stopped")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the readiness check of a wedged worker did not return")
	}
	servertest.Must(t, syscall.Kill(pid, syscall.SIGCONT))
	resumed = true
	select {
	case err := <-answered:
		servertest.Must(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the execute was not answered once the worker ran again")
	}
	if !e.srv.ModelReady("wedged", core.LatestVersion) {
		t.Fatal("not ready once the worker runs again")
	}
}

// TestRestartWithHungInitialize: a restart whose initialize does not return
// keeps the instance out of service for at most the stub timeout; then the
// requests waiting for it fail with Triton's text and the model is not
// ready, and once initialize returns the instance serves again.
func TestRestartWithHungInitialize(t *testing.T) {
	const dead = "Stub process 'lifecycle_0_0' is not healthy."
	e, marker := startLifecycle(t, options{stubTimeout: 2 * time.Second}, 1, map[string]string{})
	hold := filepath.Join(marker, "hold")
	servertest.Must(t, os.WriteFile(hold, nil, 0o644))
	for pid := range lifecyclePIDs(t, marker) {
		servertest.Must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(e.log.String(), `msg="restarting the Python worker"`) {
		if time.Now().After(deadline) {
			t.Fatal("no restart began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := e.infer(&core.InferRequest{ModelName: "lifecycle", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}})
		failed <- err
	}()
	select {
	case err := <-failed:
		if err == nil || err.Error() != dead {
			t.Fatalf("a request while initialize hangs: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a request waited for a restart whose initialize hangs")
	}
	if e.srv.ModelReady("lifecycle", core.LatestVersion) {
		t.Fatal("ready while its only worker's initialize hangs")
	}
	servertest.Must(t, os.Remove(hold))
	servesAgain(t, e, "lifecycle", deadline)
}

// servesAgain waits until model, a one-input FP32 identity, answers a
// request with its value and is ready, failing the test at deadline.
func servesAgain(t *testing.T, e *env, model string, deadline time.Time) {
	t.Helper()
	for {
		resp, err := e.infer(&core.InferRequest{ModelName: model, Inputs: []*core.Tensor{fp32("IN", []int64{1}, 4)}})
		if err == nil && floats(resp.Outputs[0])[0] == 4 && e.srv.ModelReady(model, core.LatestVersion) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve again: %v", model, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartCounterAcrossReload: a reload loads the new copy of a model
// before it closes the old one; the restart counter of an instance name
// lives on through it, with its count.
func TestRestartCounterAcrossReload(t *testing.T) {
	e, marker := startLifecycle(t, options{}, 1, map[string]string{})
	for pid := range lifecyclePIDs(t, marker) {
		servertest.Must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	deadline := time.Now().Add(time.Minute)
	for restarts(t, e, "lifecycle_0_0") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("restarts counted %v", restarts(t, e, "lifecycle_0_0"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	path := filepath.Join(e.root, "lifecycle", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(path, append(cfg, []byte(`parameters { key: "reloaded" value: { string_value: "yes" } }`+"\n")...), 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "lifecycle", nil))
	for {
		n := restarts(t, e, "lifecycle_0_0")
		if n == 1 && len(workerPIDs()) == 1 {
			break // the old copy's worker is gone, the counter stays
		}
		if n != 1 || time.Now().After(deadline) {
			t.Fatalf("after the reload: restarts counted %v, workers %v", n, workerPIDs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
