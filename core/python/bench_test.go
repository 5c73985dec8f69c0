package python_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inferd/inferd/core"
)

// BenchmarkRoundTrip is one identity request through the core to a
// worker and back, without a frontend: the Python backend's own cost
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
}

// newIdentityRequest is one small request to the identity model.
func newIdentityRequest() *core.InferRequest {
	return &core.InferRequest{ModelName: "identity", Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 16}, make([]float32, 16)...)}}
}

// cpuClock reads the CPU time of this process and of its Python workers
// (its children, still running, so not in RUSAGE_CHILDREN).
type cpuClock struct{ self, workers int64 }

func startCPU() cpuClock { return cpuClock{selfCPU(), workersCPU()} }

func (c cpuClock) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(selfCPU()-c.self)/1e3/n, "server-cpu-µs/op")
	b.ReportMetric(float64(workersCPU()-c.workers)/1e3/n, "worker-cpu-µs/op")
}

func selfCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// workersCPU sums utime and stime of this process's children, in ns.
func workersCPU() int64 {
	tasks, _ := os.ReadDir("/proc/self/task")
	var total int64
	for _, t := range tasks {
		kids, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, pid := range strings.Fields(string(kids)) {
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
	}
	return total
}
