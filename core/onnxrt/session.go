package onnxrt

import (
	"fmt"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/repo/modelconfig"
)

// session is an open ORT session: onnxruntime_go's, or one opened through
// the C API with a prepacked-weights container, which onnxruntime_go
// cannot open. Runs go through the C API either way (ortapi.go); only an
// onnxruntime_go session also serves the runs that hand ORT onnxruntime_go
// values (execute.go).
type session struct {
	das       *ort.DynamicAdvancedSession // nil for a C API session
	handle    unsafe.Pointer              // the OrtSession
	container *container                  // held by a C API session
}

func (s *session) destroy() error {
	if s.das != nil {
		return s.das.Destroy()
	}
	releaseSession(s.handle)
	s.container.release()
	return nil
}

// Separate sessions of one model share their prepacked weights. ORT's CPU
// kernels repack constant weights (MatMul's, Conv's) into their own layout
// when a session is built and drop the originals; a prepacked-weights
// container passed to every session of a model keeps one copy of each
// packed weight for all of them (OrtApi::CreatePrepackedWeightsContainer,
// CreateSessionWithPrepackedWeightsContainer, onnxruntime_c_api.h; ONNX
// Runtime's docs, "Share pre-packed weights"). Only CPU kernels use it, so
// GPU sessions open without one, and a model that turns prepacking off
// (session.disable_prepacking) gets none either. With
// share_session_between_instances there is one session to begin with.

// containerKey is one load of one model file (see sessionKey).
type containerKey struct {
	load *modelconfig.ModelConfig
	path string
}

// container is a prepacked-weights container and the sessions using it.
type container struct {
	table *containers
	key   containerKey
	ptr   unsafe.Pointer
	refs  int
}

// containers holds a backend's containers.
type containers struct {
	mu sync.Mutex
	m  map[containerKey]*container
}

// acquire returns the container of key, creating it for the first session.
func (cs *containers) acquire(key containerKey) (*container, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.m[key]; c != nil {
		c.refs++
		return c, nil
	}
	ptr, err := newContainer()
	if err != nil {
		return nil, fmt.Errorf("prepacked weights container: %w", err)
	}
	if cs.m == nil {
		cs.m = map[containerKey]*container{}
	}
	c := &container{table: cs, key: key, ptr: ptr, refs: 1}
	cs.m[key] = c
	return c, nil
}

// release drops a session's hold; the last one frees the container, after
// the sessions that used it are gone, as ORT requires.
func (c *container) release() {
	cs := c.table
	cs.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(cs.m, c.key)
	}
	cs.mu.Unlock()
	if last {
		releaseContainer(c.ptr)
	}
}

// prepackable reports whether a session of this kind and config may use a
// container.
func prepackable(cfg *modelconfig.ModelConfig, kind modelconfig.ModelInstanceGroup_Kind) (bool, error) {
	if kind == modelconfig.ModelInstanceGroup_KIND_GPU {
		return false, nil
	}
	off, _, err := boolParam(cfg, "session.disable_prepacking")
	return !off, err
}
