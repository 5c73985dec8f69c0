package perf

import (
	"bufio"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the first ("cpu") line of /proc/stat: jiffies spent busy
// and in total on every core of the client machine since boot.
type cpuTimes struct{ busy, total uint64 }

// readCPU reads /proc/stat; false where there is none (not Linux).
func readCPU(path string) (cpuTimes, bool) {
	f, err := os.Open(path)
	if err != nil {
		return cpuTimes{}, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return cpuTimes{}, false
	}
	t, err := parseCPULine(line)
	return t, err == nil
}

var errNoCPULine = errors.New("not a /proc/stat cpu line")

// parseCPULine reads "cpu user nice system idle iowait irq softirq steal
// ...": idle and iowait are the time not spent working (proc(5)).
func parseCPULine(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, errNoCPULine
	}
	var t cpuTimes
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already counted in user and nice
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, errNoCPULine
		}
		t.total += v
		if i != 3 && i != 4 {
			t.busy += v
		}
	}
	return t, nil
}

// utilization is the percentage of CPU time spent busy between two
// readings; NaN when no time passed.
func utilization(before, after cpuTimes) float64 {
	if after.total <= before.total || after.busy < before.busy {
		return math.NaN()
	}
	return 100 * float64(after.busy-before.busy) / float64(after.total-before.total)
}

// cpuLog records the client machine's CPU utilisation over each setting
// measured: mark is called before each setting and once after the last,
// and setting i's figure is the time between marks i and i+1.
type cpuLog struct {
	path  string // /proc/stat
	marks []cpuMark
}

type cpuMark struct {
	t  cpuTimes
	ok bool
}

func newCPULog() *cpuLog { return &cpuLog{path: "/proc/stat"} }

// mark takes a reading.
func (c *cpuLog) mark() {
	t, ok := readCPU(c.path)
	c.marks = append(c.marks, cpuMark{t, ok})
}

// at is the utilisation of the i-th setting measured; NaN if unknown.
func (c *cpuLog) at(i int) float64 {
	if c == nil || i+1 >= len(c.marks) || !c.marks[i].ok || !c.marks[i+1].ok {
		return math.NaN()
	}
	return utilization(c.marks[i].t, c.marks[i+1].t)
}
