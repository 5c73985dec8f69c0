// Package sidebyside measures benchmarks side by side in one run, as
// BENCHMARKS.md quotes them: each sub-benchmark's p50 latency and
// throughput over concurrent workers, and a closing "ratio" sub-benchmark
// reporting the quotients of their medians across -count repetitions. The
// HTTP and gRPC benchmarks share it.
package sidebyside

import (
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Result is one sub-benchmark's measurement.
type Result struct {
	P50      time.Duration
	ReqPerS  float64 // calls per second
	InferPer float64 // inferences per second: calls per second × batch
}

// Measure runs b.N calls over conc workers and reports p50 latency (µs),
// throughput (req/s) and the CPU cores the process kept busy meanwhile.
func Measure(b *testing.B, conc int, call func() error) Result {
	return MeasureBatch(b, conc, 1, call)
}

// MeasureBatch is Measure for calls that each carry batch inferences; for
// batch > 1 it also reports infer/s.
func MeasureBatch(b *testing.B, conc, batch int, call func() error) Result {
	lat := make([]time.Duration, b.N)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := call(); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := Result{P50: lat[len(lat)/2], ReqPerS: float64(b.N) / elapsed.Seconds()}
	r.InferPer = r.ReqPerS * float64(batch)
	b.ReportMetric(float64(r.P50.Microseconds()), "p50-µs")
	b.ReportMetric(r.ReqPerS, "req/s")
	if batch > 1 {
		b.ReportMetric(r.InferPer, "infer/s")
	}
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu-cores")
	return r
}

// cpuTime is the user and system CPU time of this process so far: load
// generator, server and ONNX Runtime threads together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Results keeps the measurements of each sub-benchmark of one benchmark, so
// that a closing "ratio" sub-benchmark can report the side-by-side ratios
// that BENCHMARKS.md quotes. The framework calls a sub-benchmark's function
// several times (b.N = 1, then more) with one B, and once more with a new B
// for each -count repetition: a measurement is the last call with a B.
type Results map[string]*measurements

type measurements struct {
	last *testing.B
	runs []Result
}

// Run measures call as sub-benchmark name (each call carries batch
// inferences).
func (rs Results) Run(b *testing.B, name string, conc, batch int, call func() error) {
	b.Run(name, func(b *testing.B) { rs.Record(b, name, MeasureBatch(b, conc, batch, call)) })
}

// Record keeps r, measured by b in sub-benchmark name.
func (rs Results) Record(b *testing.B, name string, r Result) {
	m := rs[name]
	if m == nil {
		m = &measurements{}
		rs[name] = m
	}
	if m.last == b {
		m.runs[len(m.runs)-1] = r
		return
	}
	m.last, m.runs = b, append(m.runs, r)
}

// median is the median over the repetitions of one metric of name's
// measurements; ok is false when name was not measured.
func (rs Results) median(name string, of func(Result) float64) (v float64, ok bool) {
	m := rs[name]
	if m == nil || len(m.runs) == 0 {
		return 0, false
	}
	vs := make([]float64, len(m.runs))
	for i, r := range m.runs {
		vs[i] = of(r)
	}
	sort.Float64s(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, true
	}
	return vs[len(vs)/2], true
}

// Ratio is one reported quotient of two sub-benchmarks' results.
type Ratio struct {
	Unit     string // metric name, e.g. "json/bare-p50-c1"
	Num, Den string // sub-benchmark names
	Of       func(Result) float64
}

// P50Of, ReqOf and InferOf pick a Ratio's metric.
func P50Of(r Result) float64   { return float64(r.P50) }
func ReqOf(r Result) float64   { return r.ReqPerS }
func InferOf(r Result) float64 { return r.InferPer }

// Report runs the "ratio" sub-benchmark, which reports every ratio whose two
// sides were measured in this run (a -bench filter may leave some out). With
// -count N each side was measured N times in a row, and the ratio is that of
// their medians.
func (rs Results) Report(b *testing.B, ratios ...Ratio) {
	b.Run("ratio", func(b *testing.B) {
		b.ReportMetric(0, "ns/op") // nothing is timed here
		n := 0
		for _, q := range ratios {
			num, ok1 := rs.median(q.Num, q.Of)
			den, ok2 := rs.median(q.Den, q.Of)
			if !ok1 || !ok2 || den == 0 {
				continue
			}
			b.ReportMetric(num/den, q.Unit)
			n++
		}
		if n == 0 {
			b.Skip("no pair of sub-benchmarks was measured in this run")
		}
	})
}
