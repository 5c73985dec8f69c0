package autopilot

import (
	"time"

	"github.com/inferd/inferd/core"
)

// The instance scaler's two uses of the batching setting, kept here so
// that a change of core.Tuner's shape touches one small file.

// inForce is the batching the tuner has in force, which a change of the
// instances keeps: the reload's config carries it (retuned).
func inForce(t core.Tuner) (delay time.Duration, preferred []int64) {
	return t.Tuning()
}

// keptBatching is a decision record whose batching stays as it is.
func keptBatching(at time.Time, delay time.Duration, preferred []int64) core.SLODecision {
	return core.SLODecision{At: at, Delay: delay, FromDelay: delay, Preferred: preferred, FromPref: preferred}
}
