package protocol

import (
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
	"google.golang.org/protobuf/proto"
)

// TritonVersion is the Triton release whose behaviour this server
// reproduces; clients read it from the server metadata.
const TritonVersion = "2.73.0"

// extensions lists only what this server really implements, in Triton's
// order (InferenceServer's constructor in triton-inference-server/core
// src/server.cc). Triton lists both shared-memory extensions whatever
// --allow-client-shm says and on CPU-only builds too: a client learns that
// the routes exist, and their answers say whether they are on.
var extensions = []string{"classification", "sequence", "model_repository", "model_repository(unload_dependents)", "schedule_policy", "model_configuration",
	"system_shared_memory", "cuda_shared_memory", "binary_tensor_data", "parameters", "statistics", "trace", "logging"}

// ServerMeta is the server metadata (triton-inference-server/core src/tritonserver.cc,
// TRITONSERVER_ServerMetadata).
type ServerMeta struct {
	Name       string // --id
	Version    string // TritonVersion
	Extensions []string
}

// ServerMetadata is the metadata of a server started with --id id.
func ServerMetadata(id string) ServerMeta {
	return ServerMeta{Name: id, Version: TritonVersion, Extensions: append([]string(nil), extensions...)}
}

// TensorMeta describes one model input or output.
type TensorMeta struct {
	Name     string
	Datatype string  // protocol name: "FP32", "BYTES", ...
	Shape    []int64 // with a leading -1 when the model batches
}

// ModelMeta is a model's metadata (triton-inference-server/core
// src/tritonserver.cc, TRITONSERVER_ServerModelMetadata).
type ModelMeta struct {
	Name string
	// Versions is the version asked for, or every READY version
	// ascending when none was, as decimal strings.
	Versions []string
	Platform string // the config's platform, else its backend
	Inputs   []TensorMeta
	Outputs  []TensorMeta
}

// ModelMetadata returns the metadata of (name, version), or a lookup error.
func ModelMetadata(c *core.Server, name string, version int64) (*ModelMeta, error) {
	mv, release, err := c.Acquire(name, version)
	if err != nil {
		return nil, err
	}
	defer release()
	cfg := mv.Config
	md := &ModelMeta{Name: name, Platform: cfg.GetPlatform(), Versions: []string{}}
	if version != core.LatestVersion {
		md.Versions = append(md.Versions, strconv.FormatInt(version, 10))
	} else {
		for _, v := range c.ReadyVersions(name) {
			md.Versions = append(md.Versions, strconv.FormatInt(v.Version, 10))
		}
	}
	if md.Platform == "" {
		md.Platform = cfg.GetBackend()
	}
	batching := cfg.GetMaxBatchSize() >= 1
	md.Inputs = make([]TensorMeta, 0, len(cfg.GetInput()))
	for _, in := range cfg.GetInput() {
		md.Inputs = append(md.Inputs, tensorMeta(in.GetName(), in.GetDataType(), in.GetDims(), batching))
	}
	md.Outputs = make([]TensorMeta, 0, len(cfg.GetOutput()))
	for _, out := range cfg.GetOutput() {
		md.Outputs = append(md.Outputs, tensorMeta(out.GetName(), out.GetDataType(), out.GetDims(), batching))
	}
	return md, nil
}

func tensorMeta(name string, dt modelconfig.DataType, dims []int64, batching bool) TensorMeta {
	shape := make([]int64, 0, len(dims)+1)
	if batching {
		shape = append(shape, -1)
	}
	return TensorMeta{Name: name, Datatype: core.DataType(dt).String(), Shape: append(shape, dims...)}
}

// ModelConfig returns the effective (normalized, auto-completed)
// configuration of (name, version), or a lookup error. The value is shared:
// callers render it and never change it.
func ModelConfig(c *core.Server, name string, version int64) (*modelconfig.ModelConfig, error) {
	mv, release, err := c.Acquire(name, version)
	if err != nil {
		return nil, err
	}
	defer release()
	tu, ok := mv.Tuning()
	if !ok {
		return mv.Config, nil
	}
	// What the autopilot set is what is in force (docs/autopilot.md); its
	// batch cap is in the statistics' slo block, max_batch_size being the
	// model's contract with its clients.
	cfg := proto.Clone(mv.Config).(*modelconfig.ModelConfig)
	tu.Apply(cfg.GetDynamicBatching())
	return cfg, nil
}
