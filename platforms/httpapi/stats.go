package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

func (s *Server) stats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, statsBody(s.core.ReadyVersions("")))
}

func (s *Server) modelStats(w http.ResponseWriter, _ *http.Request, name string, version int64) {
	versions := s.core.ReadyVersions(name)
	if version != core.LatestVersion {
		var one []*core.ModelVersion
		for _, v := range versions {
			if v.Version == version {
				one = append(one, v)
			}
		}
		if len(one) == 0 {
			writeErrorStatus(w, http.StatusBadRequest, "requested model version is not available for model '"+name+"'")
			return
		}
		versions = one
	}
	if len(versions) == 0 {
		writeErrorStatus(w, http.StatusBadRequest, "requested model '"+name+"' is not available")
		return
	}
	writeJSON(w, statsBody(versions))
}

func statsBody(versions []*core.ModelVersion) []byte {
	b := []byte(`{"model_stats":[`)
	for i, mv := range versions {
		if i > 0 {
			b = append(b, ',')
		}
		st := mv.Stats.Snapshot()
		b = append(b, `{"name":`...)
		b = codec.AppendString(b, mv.Name)
		b = append(b, `,"version":`...)
		b = codec.AppendString(b, strconv.FormatInt(mv.Version, 10))
		b = append(b, `,"last_inference":`...)
		b = strconv.AppendInt(b, st.LastInference, 10)
		b = append(b, `,"inference_count":`...)
		b = strconv.AppendUint(b, st.InferenceCount, 10)
		b = append(b, `,"execution_count":`...)
		b = strconv.AppendUint(b, st.ExecutionCount, 10)
		b = append(b, `,"inference_stats":{`...)
		b = appendDuration(b, "success", st.Success, false)
		b = appendDuration(b, "fail", st.Fail, true)
		b = appendDuration(b, "queue", st.Queue, true)
		b = appendDuration(b, "compute_input", st.ComputeInput, true)
		b = appendDuration(b, "compute_infer", st.ComputeInfer, true)
		b = appendDuration(b, "compute_output", st.ComputeOutput, true)
		b = appendDuration(b, "cache_hit", st.CacheHit, true)
		b = appendDuration(b, "cache_miss", st.CacheMiss, true)
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
		b = append(b, `],"memory_usage":[]}`...)
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
