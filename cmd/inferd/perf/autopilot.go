package perf

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// autopilotView is what the HTML report shows of a model whose batching
// inferd's autopilot tunes to a latency target (docs/autopilot.md): the
// target, where it stands, and its decisions over the run.
type autopilotView struct {
	// Instances and Threads are in force where the autopilot scales the
	// instances (0: it does not).
	Instances, Threads int
	// The rest of the slo block, and the run's start.
	TargetMS, MeasuredMS float64
	Capacity, Headroom   float64
	Delay, MaxBatch      int64
	Preferred            []int64
	Decisions            []autopilotDecision
	start                time.Time
}

// autopilotDecision is one decision, at its offset from the run's start.
type autopilotDecision struct {
	At                     time.Time
	Delay, FromDelay       int64
	MaxBatch, FromMax      int64
	Preferred, FromPref    []int64
	Reason                 string
	MeasuredMS, Rate, Capa float64
	// Instances, Threads and the From values are set on a change of the
	// instances.
	Instances, FromInstances, Threads, FromThreads int
}

// InstancesText is a change of the instances as "2 → 1 (× 1 → 2
// threads)"; "" on a batching decision.
func (d autopilotDecision) InstancesText() string {
	if d.Instances == 0 {
		return ""
	}
	if d.Threads == 0 {
		return fmt.Sprintf("%d → %d", d.FromInstances, d.Instances)
	}
	return fmt.Sprintf("%d → %d (× %d → %d threads)", d.FromInstances, d.Instances, d.FromThreads, d.Threads)
}

// InstanceChanges are the decisions that changed the instances.
func (v *autopilotView) InstanceChanges() []autopilotDecision {
	var out []autopilotDecision
	for _, d := range v.Decisions {
		if d.Instances > 0 {
			out = append(out, d)
		}
	}
	return out
}

// Offset is the decision's time from the run's start, in seconds
// (negative: before it).
func (d autopilotDecision) Offset(start time.Time) string {
	return fmt.Sprintf("%+.1f s", d.At.Sub(start).Seconds())
}

// fetchAutopilot reads the slo block of the model's statistics over HTTP;
// nil when the protocol is gRPC (whose statistics have no such field) or
// the model has no target.
func fetchAutopilot(ctx context.Context, o *options, start time.Time) *autopilotView {
	if o.protocol != "http" {
		return nil
	}
	var body struct {
		ModelStats []struct {
			SLO *struct {
				Instances int     `json:"instances"`
				Threads   int     `json:"intra_op_threads"`
				Target    int64   `json:"target_p99_us"`
				Measured  int64   `json:"measured_p99_us"`
				Capacity  float64 `json:"capacity_infer_per_sec"`
				Headroom  float64 `json:"headroom"`
				Delay     int64   `json:"max_queue_delay_us"`
				Preferred []int64 `json:"preferred_batch_size"`
				MaxBatch  int64   `json:"max_batch"`
				Decisions []struct {
					TimeMS    int64   `json:"time_ms"`
					Delay     int64   `json:"max_queue_delay_us"`
					Preferred []int64 `json:"preferred_batch_size"`
					FromDelay int64   `json:"from_max_queue_delay_us"`
					FromPref  []int64 `json:"from_preferred_batch_size"`
					MaxBatch  int64   `json:"max_batch"`
					FromMax   int64   `json:"from_max_batch"`
					Reason    string  `json:"reason"`
					Measured  int64   `json:"measured_p99_us"`
					Rate      float64 `json:"rate_infer_per_sec"`
					Capacity  float64 `json:"capacity_infer_per_sec"`
					Instances int     `json:"instances"`
					FromInst  int     `json:"from_instances"`
					Threads   int     `json:"intra_op_threads"`
					FromThr   int     `json:"from_intra_op_threads"`
				} `json:"decisions"`
			} `json:"slo"`
		} `json:"model_stats"`
	}
	u := o.baseURL + "/v2/models/" + url.PathEscape(o.model) + "/stats"
	if err := getJSON(ctx, &http.Client{Timeout: 10 * time.Second}, u, &body); err != nil || len(body.ModelStats) == 0 {
		return nil
	}
	s := body.ModelStats[len(body.ModelStats)-1].SLO
	if s == nil {
		return nil
	}
	v := &autopilotView{TargetMS: float64(s.Target) / 1000, MeasuredMS: float64(s.Measured) / 1000, Capacity: s.Capacity,
		Headroom: s.Headroom, Delay: s.Delay, MaxBatch: s.MaxBatch, Preferred: s.Preferred, start: start}
	for _, d := range s.Decisions {
		v.Decisions = append(v.Decisions, autopilotDecision{At: time.UnixMilli(d.TimeMS), Delay: d.Delay, FromDelay: d.FromDelay,
			MaxBatch: d.MaxBatch, FromMax: d.FromMax, Preferred: d.Preferred, FromPref: d.FromPref, Reason: d.Reason, MeasuredMS: float64(d.Measured) / 1000, Rate: d.Rate, Capa: d.Capacity})
	}

	v.Instances, v.Threads = s.Instances, s.Threads
	for i, d := range s.Decisions {
		v.Decisions[i].Instances, v.Decisions[i].FromInstances, v.Decisions[i].Threads, v.Decisions[i].FromThreads = d.Instances, d.FromInst, d.Threads, d.FromThr
	}
	return v
}

// Start is the run's start, which the decisions' offsets count from.
func (v *autopilotView) Start() time.Time { return v.start }

// chart draws the queue delay and preferred batch size the autopilot set
// over the run, as steps.
func (v *autopilotView) chart() chartView {
	const caption = "What inferd's autopilot set while the run went on, from the model's statistics (docs/autopilot.md); time from the run's start."
	if len(v.Decisions) == 0 {
		return newChart("autopilot", "Autopilot decisions over time", caption, "the autopilot made no decision during the run", "", false, nil)
	}
	delay := series{Name: "max_queue_delay (ms)"}
	pref := series{Name: "preferred batch size"}
	step := func(t float64, d int64, p []int64) {
		delay.X, delay.Y = append(delay.X, t), append(delay.Y, float64(d)/1000)
		pref.X, pref.Y = append(pref.X, t), append(pref.Y, float64(maxOf(p)))
	}
	first := v.Decisions[0]
	step(min(0, first.At.Sub(v.start).Seconds()), first.FromDelay, first.FromPref)
	for i, d := range v.Decisions {
		t := d.At.Sub(v.start).Seconds()
		if i > 0 {
			prev := v.Decisions[i-1]
			step(t, prev.Delay, prev.Preferred)
		} else {
			step(t, d.FromDelay, d.FromPref)
		}
		step(t, d.Delay, d.Preferred)
	}
	ss := []series{delay, pref}
	if inst := v.instanceSeries(); len(inst.X) > 0 {
		ss = append(ss, inst)
	}
	svg, ok := lineSVG("chart-autopilot", "Time from the run's start (s)", "Setting", ss)
	return newChart("autopilot", "Autopilot decisions over time", caption, "too few points to draw", svg, ok, ss)
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// instanceSeries is the instance count over the run as steps, where the
// autopilot changed it (no points otherwise).
func (v *autopilotView) instanceSeries() series {
	inst := series{Name: "instances"}
	for _, d := range v.InstanceChanges() {
		t := d.At.Sub(v.start).Seconds()
		if len(inst.X) == 0 {
			inst.X, inst.Y = append(inst.X, min(0, t)), append(inst.Y, float64(d.FromInstances))
		}
		inst.X, inst.Y = append(inst.X, t, t), append(inst.Y, inst.Y[len(inst.Y)-1], float64(d.Instances))
	}
	return inst
}
