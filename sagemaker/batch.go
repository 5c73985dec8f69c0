package sagemaker

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Batch transform settings SageMaker passes to the container
// (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-batch-code.html).
const (
	envBatch                   = "SAGEMAKER_BATCH"
	envMaxPayloadInMB          = "SAGEMAKER_MAX_PAYLOAD_IN_MB"
	envBatchStrategy           = "SAGEMAKER_BATCH_STRATEGY"
	envMaxConcurrentTransforms = "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS"
)

// Batch strategies as /execution-parameters and SAGEMAKER_BATCH_STRATEGY
// spell them.
const (
	SingleRecord = "SINGLE_RECORD"
	MultiRecord  = "MULTI_RECORD"
)

// maxPayloadInMB is the largest MaxPayloadInMB a transform job accepts.
const maxPayloadInMB = 100

// BatchOptions are the batch transform settings: what the job configured
// (SAGEMAKER_* env vars; zero when the job left them to the container)
// and whether the container runs a transform job at all.
type BatchOptions struct {
	// Transform is SAGEMAKER_BATCH=true.
	Transform bool
	// MaxPayloadInMB, BatchStrategy and MaxConcurrentTransforms are the
	// job's values; zero or "" lets /execution-parameters derive them.
	MaxPayloadInMB          int
	BatchStrategy           string
	MaxConcurrentTransforms int
}

// batchFromEnv reads the batch transform variables. Unparsable numbers
// count as unset: the job then uses what /execution-parameters proposes.
func batchFromEnv(getenv func(string) string) BatchOptions {
	atoi := func(name string) int {
		n, err := strconv.Atoi(strings.TrimSpace(getenv(name)))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	b := BatchOptions{
		Transform:               strings.EqualFold(getenv(envBatch), "true"),
		MaxPayloadInMB:          atoi(envMaxPayloadInMB),
		MaxConcurrentTransforms: atoi(envMaxConcurrentTransforms),
	}
	switch s := strings.ToUpper(strings.TrimSpace(getenv(envBatchStrategy))); s {
	case SingleRecord, MultiRecord:
		b.BatchStrategy = s
	}
	return b
}

// executionParameters is the reply of GET /execution-parameters.
type executionParameters struct {
	MaxConcurrentTransforms int
	BatchStrategy           string
	MaxPayloadInMB          int
}

// executionParameters answers GET /execution-parameters: the job's own
// settings where it gave them, else values derived from the default model
// and the machine (deriveParameters).
func (h *handler) executionParameters(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return httpapi.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	var cfg *modelconfig.ModelConfig
	if mv, release, err := h.core.Acquire(h.opts.DefaultModel, core.LatestVersion); err == nil {
		cfg = mv.Config
		release()
	}
	p := deriveParameters(cfg, h.api.MaxInputSize(), runtime.NumCPU())
	b := h.opts.Batch
	if b.MaxConcurrentTransforms > 0 {
		p.MaxConcurrentTransforms = b.MaxConcurrentTransforms
	}
	if b.BatchStrategy != "" {
		p.BatchStrategy = b.BatchStrategy
	}
	if b.MaxPayloadInMB > 0 {
		p.MaxPayloadInMB = b.MaxPayloadInMB
	}
	body, _ := json.Marshal(p)
	writeJSON(w, http.StatusOK, body)
	return nil
}

// deriveParameters proposes transform settings for a model (nil: not
// loaded, so only the machine counts):
//   - MaxConcurrentTransforms: the model's execution instances, doubled
//     under dynamic batching so that a batch forms while another runs;
//     without a model, one per CPU.
//   - BatchStrategy: MULTI_RECORD for a model that batches (several
//     records per /invocations, sent as one jsonlines or csv body),
//     SINGLE_RECORD otherwise.
//   - MaxPayloadInMB: the largest body /invocations reads
//     (--http-max-input-size), within the 100 MB a job allows.
func deriveParameters(cfg *modelconfig.ModelConfig, maxInput int64, cpus int) executionParameters {
	p := executionParameters{MaxConcurrentTransforms: max(cpus, 1), BatchStrategy: SingleRecord}
	p.MaxPayloadInMB = int(min(max(maxInput>>20, 1), maxPayloadInMB))
	if cfg == nil {
		return p
	}
	instances := 0
	for _, g := range cfg.GetInstanceGroup() {
		n := int(max(g.GetCount(), 1))
		if gpus := len(g.GetGpus()); gpus > 0 {
			n *= gpus
		}
		instances += n
	}
	if instances > 0 {
		p.MaxConcurrentTransforms = instances
	}
	if cfg.GetMaxBatchSize() > 0 {
		p.BatchStrategy = MultiRecord
		if cfg.GetDynamicBatching() != nil {
			p.MaxConcurrentTransforms *= 2
		}
	}
	return p
}
