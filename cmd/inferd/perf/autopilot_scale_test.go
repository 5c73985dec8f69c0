package perf

import (
	"slices"
	"testing"
	"time"
)

// TestAutopilotInstances: a change of instances reads as from → to (with
// the threads where the autopilot splits them), a batching decision as
// nothing, and the chart's instance series steps at each change.
func TestAutopilotInstances(t *testing.T) {
	start := time.Unix(100, 0)
	v := &autopilotView{start: start, Decisions: []autopilotDecision{
		{At: start.Add(2 * time.Second), Delay: 500},
		{At: start.Add(5 * time.Second), Instances: 1, FromInstances: 2, Threads: 2, FromThreads: 1},
		{At: start.Add(9 * time.Second), Instances: 2, FromInstances: 1},
	}}
	for i, want := range []string{"", "2 → 1 (× 1 → 2 threads)", "1 → 2"} {
		if got := v.Decisions[i].InstancesText(); got != want {
			t.Errorf("decision %d: %q, want %q", i, got, want)
		}
	}
	s := v.instanceSeries()
	if !slices.Equal(s.X, []float64{0, 5, 5, 9, 9}) || !slices.Equal(s.Y, []float64{2, 2, 1, 1, 2}) {
		t.Errorf("instance series %v %v", s.X, s.Y)
	}
	if got := v.InstanceChanges(); len(got) != 2 || got[0].Instances != 1 {
		t.Errorf("instance changes %+v", got)
	}
	if got := (&autopilotView{start: start, Decisions: v.Decisions[:1]}).instanceSeries(); len(got.X) != 0 {
		t.Errorf("a series without instance changes: %v", got.X)
	}
}
