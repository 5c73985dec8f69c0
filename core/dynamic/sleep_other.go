//go:build !linux

package dynamic

import "time"

// sleepPrecise is time.Sleep where no finer sleep is wired up.
func sleepPrecise(d time.Duration) { time.Sleep(d) }
