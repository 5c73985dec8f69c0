package autopilot

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core"
)

// Request latencies are counted in buckets whose bounds grow by 5 % from
// 10 µs, so a percentile read back is within 5 % of the true one; the last
// bucket (about 2.4 hours up) takes everything longer.
const (
	bucketBase  = 10 * time.Microsecond
	bucketRatio = 1.05
	numBuckets  = 400
)

var logRatio = math.Log(bucketRatio)

// window counts the latencies of a version's successful requests. The
// watch reads and subtracts what it read, so each period sees its own.
type window struct {
	counts [numBuckets]atomic.Uint64
}

func bucketOf(d time.Duration) int {
	if d <= bucketBase {
		return 0
	}
	i := int(math.Log(float64(d)/float64(bucketBase))/logRatio) + 1
	return min(i, numBuckets-1)
}

// upper is the upper bound of bucket i.
func upper(i int) time.Duration {
	return time.Duration(float64(bucketBase) * math.Pow(bucketRatio, float64(i)))
}

func (w *window) ObserveSuccess(d core.RequestDurations) {
	w.counts[bucketOf(time.Duration(d.RequestUs)*time.Microsecond)].Add(1)
}

func (w *window) ObserveFirstResponse(uint64) {}

// since returns the counts since base, and their sum.
func (w *window) since(base *[numBuckets]uint64) (counts [numBuckets]uint64, n uint64) {
	for i := range w.counts {
		counts[i] = w.counts[i].Load() - base[i]
		n += counts[i]
	}
	return counts, n
}

// advance moves base past counts.
func advance(base, counts *[numBuckets]uint64) {
	for i := range base {
		base[i] += counts[i]
	}
}

// quantile is the upper bound of the bucket holding the q-th fraction of
// n counted latencies.
func quantile(counts *[numBuckets]uint64, n uint64, q float64) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return upper(i)
		}
	}
	return upper(numBuckets - 1)
}

// follow makes the watch read the window its version's requests count
// in now. A hot reload hands the replaced copy's observers, this window
// among them, to the new copy (core's metricCarry, so that the latency
// summaries go on), which leaves the new copy's own window uncounted:
// the watch takes the one that counts, from what it holds now on.
func (wt *watch) follow() {
	w, ok := core.ObserverAs[*window](wt.stats.Observer())
	if !ok || w == wt.win {
		return
	}
	wt.win = w
	for i := range w.counts {
		wt.seen[i] = w.counts[i].Load()
	}
}
