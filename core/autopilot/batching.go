package autopilot

import (
	"time"

	"github.com/inferd/inferd/core"
)

// The instance scaler's two uses of the batching setting, kept here so
// that a change of core.Tuner's shape touches one small file.

// inForce is the batching the tuner has in force, which a change of the
// instances keeps: the reload's config carries the delay and preferred
// sizes (retuned); the cap, which no config field holds, the new
// version's watch sets again.
func inForce(t core.Tuner) (delay time.Duration, preferred []int64) {
	b := t.Tuning()
	return b.Delay, b.Preferred
}

// keptBatching is a decision record whose batching stays as it is, the
// cap shown as the reports show it (max_batch_size when none).
func keptBatching(at time.Time, t core.Tuner, maxBS int64) core.SLODecision {
	b := bounds{maxBS: maxBS}.effective(t.Tuning())
	return core.SLODecision{At: at, To: b, From: b}
}
