package autopilot

import (
	"math"
	"runtime"
	"time"
)

// The CPU bound of an in-process backend's capacity. An ONNX Runtime
// instance's executions keep its intra-op threads busy on the server's own
// CPUs, which the frontends (and, on a shared host, whatever else runs
// there) need too: a capacity counted from execution costs alone assumes
// the instances have the CPUs to themselves. The figure-1 MLP at one
// instance × 2 threads on two CPUs was reported at 7,419 infer/s and
// saturated at 4,695 (BENCHMARKS.md "The ONNX figure-1 MLP"). So each
// period also measures the CPU the process used outside executions per
// row, and what the rest of the host used; a batch of k rows costs
// threads·c(k)/k of CPU per row plus that, and the CPUs left over bound
// the rate (cpuBound).

// cpuTimes is the CPU time used up to a moment: by this process, and by
// the whole host where the process may use all of it (host false where it
// may not: a CPU quota, or no host figures on this system).
type cpuTimes struct {
	at       time.Time
	proc     time.Duration
	hostBusy time.Duration
	host     bool
	// cpus is what the process may use: the host's CPUs with host, else
	// GOMAXPROCS (which the Go runtime sets from a container's CPU quota).
	cpus int
}

// readCPU samples cpuTimes now: the process from getrusage, the host
// from /proc/stat where the process may use every CPU (cpu_linux.go).
func readCPU() cpuTimes {
	t := cpuTimes{at: time.Now(), proc: processCPU(), cpus: runtime.GOMAXPROCS(0)}
	if t.cpus >= runtime.NumCPU() {
		if busy, ok := hostBusy(); ok {
			t.hostBusy, t.host, t.cpus = busy, true, runtime.NumCPU()
		}
	}
	return t
}

// cpuBound is what the CPUs allow a model: avail CPUs for its requests,
// perRow nanoseconds of CPU each row costs outside executions, and theta,
// the CPUs an execution keeps busy. Zero: no bound (not measured, or a
// backend whose executions run in other processes).
type cpuBound struct {
	avail, perRow, theta float64
}

// rate is the rows per second the CPUs carry in batches that cost c
// nanoseconds for k rows (+Inf with no bound).
func (cb cpuBound) rate(k int64, c float64) float64 {
	per := cb.theta*c/float64(k) + cb.perRow
	if cb.avail <= 0 || per <= 0 {
		return math.Inf(1)
	}
	return cb.avail * 1e9 / per
}

// cpuBoundOf is the bound measured between two samples over which rows
// rows were served and the model's executions took execNs, each keeping
// threads CPUs busy. The rest of the host's use counts as a fixed
// background; the process's own, beyond the executions, as a cost per
// row. Executions are never counted as more CPU than the process used (an
// execution that waits keeps no thread busy).
func cpuBoundOf(from, to cpuTimes, rows, execNs, threads float64) cpuBound {
	wall := float64(to.at.Sub(from.at))
	if threads <= 0 || rows <= 0 || wall <= 0 || to.cpus <= 0 {
		return cpuBound{}
	}
	proc := float64(to.proc - from.proc) // ns of CPU
	exec := execNs * threads
	if exec > proc {
		if exec <= 0 || proc <= 0 {
			return cpuBound{}
		}
		threads *= proc / exec
		exec = proc
	}
	avail := float64(to.cpus)
	if from.host && to.host {
		avail -= max(0, float64(to.hostBusy-from.hostBusy)-proc) / wall
	}
	if float64(to.cpus)-avail+proc/wall < minBusy*float64(to.cpus) {
		return cpuBound{}
	}
	return cpuBound{avail: max(avail, 0.05*float64(to.cpus)), perRow: (proc - exec) / rows, theta: threads}
}

// minBusy is the share of the CPUs that must be busy for a window to
// measure the bound. Below it, the fixed costs and wake-ups of a light
// load spread over few rows and overstate what a row costs: the MLP at
// 200 rows/s measured 0.45 ms of CPU a row outside executions, a bound of
// 190 rows/s, where rows at 3,000/s cost a tenth of that.
const minBusy = 0.5

// fold averages a window's bound into what earlier windows measured
// (halves, as the cost model decays), so that one window's noise in the
// split between executions and the rest moves the capacity by half; a
// window that measured none leaves it.
func (cb cpuBound) fold(next cpuBound) cpuBound {
	switch {
	case next == cpuBound{}:
		return cb
	case cb == cpuBound{}:
		return next
	}
	return cpuBound{avail: (cb.avail + next.avail) / 2, perRow: (cb.perRow + next.perRow) / 2, theta: (cb.theta + next.theta) / 2}
}
