package autopilot_test

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/autopilot"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// countBackend is costBackend whose executions take slow(count) times
// longer with count instances configured: how contention for the CPUs
// makes a shape worse.
type countBackend struct {
	costBackend
	slow func(count int32) time.Duration
}

func (b *countBackend) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	cb := &costBackend{fixed: b.fixed, perRow: b.perRow}
	if b.slow != nil {
		n := spec.Config.GetInstanceGroup()[0].GetCount()
		cb.fixed, cb.perRow = cb.fixed*b.slow(n), cb.perRow*b.slow(n)
	}
	return core.Concatenated(spec.Config, &costInstance{cb}), nil
}

// scaledModel: executions of 4 ms plus 0.5 ms a row, batches up to 8 (so
// one instance carries about 1000 rows/s), up to 2 instances, a 40 ms p99
// target decided every 250 ms, changes of instances 5 periods apart.
const scaledModel = `backend: "cost"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
dynamic_batching { }
parameters { key: "slo_p99_ms" value { string_value: "40" } }
parameters { key: "slo_period_ms" value { string_value: "250" } }
parameters { key: "slo_dwell_periods" value { string_value: "5" } }
`

func startScaled(t *testing.T, b core.Backend, logs *logLines) *core.Server {
	t.Helper()
	return startScaledWith(t, b, scaledModel, nil, logs)
}

// startScaledWith serves model m of config cfg and files (path under the
// model's folder → bytes) on backend b, with an autopilot.
func startScaledWith(t *testing.T, b core.Backend, cfg string, files map[string][]byte, logs *logLines) *core.Server {
	t.Helper()
	root := t.TempDir()
	files = maps.Clone(files)
	if files == nil {
		files = map[string][]byte{}
	}
	files["config.pbtxt"] = []byte(cfg)
	if err := os.MkdirAll(filepath.Join(root, "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, "m", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	pilot := autopilot.New(autopilot.Options{Logger: log})
	s := core.NewServer(core.Options{Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit,
		StartupModels: []string{"m"}, Logger: log, Batching: dynamic.Batchers{},
		Autopilot: pilot, Observers: pilot.Observers(nil)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) }) // closes the pilot first
	return s
}

// serving is the version that serves m now, and its report.
func serving(t *testing.T, s *core.Server) (*core.ModelVersion, core.SLOReport) {
	t.Helper()
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	release()
	r, ok := mv.SLO()
	if !ok {
		t.Fatal("no autopilot report")
	}
	return mv, r
}

// instanceDecisions are the report's decisions that changed the instances.
func instanceDecisions(r core.SLOReport) []core.SLODecision {
	var out []core.SLODecision
	for _, d := range r.Decisions {
		if d.Instances > 0 {
			out = append(out, d)
		}
	}
	return out
}

// TestScalerFollowsTheLoad: at 400 requests a second the second instance
// is not needed, and goes; at 1400 a second, which one instance cannot
// carry, it comes back; at 300 a second it goes again. Every change is a
// reload while requests run: none fails (drive fails the test on any).
// The changes are a dwell apart, logged, and in the report, and the
// config of the copy serving shows the count in force.
func TestScalerFollowsTheLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a model for several seconds")
	}
	logs := &logLines{}
	s := startScaled(t, &countBackend{costBackend: costBackend{fixed: 4 * time.Millisecond, perRow: 500 * time.Microsecond}}, logs)
	if _, r := serving(t, s); r.Instances != 2 {
		t.Fatalf("instances %d before traffic, want the config's 2", r.Instances)
	}
	drive(t, s, 400, 4*time.Second)
	mv, r := serving(t, s)
	if r.Instances != 1 || mv.Config.GetInstanceGroup()[0].GetCount() != 1 {
		for _, l := range logs.with("level") {
			t.Log(strings.TrimSpace(l))
		}
		t.Fatalf("at 400/s: %d instances (config %d), want 1; decisions %+v", r.Instances, mv.Config.GetInstanceGroup()[0].GetCount(), instanceDecisions(r))
	}
	drive(t, s, 1400, 4*time.Second)
	if mv, r = serving(t, s); r.Instances != 2 || mv.Config.GetInstanceGroup()[0].GetCount() != 2 {
		for _, l := range logs.with("level") {
			t.Log(strings.TrimSpace(l))
		}
		t.Fatalf("at 1400/s: %d instances (config %d), want 2; decisions %+v", r.Instances, mv.Config.GetInstanceGroup()[0].GetCount(), instanceDecisions(r))
	}
	drive(t, s, 300, 5*time.Second)
	_, r = serving(t, s)
	ds := instanceDecisions(r)
	for _, d := range ds {
		t.Logf("%d → %d instances: %s", d.FromInstances, d.Instances, d.Reason)
	}
	if r.Instances != 1 {
		t.Errorf("back at 300/s: %d instances, want 1", r.Instances)
	}
	if len(ds) < 2 || ds[0].FromInstances != 2 || ds[0].Instances != 1 || ds[1].FromInstances != 1 || ds[1].Instances != 2 {
		t.Fatalf("decisions %+v, want 2 → 1 → 2 first", ds)
	}
	for i := 1; i < len(ds); i++ {
		if gap := ds[i].At.Sub(ds[i-1].At); gap < 5*250*time.Millisecond {
			t.Errorf("instance changes %v apart, within the dwell", gap)
		}
	}
	lines := logs.with("msg=\"autopilot instances\"")
	changes := 0
	for _, l := range lines {
		if strings.Contains(l, "from_instances=") {
			changes++
		}
	}
	if changes != len(ds) {
		t.Errorf("%d logged changes for %d in the report: %q", changes, len(ds), lines)
	}
	if !strings.Contains(lines[0], "rate=") || !strings.Contains(lines[0], "capacity=") {
		t.Errorf("a decision logged without its figures: %s", lines[0])
	}
}

// TestScalerHoldsOnThinTraffic: 20 requests a second are too few to
// measure a p99 each period: the instances stay as configured and the
// copy serving is the one loaded.
func TestScalerHoldsOnThinTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a model for several seconds")
	}
	logs := &logLines{}
	s := startScaled(t, &countBackend{costBackend: costBackend{fixed: 4 * time.Millisecond, perRow: 500 * time.Microsecond}}, logs)
	before, _ := serving(t, s)
	drive(t, s, 20, 4*time.Second)
	after, r := serving(t, s)
	if after != before || r.Instances != 2 || len(instanceDecisions(r)) != 0 {
		t.Fatalf("thin traffic changed the instances: %d, decisions %+v", r.Instances, instanceDecisions(r))
	}
}

// TestScalerRevertsAWorseShape: a model whose executions take 8 times
// longer with one instance configured. At 400 requests a second one
// instance looks ample from the two's measured capacity; once tried, its
// p99 misses the target, and the scaler goes back to two and does not try
// one again within the ban.
func TestScalerRevertsAWorseShape(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a model for several seconds")
	}
	logs := &logLines{}
	slow := func(n int32) time.Duration {
		if n == 1 {
			return 8
		}
		return 1
	}
	s := startScaled(t, &countBackend{costBackend: costBackend{fixed: 4 * time.Millisecond, perRow: 500 * time.Microsecond}, slow: slow}, logs)
	drive(t, s, 400, 9*time.Second)
	mv, r := serving(t, s)
	ds := instanceDecisions(r)
	for _, d := range ds {
		t.Logf("%d → %d instances: %s", d.FromInstances, d.Instances, d.Reason)
	}
	if len(ds) != 2 || ds[0].Instances != 1 || ds[1].Instances != 2 || !strings.Contains(ds[1].Reason, "measured worse") {
		t.Fatalf("decisions %+v, want 2 → 1, then back to 2 as worse", ds)
	}
	if r.Instances != 2 || mv.Config.GetInstanceGroup()[0].GetKind() != modelconfig.ModelInstanceGroup_KIND_CPU {
		t.Fatalf("ended at %d instances", r.Instances)
	}
}
