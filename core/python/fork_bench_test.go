package python_test

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
)

// readyTimes is the Python backend, noting when each instance is ready
// (its NewInstance returned): measured from outside the backend.
type readyTimes struct {
	*core.Server
	mu    sync.Mutex
	ready []time.Time
}

type timedBackend struct {
	core.Backend
	t *readyTimes
}

func (b timedBackend) NewInstance(ctx context.Context, spec core.InstanceSpec) (core.Instance, error) {
	in, err := b.Backend.NewInstance(ctx, spec)
	b.t.mu.Lock()
	b.t.ready = append(b.t.ready, time.Now())
	b.t.mu.Unlock()
	return in, err
}

// pss is the proportional set size of pid in bytes (/proc/PID/smaps_rollup).
func pss(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	servertest.Must(tb, err)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			servertest.Must(tb, err)
			return kb << 10
		}
	}
	tb.Fatalf("no Pss in /proc/%d/smaps_rollup", pid)
	return 0
}

// pythonProcesses are the server's workers and their forked children.
func pythonProcesses() []int {
	var out []int
	for _, pid := range workerPIDs() {
		out = append(out, pid)
		for _, child := range servertest.Children(pid) {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(child), "cmdline"))
			if err == nil && bytes.Contains(cmdline, []byte("inferd_python_worker.py")) {
				out = append(out, child)
			}
		}
	}
	return out
}

// BenchmarkForkedInstances loads the forked model (100 MiB of numpy
// arrays built in initialize) with 8 instances, as separate workers and
// forked from a zygote, and reports the total PSS of its processes (the
// zygote included) over one separate worker's, and the time from the
// first instance ready to the eighth (BENCHMARKS.md, "Forked Python
// instances"):
//
//	go test ./core/python/ -run '^$' -bench BenchmarkForkedInstances -benchtime 3x
func BenchmarkForkedInstances(b *testing.B) {
	const instances = 8
	one := loadForBench(b, 1, "false", func(*readyTimes) int64 {
		pids := pythonProcesses()
		if len(pids) != 1 {
			b.Fatalf("one instance, processes %v", pids)
		}
		return pss(b, pids[0])
	})
	b.Logf("one worker: PSS %.1f MiB", float64(one)/(1<<20))
	for _, fork := range []string{"false", "true"} {
		name := map[string]string{"false": "separate", "true": "forked"}[fork]
		b.Run(name, func(b *testing.B) {
			var total int64
			var spread time.Duration
			for range b.N {
				loadForBench(b, instances, fork, func(rt *readyTimes) int64 {
					for _, pid := range pythonProcesses() {
						total += pss(b, pid)
					}
					spread += rt.ready[len(rt.ready)-1].Sub(rt.ready[0])
					return 0
				})
			}
			n := float64(b.N)
			b.ReportMetric(float64(total)/n/(1<<20), "PSS-MiB")
			b.ReportMetric(float64(total)/n/float64(one), "PSS/one-worker")
			b.ReportMetric(float64(spread.Milliseconds())/n, "first-to-last-ready-ms")
		})
	}
}

// loadForBench loads the forked model with count instances and 100 MiB of
// weights, runs measure on it once it serves, and unloads it.
func loadForBench(b *testing.B, count int, fork string, measure func(*readyTimes) int64) int64 {
	b.Helper()
	root := copyModels(b, "forked")
	path := filepath.Join(root, "forked", "config.pbtxt")
	cfg, err := os.ReadFile(path)
	servertest.Must(b, err)
	text := strings.Replace(string(cfg), "count: 1", "count: "+strconv.Itoa(count), 1) +
		`parameters { key: "weights_mb" value: { string_value: "100" } }` + "\n" +
		`parameters { key: "FORK_INSTANCES" value: { string_value: "` + fork + `" } }` + "\n"
	servertest.Must(b, os.WriteFile(path, []byte(text), 0o644))
	rt := &readyTimes{}
	quiet := slog.New(slog.DiscardHandler)
	be := python.New(python.Options{Executable: servertest.Python(b), ArenaBytes: python.DefaultArenaBytes, Logger: quiet})
	defer be.Close()
	rt.Server = servertest.Start(b, servertest.Options{Repo: root, Mode: core.ModeExplicit, Backends: []core.Backend{timedBackend{be, rt}}, Logger: quiet})
	servertest.Must(b, rt.Load(context.Background(), "forked", nil))
	defer func() { servertest.Must(b, rt.Unload(context.Background(), "forked")) }()
	if len(rt.ready) != count {
		b.Fatalf("%d instances ready of %d", len(rt.ready), count)
	}
	// Every instance serves once before the measure.
	for range 2 * count {
		if _, err := rt.Infer(context.Background(), &core.InferRequest{ModelName: "forked", ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
			b.Fatal(err)
		}
	}
	return measure(rt)
}
