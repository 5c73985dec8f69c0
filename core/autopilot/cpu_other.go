//go:build !linux

package autopilot

import "time"

// processCPU and hostBusy are measured on Linux only (cpu_linux.go);
// elsewhere the capacity has no CPU bound.
func processCPU() time.Duration       { return 0 }
func hostBusy() (time.Duration, bool) { return 0, false }
