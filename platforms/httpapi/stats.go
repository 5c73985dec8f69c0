package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// stats is GET /v2/models/stats: every READY version.
func (s *Server) stats(w http.ResponseWriter, _ *http.Request) error {
	return s.writeStats(w, "", core.LatestVersion, false)
}

// modelStats is GET /v2/models/{m}[/versions/{v}]/stats. The route also
// matches an empty name ("/v2/models//stats"), which lists every model but,
// as a named request, fails when there is none.
func (s *Server) modelStats(w http.ResponseWriter, _ *http.Request, name string, version int64) error {
	return s.writeStats(w, name, version, true)
}

func (s *Server) writeStats(w http.ResponseWriter, name string, version int64, named bool) error {
	stats, err := protocol.ModelStatistics(s.core, name, version)
	if err == nil && named && len(stats) == 0 {
		err = protocol.ErrModelNotAvailable(name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, statsBody(stats))
	return nil
}

func statsBody(stats []protocol.ModelStats) []byte {
	b := []byte(`{"model_stats":[`)
	for i, st := range stats {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, st.Name)
		b = append(b, `,"version":`...)
		b = tritonjson.AppendString(b, st.Version)
		b = append(b, `,"last_inference":`...)
		b = strconv.AppendInt(b, st.LastInference, 10)
		b = append(b, `,"inference_count":`...)
		b = strconv.AppendUint(b, st.InferenceCount, 10)
		b = append(b, `,"execution_count":`...)
		b = strconv.AppendUint(b, st.ExecutionCount, 10)
		b = append(b, `,"inference_stats":{`...)
		in := &st.Inference
		b = appendDuration(b, "success", in.Success, false)
		b = appendDuration(b, "fail", in.Fail, true)
		b = appendDuration(b, "queue", in.Queue, true)
		b = appendDuration(b, "compute_input", in.ComputeInput, true)
		b = appendDuration(b, "compute_infer", in.ComputeInfer, true)
		b = appendDuration(b, "compute_output", in.ComputeOutput, true)
		b = appendDuration(b, "cache_hit", in.CacheHit, true)
		b = appendDuration(b, "cache_miss", in.CacheMiss, true)
		b = append(b, `},"response_stats":{},"batch_stats":[`...)
		for j, bs := range st.Batches {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"batch_size":`...)
			b = strconv.AppendUint(b, bs.BatchSize, 10)
			b = append(b, ',')
			b = appendDuration(b, "compute_input", bs.ComputeInput, false)
			b = appendDuration(b, "compute_infer", bs.ComputeInfer, true)
			b = appendDuration(b, "compute_output", bs.ComputeOutput, true)
			b = append(b, '}')
		}
		b = append(b, `],"memory_usage":[]`...)
		if st.SLO != nil {
			b = appendSLO(append(b, `,"slo":`...), st.SLO)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendDuration(b []byte, key string, d core.Duration, comma bool) []byte {
	if comma {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":{"count":`...)
	b = strconv.AppendUint(b, d.Count, 10)
	b = append(b, `,"ns":`...)
	b = strconv.AppendUint(b, d.Ns, 10)
	return append(b, '}')
}

// appendShape writes ,"<prefix>instances":…,"<prefix>intra_op_threads":…,
// the instances the autopilot tunes (threads 0: the backend's own).
func appendShape(b []byte, prefix string, instances, threads int) []byte {
	b = append(b, `,"`...)
	b = append(b, prefix...)
	b = append(b, `instances":`...)
	b = strconv.AppendInt(b, int64(instances), 10)
	b = append(b, `,"`...)
	b = append(b, prefix...)
	b = append(b, `intra_op_threads":`...)
	return strconv.AppendInt(b, int64(threads), 10)
}

// appendSLO writes the autopilot's report (inferd's own block; Triton's
// statistics have none): the target, the last window, the capacity at the
// settings in force and the latest decisions, oldest first.
func appendSLO(b []byte, r *core.SLOReport) []byte {
	b = append(b, `{"target_p99_us":`...)
	b = strconv.AppendInt(b, r.TargetP99.Microseconds(), 10)
	b = append(b, `,"measured_p99_us":`...)
	b = strconv.AppendInt(b, r.MeasuredP99.Microseconds(), 10)
	b = append(b, `,"window_requests":`...)
	b = strconv.AppendUint(b, r.Requests, 10)
	b = append(b, `,"rate_infer_per_sec":`...)
	b = strconv.AppendFloat(b, r.RatePerSec, 'f', 1, 64)
	b = append(b, `,"capacity_infer_per_sec":`...)
	b = strconv.AppendFloat(b, r.CapacityPerSec, 'f', 1, 64)
	if r.Instances > 0 {
		b = appendShape(b, "", r.Instances, r.Threads)
	}
	b = append(b, `,"headroom":`...)
	b = strconv.AppendFloat(b, r.Headroom, 'f', 3, 64)
	b = appendTuning(b, "", &r.BatchTuning)
	b = append(b, `,"decisions":[`...)
	for i, d := range r.Decisions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"time_ms":`...)
		b = strconv.AppendInt(b, d.At.UnixMilli(), 10)
		b = appendTuning(b, "", &d.To)
		b = appendTuning(b, "from_", &d.From)
		b = append(b, `,"reason":`...)
		b = tritonjson.AppendString(b, d.Reason)
		if d.Instances > 0 {
			b = appendShape(b, "", d.Instances, d.Threads)
			b = appendShape(b, "from_", d.FromInstances, d.FromThreads)
		}
		b = append(b, `,"measured_p99_us":`...)
		b = strconv.AppendInt(b, d.MeasuredP99.Microseconds(), 10)
		b = append(b, `,"rate_infer_per_sec":`...)
		b = strconv.AppendFloat(b, d.RatePerSec, 'f', 1, 64)
		b = append(b, `,"capacity_infer_per_sec":`...)
		b = strconv.AppendFloat(b, d.Capacity, 'f', 1, 64)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendTuning writes ,"<prefix>max_queue_delay_us":…,"<prefix>preferred_batch_size":[…],"<prefix>max_batch":….
func appendTuning(b []byte, prefix string, t *core.BatchTuning) []byte {
	b = append(b, `,"`...)
	b = append(b, prefix...)
	b = append(b, `max_queue_delay_us":`...)
	b = strconv.AppendInt(b, t.Delay.Microseconds(), 10)
	b = append(b, `,"`...)
	b = append(b, prefix...)
	b = append(b, `preferred_batch_size":[`...)
	for i, p := range t.Preferred {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, p, 10)
	}
	b = append(b, `],"`...)
	b = append(b, prefix...)
	b = append(b, `max_batch":`...)
	return strconv.AppendInt(b, t.MaxBatch, 10)
}
