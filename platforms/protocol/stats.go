package protocol

import (
	"strconv"

	"github.com/inferd/inferd/core"
)

// ModelStats are one READY version's statistics (Triton's statistics
// extension, triton-inference-server/server
// docs/protocol/extension_statistics.md). Response statistics and memory
// usage are always empty: the core keeps neither.
type ModelStats struct {
	Name           string
	Version        string // decimal
	LastInference  int64  // ms since the epoch; 0 before the first
	InferenceCount uint64
	ExecutionCount uint64
	Inference      InferStats
	Batches        []core.BatchStats // ascending batch size
	// SLO is the autopilot's report when it tunes the version
	// (docs/autopilot.md); nil otherwise.
	SLO *core.SLOReport
}

// InferStats are the request durations of the statistics extension; every
// one is always present.
type InferStats struct {
	Success, Fail, Queue                      core.Duration
	ComputeInput, ComputeInfer, ComputeOutput core.Duration
	CacheHit, CacheMiss                       core.Duration
}

// ErrModelNotAvailable is the statistics' INVALID_ARG error for a named
// model without a READY version.
func ErrModelNotAvailable(name string) error {
	return core.Errorf(core.CodeInvalidArg, "requested model '%s' is not available", name)
}

// ModelStatistics returns the statistics of every READY version of name
// (every model when name is ""), or of version alone when it is not
// core.LatestVersion. A model or version with no READY version to report
// is an INVALID_ARG error, as in Triton.
func ModelStatistics(c *core.Server, name string, version int64) ([]ModelStats, error) {
	versions := c.ReadyVersions(name)
	if version != core.LatestVersion {
		var one []*core.ModelVersion
		for _, v := range versions {
			if v.Version == version {
				one = append(one, v)
			}
		}
		if len(one) == 0 {
			return nil, core.Errorf(core.CodeInvalidArg, "requested model version is not available for model '%s'", name)
		}
		versions = one
	}
	if name != "" && len(versions) == 0 {
		return nil, ErrModelNotAvailable(name)
	}
	out := make([]ModelStats, len(versions))
	for i, mv := range versions {
		st := mv.Stats.Snapshot()
		out[i] = ModelStats{
			Name: mv.Name, Version: strconv.FormatInt(mv.Version, 10),
			LastInference: st.LastInference, InferenceCount: st.InferenceCount, ExecutionCount: st.ExecutionCount,
			Inference: InferStats{
				Success: st.Success, Fail: st.Fail, Queue: st.Queue,
				ComputeInput: st.ComputeInput, ComputeInfer: st.ComputeInfer, ComputeOutput: st.ComputeOutput,
				CacheHit: st.CacheHit, CacheMiss: st.CacheMiss,
			},
			Batches: st.Batches,
		}
		if r, ok := mv.SLO(); ok {
			out[i].SLO = &r
		}
	}
	return out, nil
}
