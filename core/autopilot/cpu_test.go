package autopilot

import (
	"math"
	"testing"
	"time"
)

// TestCPUBoundOf: the bound a period's CPU figures give. One instance ×
// 2 threads on 2 CPUs, 4,000 rows in a second: executions of 1 ms each
// 8 rows (500 of them, 0.5 s, so 1 CPU-second on 2 threads), the process
// 1.4 CPU-seconds, the host 1.8.
func TestCPUBoundOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration, proc, host time.Duration, onHost bool) cpuTimes {
		return cpuTimes{at: t0.Add(d), proc: proc, hostBusy: host, host: onHost, cpus: 2}
	}
	s := time.Second
	for _, tc := range []struct {
		name             string
		from, to         cpuTimes
		rows, exec, thr  float64
		avail, perRow, θ float64
	}{
		{"host: the rest of it is background", at(0, 0, 0, true), at(s, 1400*time.Millisecond, 1800*time.Millisecond, true), 4000, 0.5e9, 2,
			1.6, 0.4e9 / 4000, 2},
		{"a CPU quota: the process alone", at(0, 0, 0, false), at(s, 1400*time.Millisecond, 0, false), 4000, 0.5e9, 2,
			2, 0.4e9 / 4000, 2},
		{"executions counted past what the process used", at(0, 0, 0, false), at(s, 1200*time.Millisecond, 0, false), 4000, 0.8e9, 2,
			2, 0, 1.5},
		{"the CPUs half idle: no bound", at(0, 0, 0, true), at(s, 600*time.Millisecond, 900*time.Millisecond, true), 200, 0.1e9, 2,
			0, 0, 0},
		{"the host busier than the CPUs: a floor", at(0, 0, 0, true), at(s, 100*time.Millisecond, 5*time.Second, true), 4000, 0.01e9, 2,
			0.1, 0.08e9 / 4000, 2},
		{"no rows", at(0, 0, 0, true), at(s, s, s, true), 0, 0.5e9, 2, 0, 0, 0},
		{"no threads (another process runs it)", at(0, 0, 0, true), at(s, s, s, true), 4000, 0.5e9, 0, 0, 0, 0},
		{"no process time (not Linux)", at(0, 0, 0, false), at(s, 0, 0, false), 4000, 0.5e9, 2, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := cpuBoundOf(tc.from, tc.to, tc.rows, tc.exec, tc.thr)
			if math.Abs(cb.avail-tc.avail) > 1e-9 || math.Abs(cb.perRow-tc.perRow) > 1e-6 || math.Abs(cb.theta-tc.θ) > 1e-9 {
				t.Errorf("got %+v, want avail %v perRow %v theta %v", cb, tc.avail, tc.perRow, tc.θ)
			}
		})
	}
}

// TestCapacityCPUBound: the capacity is the lesser of what the instances
// execute and what the CPUs carry, and cpuBinds says which.
func TestCapacityCPUBound(t *testing.T) {
	// Executions of 0.3 + 0.1·k ms on one instance: 8 rows in 1.1 ms,
	// 7,273 rows/s. Two threads an execution and 0.1 ms of CPU a row
	// besides, on 1.6 free CPUs: 1.6 / (2·1.1/8 + 0.1) ms = 4,267 rows/s.
	m := model{a: 0.3e6, s: 0.1e6, b: bounds{instances: 1}}
	if got := m.capacity(8); math.Abs(got-8/1.1e-3) > 1 || m.cpuBinds(8) {
		t.Fatalf("no bound: capacity %.0f, cpuBinds %v", got, m.cpuBinds(8))
	}
	m.cpu = cpuBound{avail: 1.6, perRow: 0.1e6, theta: 2}
	if got, want := m.capacity(8), 1.6e9/(2*1.1e6/8+0.1e6); math.Abs(got-want) > 1 || !m.cpuBinds(8) {
		t.Fatalf("bounded: capacity %.0f, want %.0f, cpuBinds %v", got, want, m.cpuBinds(8))
	}
	// Ample CPUs: the instances bind again.
	m.cpu = cpuBound{avail: 16, perRow: 0.01e6, theta: 2}
	if got := m.capacity(8); math.Abs(got-8/1.1e-3) > 1 || m.cpuBinds(8) {
		t.Fatalf("ample: capacity %.0f, cpuBinds %v", got, m.cpuBinds(8))
	}
}

// TestReadCPU: the process's CPU time grows with work done, and the host's
// is read where the process may use every CPU.
func TestReadCPU(t *testing.T) {
	a := readCPU()
	// Busy until the process has used 10 ms more CPU, however the machine
	// shares its cores; a clock that never moves fails after 10 s.
	b := a
	for deadline := time.Now().Add(10 * time.Second); b.proc-a.proc < 10*time.Millisecond; b = readCPU() {
		if time.Now().After(deadline) {
			t.Fatalf("process CPU grew %v over 10 s of a busy loop", b.proc-a.proc)
		}
	}
	if b.cpus <= 0 || (b.host && b.hostBusy < a.hostBusy) {
		t.Errorf("samples %+v then %+v", a, b)
	}
}

func TestCPUBoundFold(t *testing.T) {
	a, b := cpuBound{avail: 2, perRow: 100, theta: 2}, cpuBound{avail: 1, perRow: 300, theta: 1}
	for _, tc := range []struct{ prev, next, want cpuBound }{
		{cpuBound{}, a, a},
		{a, cpuBound{}, a},
		{a, b, cpuBound{avail: 1.5, perRow: 200, theta: 1.5}},
	} {
		if got := tc.prev.fold(tc.next); got != tc.want {
			t.Errorf("%+v fold %+v = %+v, want %+v", tc.prev, tc.next, got, tc.want)
		}
	}
}
