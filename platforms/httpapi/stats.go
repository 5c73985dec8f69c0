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
