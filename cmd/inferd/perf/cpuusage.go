package perf

import (
	"bufio"
	"context"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
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

// usageLog records what each measured setting cost: the client
// machine's CPU (/proc/stat) and, with --collect-metrics, the server's CPU
// and GPU utilisation from its metrics endpoint. mark is called before
// each setting and once after the last; setting i spans marks i and i+1.
type usageLog struct {
	path  string // /proc/stat
	marks []usageMark
	poll  *metricsPoller // nil without --collect-metrics
}

type usageMark struct {
	t  cpuTimes
	ok bool
	at time.Time
}

// usage is one setting's figures, in percent; NaN where unknown.
type usage struct {
	client, server, gpu float64
}

// newUsageLog starts polling the server's metrics when o asks for it;
// close stops it.
func newUsageLog(ctx context.Context, o *options) *usageLog {
	u := &usageLog{path: "/proc/stat"}
	if o.collectMetrics {
		u.poll = startMetricsPoller(ctx, o.metricsURL, o.metricsInterval)
	}
	return u
}

func (u *usageLog) close() {
	if u.poll != nil {
		u.poll.stop()
	}
}

// metricsErr is the last failed read of the server's metrics, if any.
func (u *usageLog) metricsErr() error {
	if u == nil || u.poll == nil {
		return nil
	}
	return u.poll.err()
}

// mark takes a reading.
func (u *usageLog) mark() {
	t, ok := readCPU(u.path)
	u.marks = append(u.marks, usageMark{t, ok, time.Now()})
}

// at is the usage of the i-th setting measured.
func (u *usageLog) at(i int) usage {
	out := usage{math.NaN(), math.NaN(), math.NaN()}
	if u == nil || i+1 >= len(u.marks) {
		return out
	}
	a, b := u.marks[i], u.marks[i+1]
	if a.ok && b.ok {
		out.client = utilization(a.t, b.t)
	}
	if u.poll != nil {
		out.server, out.gpu = u.poll.between(a.at, b.at)
	}
	return out
}
