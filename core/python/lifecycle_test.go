package python_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
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
