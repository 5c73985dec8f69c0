package autopilot

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go runs on (proc(5)).
const clockTick = 100

// processCPU is the user and system CPU time of this process (every
// thread, ONNX Runtime's included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostBusy is the CPU time every CPU of the host spent busy: the first
// line of /proc/stat, all but idle and iowait (proc(5)).
func hostBusy() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadSlice('\n')
	if err != nil {
		return 0, false
	}
	return parseStatCPU(line)
}

// parseStatCPU reads the aggregate "cpu" line of /proc/stat: user nice
// system idle iowait irq softirq steal (guest time is inside user).
func parseStatCPU(line []byte) (time.Duration, bool) {
	fields := bytes.Fields(line)
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0, false
	}
	var busy uint64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil || v > math.MaxInt64/uint64(time.Second) {
			return 0, false // a busy time no host reaches
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * (time.Second / clockTick), true
}
