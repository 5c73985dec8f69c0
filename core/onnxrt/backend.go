package onnxrt

import (
	"context"
	"errors"
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
	// Background loads ONNX Runtime (the library and its environment, 40–50
	// ms of one core) while New returns: the server reads its repository
	// meanwhile, the first auto-complete or instance waits for the load,
	// and Ready reports its outcome. Without it New returns once loaded.
	Background bool
}

// Backend serves every model whose config says backend "onnxruntime". It
// implements core.Backend.
type Backend struct {
	opts  Options
	log   *slog.Logger
	infos infoCache
	// sessions are the sessions its instances opened (share.go).
	sessions sessionTable

	// loaded is closed once ONNX Runtime's load has ended, loadErr its
	// failure (read after loaded is closed).
	loaded  chan struct{}
	loadErr error

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
	b := &Backend{opts: opts, log: log.With("backend", Name), loaded: make(chan struct{})}
	load := func() {
		defer close(b.loaded)
		if b.loadErr = acquireEnv(lib, opts.LogLevel); b.loadErr == nil {
			log.Info("ONNX Runtime loaded", "library", lib)
		}
	}
	if opts.Background {
		go load()
		return b, nil
	}
	load()
	if b.loadErr != nil {
		return nil, b.loadErr
	}
	return b, nil
}

// Ready waits for ONNX Runtime's load and returns its error: at once
// unless Options.Background.
func (b *Backend) Ready(ctx context.Context) error {
	select {
	case <-b.loaded:
		return b.loadErr
	default:
	}
	select {
	case <-b.loaded:
		return b.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
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
func (b *Backend) hold(ctx context.Context) (release func(), err error) {
	if err := b.Ready(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err // the caller gave up waiting; the load goes on
		}
		return nil, core.Errorf(core.CodeUnavailable, "the %s backend failed to load: %v", Name, err)
	}
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
	// A load still running ends before its reference is given back.
	<-b.loaded
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.loadErr != nil {
		return nil // it holds no reference
	}
	if err := releaseEnv(); err != nil {
		return fmt.Errorf("close %s backend: %w", Name, err)
	}
	return nil
}
