package dynamic

import (
	"syscall"
	"time"
)

// prSetTimerSlack is PR_SET_TIMERSLACK from <linux/prctl.h>.
const prSetTimerSlack = 29

// sleepPrecise blocks for d on the kernel's high-resolution timer. The Go
// runtime rounds timers under a millisecond up to a whole millisecond when
// the process is idle (its netpoller waits in ms), which would turn a
// 100 µs max_queue_delay into 1 ms.
func sleepPrecise(d time.Duration) {
	// The thread's default 50 µs timer slack would add a quarter to a
	// 200 µs delay; 1 µs keeps the batcher close to what it was told.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1000, 0)
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
