//go:build !linux

package orca

import (
	"runtime"
	"time"
)

// Outside Linux the process figures are not read: reports carry 0 for
// CPU and memory utilisation.

func processCPU() time.Duration { return 0 }

func availableCPUs(string) float64 { return float64(runtime.NumCPU()) }

func memoryLimit(string) float64 { return 0 }

func residentBytes(string) float64 { return 0 }
