package sidebyside

import (
	"strings"
	"testing"

	"github.com/inferd/inferd/repo/modelconfig"
)

// MLPGPUConfig is MLPConfig's batching config on one GPU instance: figure 1
// measured on a GPU (BenchmarkBatchingGPU, which deploy/gpu/check.sh runs).
func MLPGPUConfig(name string) string {
	return strings.Replace(MLPConfig(name, true), "kind: KIND_CPU", "kind: KIND_GPU", 1)
}

// NewMLPGPUReference is NewMLPReference on the GPU, with MLPGPUConfig; its
// error says why no GPU instance could load, for the benchmark to skip with.
func NewMLPGPUReference(b *testing.B, root, model string) (*MLPReference, error) {
	b.Helper()
	return newMLPReference(b, root, model, MLPGPUConfig(model), modelconfig.ModelInstanceGroup_KIND_GPU)
}
