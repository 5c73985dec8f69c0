package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// TestAppendSLO: the slo block is JSON; it names the instances and
// threads in force where the autopilot tunes them, and on the decisions
// that changed them, and leaves both out elsewhere.
func TestAppendSLO(t *testing.T) {
	at := time.UnixMilli(1700000000000)
	for _, tc := range []struct {
		name string
		r    core.SLOReport
		want map[string]any // top-level keys and values (absent: nil)
		dec  map[string]any // the first decision's
	}{
		{name: "batching only", r: core.SLOReport{TargetP99: 50 * time.Millisecond,
			Decisions: []core.SLODecision{{At: at, Reason: "r"}}},
			want: map[string]any{"target_p99_us": 50000.0, "instances": nil, "intra_op_threads": nil},
			dec:  map[string]any{"time_ms": 1700000000000.0, "reason": "r", "instances": nil, "from_instances": nil}},
		{name: "instances", r: core.SLOReport{TargetP99: 50 * time.Millisecond, Instances: 2, Threads: 4,
			Decisions: []core.SLODecision{{At: at, Reason: "short", Instances: 2, FromInstances: 1, Threads: 4, FromThreads: 8}}},
			want: map[string]any{"instances": 2.0, "intra_op_threads": 4.0},
			dec:  map[string]any{"instances": 2.0, "from_instances": 1.0, "intra_op_threads": 4.0, "from_intra_op_threads": 8.0, "reason": "short"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := appendSLO(nil, &tc.r)
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("not JSON (%v): %s", err, b)
			}
			check := func(where string, m map[string]any, want map[string]any) {
				for k, v := range want {
					g, ok := m[k]
					if v == nil {
						if ok {
							t.Errorf("%s: %q present (%v): %s", where, k, g, b)
						}
						continue
					}
					if gb, _ := json.Marshal(g); string(gb) != mustJSON(t, v) {
						t.Errorf("%s: %q is %s, want %s: %s", where, k, gb, mustJSON(t, v), b)
					}
				}
			}
			check("report", got, tc.want)
			ds, _ := got["decisions"].([]any)
			if len(ds) != 1 {
				t.Fatalf("decisions %v", got["decisions"])
			}
			check("decision", ds[0].(map[string]any), tc.dec)
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
