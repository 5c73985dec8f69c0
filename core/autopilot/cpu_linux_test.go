package autopilot

import (
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		line string
		busy time.Duration
		ok   bool
	}{
		{"cpu  100 5 50 1000 20 3 2 7 0 0\n", (100 + 5 + 50 + 3 + 2 + 7) * 10 * time.Millisecond, true},
		{"cpu  1 2 3 4 5 6 7 8\n", (1 + 2 + 3 + 6 + 7 + 8) * 10 * time.Millisecond, true},
		{"cpu0 1 2 3 4 5 6 7 8\n", 0, false},
		{"cpu  1 2 3\n", 0, false},
		{"cpu  1 2 x 4 5 6 7 8\n", 0, false},
		{"", 0, false},
	} {
		busy, ok := parseStatCPU([]byte(tc.line))
		if busy != tc.busy || ok != tc.ok {
			t.Errorf("%q: %v %v, want %v %v", tc.line, busy, ok, tc.busy, tc.ok)
		}
	}
	if runtime.GOMAXPROCS(0) >= runtime.NumCPU() {
		if s := readCPU(); !s.host || s.cpus != runtime.NumCPU() {
			t.Errorf("no host figures from /proc/stat: %+v", s)
		}
	}
}

// FuzzParseStatCPU: any line reads as a busy time or as unreadable, never
// a panic.
func FuzzParseStatCPU(f *testing.F) {
	for _, seed := range []string{"cpu  100 5 50 1000 20 3 2 7 0 0\n", "cpu 1", "cpu  18446744073709551615 1 1 1 1 1 1 1", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if busy, ok := parseStatCPU([]byte(line)); !ok && busy != 0 {
			t.Fatalf("%q: busy %v though unreadable", line, busy)
		}
	})
}
