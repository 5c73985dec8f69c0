package python_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inferd/inferd/core"
)

// BenchmarkRoundTrip is one identity request (FP32 [1,16], and [1,1<<20]:
// 4 MiB) through the core to a worker and back, without a frontend: the Python backend's own cost
// per request (BENCHMARKS.md "Python backend"). Besides the time it
// reports the CPU each side spent per request, which load elsewhere on
// the machine changes less than the time.
func BenchmarkRoundTrip(b *testing.B) {
	e := start(b, options{}, "identity")
	req := newIdentityRequest
	if _, err := e.infer(req()); err != nil {
		b.Fatal(err)
	}
	b.Run("c1", func(b *testing.B) {
		r := req()
		cpu := startCPU()
		for b.Loop() {
			if _, err := e.infer(r); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("c8", func(b *testing.B) {
		b.SetParallelism(4) // 4 × GOMAXPROCS(2)
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			r := req()
			for pb.Next() {
				if _, err := e.infer(r); err != nil {
					b.Error(err)
					return
				}
			}
		})
		cpu.report(b)
	})
	// 4 MiB each way: through the shared arena, where the worker's answer
	// is a view of its input.
	b.Run("4MiB/c1", func(b *testing.B) {
		r := &core.InferRequest{ModelName: "identity", Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 1 << 20}, make([]float32, 1<<20)...)}}
		cpu := startCPU()
		for b.Loop() {
			if _, err := e.infer(r); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
}

// newIdentityRequest is one small request to the identity model.
func newIdentityRequest() *core.InferRequest {
	return &core.InferRequest{ModelName: "identity", Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 16}, make([]float32, 16)...)}}
}

// cpuClock reads the CPU time of this process and of its Python workers
// (its children, still running, so not in RUSAGE_CHILDREN), and how often
// the threads of either went to sleep (their voluntary context switches:
// each is a wake-up to pay for later).
type cpuClock struct{ self, workers, selfSleeps, workerSleeps int64 }

func startCPU() cpuClock {
	return cpuClock{selfCPU(), workersCPU(), sleeps([]string{"self"}), sleeps(childPIDs())}
}

func (c cpuClock) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(selfCPU()-c.self)/1e3/n, "server-cpu-µs/op")
	b.ReportMetric(float64(workersCPU()-c.workers)/1e3/n, "worker-cpu-µs/op")
	b.ReportMetric(float64(sleeps([]string{"self"})-c.selfSleeps)/n, "server-sleeps/op")
	b.ReportMetric(float64(sleeps(childPIDs())-c.workerSleeps)/n, "worker-sleeps/op")
}

// workerPIDs are the process ids of this process's children.
func childPIDs() []string {
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []string
	for _, t := range tasks {
		kids, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		pids = append(pids, strings.Fields(string(kids))...)
	}
	return pids
}

// sleeps sums the voluntary context switches of the threads of pids.
func sleeps(pids []string) int64 {
	var total int64
	for _, pid := range pids {
		tasks, _ := os.ReadDir("/proc/" + pid + "/task")
		for _, t := range tasks {
			status, _ := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/status")
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					total += n
				}
			}
		}
	}
	return total
}

func selfCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// workersCPU sums utime and stime of this process's children, in ns.
func workersCPU() int64 { return cpuOf(childPIDs()) }

// cpuOf sums utime and stime of the processes pids, in ns.
func cpuOf(pids []string) int64 {
	var total int64
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and
		// stime are the 12th and 13th, in clock ticks (100 Hz).
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += (u + s) * 1e7
	}
	return total
}
