package onnxrt

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/inferd/inferd/core"
)

// Name is the config `backend` value this backend serves.
const Name = "onnxruntime"

// DefaultMaxBatchSize is Triton's default for the backend setting
// default-max-batch-size; callers pass it in Options unless configured.
const DefaultMaxBatchSize = 4

// Options are the backend-wide settings (--backend-config=onnxruntime,...).
type Options struct {
	// LibraryPath is the ORT shared library; empty means FindLibrary("").
	LibraryPath string
	// DefaultMaxBatchSize is what auto-complete writes as max_batch_size for
	// a batchable model that sets none. Zero means zero: pass
	// DefaultMaxBatchSize for Triton's default. Negative counts as 0.
	DefaultMaxBatchSize int
	// EnableGlobalThreadpool makes IntraOpThreads/InterOpThreads (when > 0)
	// size every session's pools and the models' thread counts be ignored.
	EnableGlobalThreadpool bool
	IntraOpThreads         int
	InterOpThreads         int
	// Logger receives the backend's own messages; nil discards them.
	Logger *slog.Logger
	// LogLevel is the server's log level; ORT's log severity follows it
	// (debug → verbose, info/warn → warning, error → error).
	LogLevel slog.Level
}

// Backend serves every model whose config says backend "onnxruntime". It
// implements core.Backend.
type Backend struct {
	opts  Options
	log   *slog.Logger
	infos infoCache
	// sessions are the sessions its instances opened (share.go).
	sessions sessionTable

	mu     sync.Mutex
	closed bool
}

var _ core.Backend = (*Backend)(nil)

// New loads ONNX Runtime (once per process: every Backend shares the one
// environment, and asking for a second library path is an error) and
// returns a backend. Close it when done; the environment is torn down when
// the last backend and the last instance are closed.
func New(opts Options) (*Backend, error) {
	lib, err := FindLibrary(opts.LibraryPath)
	if err != nil {
		return nil, err
	}
	opts.LibraryPath = lib
	if opts.DefaultMaxBatchSize < 0 {
		opts.DefaultMaxBatchSize = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := acquireEnv(lib, opts.LogLevel); err != nil {
		return nil, err
	}
	log.Info("ONNX Runtime loaded", "library", lib)
	return &Backend{opts: opts, log: log.With("backend", Name)}, nil
}

// Name returns "onnxruntime".
func (b *Backend) Name() string { return Name }

// ParallelInstances reports that a version's instances may be created at
// once (core.ParallelInstances): ONNX Runtime creates sessions
// concurrently, as Triton's onnxruntime backend declares
// (triton-inference-server/onnxruntime_backend src/onnxruntime.cc).
func (b *Backend) ParallelInstances() bool { return true }

// hold keeps the environment up while the backend uses ORT outside an
// instance (auto-complete, loading), so a concurrent Close cannot tear it
// down underneath.
func (b *Backend) hold() (release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, core.Errorf(core.CodeUnavailable, "the %s backend is closed", Name)
	}
	retainEnv()
	return func() { _ = releaseEnv() }, nil
}

// Close releases the backend's hold on the ORT environment. Instances it
// created stay usable until they are closed themselves.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if err := releaseEnv(); err != nil {
		return fmt.Errorf("close %s backend: %w", Name, err)
	}
	return nil
}
