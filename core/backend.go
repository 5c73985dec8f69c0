package core

import (
	"context"
	"errors"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Backend creates execution instances for one kind of model (ONNX Runtime,
// ensemble, ...). One Backend value serves every model of its kind.
type Backend interface {
	// Name is the config `backend` value this backend serves ("onnxruntime").
	Name() string
	// AutoComplete fills in what the model file knows and the config lacks
	// (inputs, outputs, max_batch_size, a dynamic_batching block). It is
	// called only when auto-complete is on.
	AutoComplete(ctx context.Context, version VersionFiles, cfg *modelconfig.ModelConfig) error
	// NewInstance loads one instance of a model version. It validates the
	// configuration against the model file and returns a load error
	// (shown as the version's UNAVAILABLE reason) when they disagree.
	NewInstance(ctx context.Context, spec InstanceSpec) (Instance, error)
}

// Instance executes requests for one model version on one device, as
// Triton hands a backend's execute() the list of requests of a batch.
// Execute is never called concurrently on the same instance.
//
// Each request answers through ExecRequest.Send, any number of times, from any
// goroutine, until a final send; it may go on after Execute returns (a
// decoupled model). A non-decoupled model sends exactly one response per
// request, marked final. If Execute returns an error, every request that
// has not sent its final response fails with it.
type Instance interface {
	Execute(ctx context.Context, e *Execution) error
	Close() error
}

// HealthReporter is an Instance that can stop being able to serve on its
// own (a Python worker process that died, or whose model's is_ready()
// says no): a version with such an instance is not ready.
type HealthReporter interface {
	Healthy() error
}

// Standby is an Instance that can be out of service for a moment (a Python
// worker being restarted): while Standby returns a channel, the scheduler
// hands the instance no new work, until the channel is closed, so the
// model's other instances take it instead of a dead one failing it.
type Standby interface {
	Standby() <-chan struct{}
}

// ErrRecovering marks a health error the backend is already mending (a
// Python worker being restarted): such an instance makes its version not
// ready only while every instance of the version is unhealthy. Any other
// health error makes the version not ready on its own (Triton's rule).
var ErrRecovering = errors.New("instance recovering")

// Recovering marks err (nil stays nil) as ErrRecovering, keeping its text
// and what it wraps.
func Recovering(err error) error {
	if err == nil {
		return nil
	}
	return recovering{err}
}

type recovering struct{ error }

func (r recovering) Unwrap() error        { return r.error }
func (r recovering) Is(target error) bool { return target == ErrRecovering }

// BatchInstance executes one concatenated batch: a backend that wants its
// requests' tensors gathered along the batch dimension (ONNX Runtime)
// implements it and is served through Concatenated.
type BatchInstance interface {
	Execute(ctx context.Context, b *ConcatBatch) error
	Close() error
}

// DeviceReader is an Instance that reads input tensors held in device
// memory (Tensor.Device) itself: ONNX Runtime on a GPU reads a client's
// CUDA region where it is, instead of from a host copy.
type DeviceReader interface {
	// ReadsDevice reports whether the instance reads memory of device id
	// (-1: host memory) in place.
	ReadsDevice(id int64) bool
}

// VersionFiles locates one version of a model on local disk.
type VersionFiles struct {
	ModelName  string
	Version    int64
	ModelDir   string // <root>/<model>
	VersionDir string // <root>/<model>/<version>
}

// InstanceSpec describes one instance to create.
type InstanceSpec struct {
	VersionFiles
	Name     string // <group name>_<k>
	Kind     modelconfig.ModelInstanceGroup_Kind
	DeviceID int32 // GPU id for KIND_GPU
	Config   *modelconfig.ModelConfig
	// Server is the core the instance serves, for backends whose models
	// call other models (Python's BLS).
	Server *Server
}
