package python_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// startForked loads testdata's forked model with count instances and the
// given string parameters (FORK_INSTANCES among them), and a marker folder
// where its workers note what they ran.
func startForked(t *testing.T, o options, count int, params map[string]string) (*env, string) {
	t.Helper()
	o.mode = core.ModeExplicit
	e := start(t, o, "forked")
	marker := t.TempDir()
	path := filepath.Join(e.root, "forked", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	text := strings.Replace(string(cfg), "count: 1", "count: "+strconv.Itoa(count), 1)
	params["marker"] = marker
	for k, v := range params {
		text += `parameters { key: "` + k + `" value: { string_value: "` + v + `" } }` + "\n"
	}
	servertest.Must(t, os.WriteFile(path, []byte(text), 0o644))
	servertest.Must(t, e.srv.Load(context.Background(), "forked", nil))
	return e, marker
}

// forkedTotal is the model's sum over its first 1000 weights (i % 7).
func forkedTotal() float32 {
	var s float32
	for i := range 1000 {
		s += float32(i % 7)
	}
	return s
}

// askForked sends x and returns OUT and the pid that served it.
func askForked(e *env, x float32) (float32, int, error) {
	resp, err := e.infer(&core.InferRequest{ModelName: "forked", Inputs: []*core.Tensor{fp32("IN", []int64{1}, x)}})
	if err != nil {
		return 0, 0, err
	}
	pid := output(resp, "PID")
	if pid == nil || len(pid.Data) != 8 {
		return 0, 0, fmt.Errorf("no PID output in %v", resp.Outputs)
	}
	return floats(output(resp, "OUT"))[0], int(binary.LittleEndian.Uint64(pid.Data)), nil
}

// parentOf is pid's parent, from /proc; 0 when pid is gone.
func parentOf(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}

// noted lists the pids of the marker files called prefix-<pid>.
func noted(t *testing.T, marker, prefix string) []int {
	t.Helper()
	entries, err := os.ReadDir(marker)
	servertest.Must(t, err)
	var pids []int
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), prefix+"-"); ok {
			pid, err := strconv.Atoi(rest)
			servertest.Must(t, err)
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// servingPIDs asks until every one of n instances has answered (the
// scheduler spreads concurrent requests), checking each answer.
func servingPIDs(t *testing.T, e *env, n int) []int {
	t.Helper()
	seen := map[int]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(seen) < n {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for c := range 2 * n {
			wg.Go(func() {
				got, pid, err := askForked(e, float32(c))
				if err != nil || got != float32(c)*2+forkedTotal() {
					t.Errorf("forked(%d) = %v, %v", c, got, err)
					return
				}
				mu.Lock()
				seen[pid] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		if t.Failed() || time.Now().After(deadline) {
			t.Fatalf("%d of %d instances answered", len(seen), n)
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// TestForkedInstancesAnswerAsSeparate: concurrent requests over forked
// instances get the answers separate instances give; initialize ran once,
// in the zygote, which is the server's child and the parent of every
// instance's worker.
func TestForkedInstancesAnswerAsSeparate(t *testing.T) {
	const instances = 4
	answers := map[string][]float32{}
	for _, fork := range []string{"false", "true"} {
		t.Run("FORK_INSTANCES="+fork, func(t *testing.T) {
			e, marker := startForked(t, options{}, instances, map[string]string{"FORK_INSTANCES": fork})
			pids := servingPIDs(t, e, instances)
			got := make([]float32, 64)
			var wg sync.WaitGroup
			for c := range 8 {
				wg.Go(func() {
					for i := c; i < len(got); i += 8 {
						v, _, err := askForked(e, float32(i)*0.5)
						if err != nil {
							t.Error(err)
							return
						}
						got[i] = v
					}
				})
			}
			wg.Wait()
			answers[fork] = got
			inits := noted(t, marker, "init")
			parents := map[int]bool{}
			for _, pid := range pids {
				parents[parentOf(pid)] = true
			}
			if fork == "false" {
				if len(inits) != instances || !parents[os.Getpid()] || len(parents) != 1 {
					t.Fatalf("separate instances: initialize ran in %v; parents %v", inits, parents)
				}
				return
			}
			if len(inits) != 1 || len(parents) != 1 || !parents[inits[0]] || parentOf(inits[0]) != os.Getpid() {
				t.Fatalf("forked: initialize ran in %v; the workers' parents %v", inits, parents)
			}
			name, err := os.ReadFile(filepath.Join(marker, "init-"+strconv.Itoa(inits[0])))
			servertest.Must(t, err)
			if string(name) != "forked_0_0" {
				t.Errorf("initialize saw model_instance_name %q, want the first instance's", name)
			}
			if !strings.Contains(e.log.String(), "Python zygote ready") {
				t.Error("the log does not say the zygote is ready")
			}
		})
	}
	if !slices.Equal(answers["true"], answers["false"]) {
		t.Fatalf("forked answers %v, separate %v", answers["true"], answers["false"])
	}
}

// TestForkedWorkerKilled: a forked worker killed with SIGKILL fails the
// request it held; its sibling and the zygote live on, and it is forked
// again from the same zygote.
func TestForkedWorkerKilled(t *testing.T) {
	e, marker := startForked(t, options{}, 2, map[string]string{"FORK_INSTANCES": "true"})
	before := servingPIDs(t, e, 2)
	zygote := parentOf(before[0])
	held := make(chan error, 1)
	go func() {
		_, _, err := askForked(e, -2)
		held <- err
	}()
	var victim int
	for deadline := time.Now().Add(time.Minute); victim == 0; time.Sleep(10 * time.Millisecond) {
		if pids := noted(t, marker, "executing"); len(pids) > 0 {
			victim = pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the model")
		}
	}
	servertest.Must(t, syscall.Kill(victim, syscall.SIGKILL))
	select {
	case err := <-held:
		if err == nil || !strings.Contains(err.Error(), "is not healthy") {
			t.Fatalf("the request the killed worker held: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the request the killed worker held did not fail")
	}
	waitGone(t, "the killed worker", victim)
	after := servingPIDs(t, e, 2)
	if slices.Contains(after, victim) {
		t.Fatalf("the killed worker %d still answers: %v", victim, after)
	}
	for _, pid := range after {
		if parentOf(pid) != zygote {
			t.Fatalf("worker %d's parent is %d, not the zygote %d", pid, parentOf(pid), zygote)
		}
	}
	sibling := before[0]
	if sibling == victim {
		sibling = before[1]
	}
	if !slices.Contains(after, sibling) {
		t.Fatalf("the sibling %d was replaced: %v", sibling, after)
	}
	if !strings.Contains(e.log.String(), `status="killed by signal SIGKILL"`) {
		t.Error("the log does not say how the worker died")
	}
}

// TestForkedUnloadReload: an unload finalizes every forked worker (not
// the zygote, which served nothing) and leaves no process behind; a
// reload forks anew.
func TestForkedUnloadReload(t *testing.T) {
	e, marker := startForked(t, options{}, 3, map[string]string{"FORK_INSTANCES": "true"})
	for round := range 2 {
		pids := servingPIDs(t, e, 3)
		zygote := parentOf(pids[0])
		servertest.Must(t, e.srv.Unload(context.Background(), "forked"))
		waitGone(t, "worker", pids...)
		waitGone(t, "zygote", zygote)
		finalized := noted(t, marker, "finalized")
		for _, pid := range pids {
			if !slices.Contains(finalized, pid) {
				t.Errorf("round %d: worker %d did not finalize (%v)", round, pid, finalized)
			}
		}
		if slices.Contains(finalized, zygote) {
			t.Errorf("round %d: the zygote ran finalize", round)
		}
		if left := servertest.Children(zygote); len(left) > 0 {
			t.Fatalf("round %d: the zygote's children %v remain", round, left)
		}
		if left := workerPIDs(); len(left) > 0 {
			t.Fatalf("round %d: workers %v remain", round, left)
		}
		if round == 0 {
			servertest.Must(t, e.srv.Load(context.Background(), "forked", nil))
		}
	}
}

// TestZygoteKilled: a dead zygote takes its children with it; they are
// forked again from a new one.
func TestZygoteKilled(t *testing.T) {
	e, _ := startForked(t, options{}, 2, map[string]string{"FORK_INSTANCES": "true"})
	before := servingPIDs(t, e, 2)
	zygote := parentOf(before[0])
	servertest.Must(t, syscall.Kill(zygote, syscall.SIGKILL))
	waitGone(t, "worker", before...)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, _, err := askForked(e, 1); err == nil && e.srv.ModelReady("forked", core.LatestVersion) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the model does not serve again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := servingPIDs(t, e, 2)
	fresh := parentOf(after[0])
	if fresh == zygote || parentOf(fresh) != os.Getpid() || parentOf(after[1]) != fresh {
		t.Fatalf("workers %v under %d, after the zygote %d died", after, fresh, zygote)
	}
	if !strings.Contains(e.log.String(), "Python zygote died") {
		t.Error("the log does not say the zygote died")
	}
}

// TestForkRefusedWithThreads: a model whose initialize leaves a thread
// running is not forked: the log says why, and each instance runs a
// worker of its own.
func TestForkRefusedWithThreads(t *testing.T) {
	e, _ := startForked(t, options{}, 2, map[string]string{"FORK_INSTANCES": "true", "threads": "yes"})
	for _, pid := range servingPIDs(t, e, 2) {
		if parentOf(pid) != os.Getpid() {
			t.Fatalf("worker %d is not the server's child", pid)
		}
	}
	if logged := e.log.String(); !strings.Contains(logged, "FORK_INSTANCES refused") || !strings.Contains(logged, "model-sleeper") {
		t.Fatalf("the log lacks the refusal:\n%s", logged)
	}
}

// TestForkedShutdown: Shutdown finalizes every forked worker (the zygote
// waits for its children before it exits, so none is killed) and leaves
// no process behind.
func TestForkedShutdown(t *testing.T) {
	e, marker := startForked(t, options{}, 3, map[string]string{"FORK_INSTANCES": "true"})
	pids := servingPIDs(t, e, 3)
	zygote := parentOf(pids[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	servertest.Must(t, e.backend.Shutdown(ctx))
	waitGone(t, "worker", append(pids, zygote)...)
	finalized := noted(t, marker, "finalized")
	for _, pid := range pids {
		if !slices.Contains(finalized, pid) {
			t.Errorf("worker %d did not finalize (%v)", pid, finalized)
		}
	}
	if left := workerPIDs(); len(left) > 0 {
		t.Fatalf("workers %v remain after Shutdown", left)
	}
}

// TestForkedInitializeFails: an initialize that raises in the zygote fails
// the load with its error, and leaves no process behind.
func TestForkedInitializeFails(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit, allowFails: true}, "forked")
	path := filepath.Join(e.root, "forked", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(t, err)
	text := strings.Replace(string(cfg), "count: 1", "count: 2", 1) +
		`parameters { key: "FORK_INSTANCES" value: { string_value: "true" } }` + "\n" +
		`parameters { key: "fail" value: { string_value: "yes" } }` + "\n"
	servertest.Must(t, os.WriteFile(path, []byte(text), 0o644))
	err = e.srv.Load(context.Background(), "forked", nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to initialize") {
		t.Fatalf("load: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(workerPIDs()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("workers %v remain after a failed load", workerPIDs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForkedWorkerExits: a forked worker that exits by itself is logged
// with the status its zygote reaped and the last lines of its own stderr,
// under its own instance name, and comes back.
func TestForkedWorkerExits(t *testing.T) {
	e, _ := startForked(t, options{}, 1, map[string]string{"FORK_INSTANCES": "true"})
	before := servingPIDs(t, e, 1)
	if _, _, err := askForked(e, -3); err == nil || !strings.Contains(err.Error(), "Stub process 'forked_0_0' is not healthy") {
		t.Fatalf("the request that ended the worker: %v", err)
	}
	waitGone(t, "the exited worker", before[0])
	deadline := time.Now().Add(time.Minute)
	for {
		if _, pid, err := askForked(e, 1); err == nil && pid != before[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not come back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	logged := e.log.String()
	for _, want := range []string{`msg="Python worker died" model=forked version=1 instance=forked_0_0`, `status="exit status 3"`,
		`stderr="forked: exiting on -3"`, `msg="forked: exiting on -3" model=forked instance=forked_0_0 stream=stderr`} {
		if !strings.Contains(logged, want) {
			t.Errorf("the log lacks %q:\n%s", want, logged)
		}
	}
}
