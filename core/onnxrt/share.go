package onnxrt

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Sharing one ORT session between the instances of a model, as Triton's
// onnxruntime backend does with the model parameter
// share_session_between_instances (triton-inference-server/
// onnxruntime_backend README.md, "Model Config Options"; src/onnxruntime.cc,
// ModelState::LoadModel, pull request 343; docs/onnxruntime.md here). ORT
// guarantees that Run may be called concurrently on one session
// (microsoft/onnxruntime pull request 19301, which made the TensorRT
// provider honour it with a lock), so the instances run on it at once, each with its own run options, scratch,
// value caches, queue position and statistics. Triton keys its sessions by
// instance group, kind and device (src/session_key.h: a session is bound to
// its execution provider's device); inferd builds session options from the
// model's config and the backend's settings alone, so the instances of one
// kind and device agree on them whatever their group, and share across
// groups.

// shareParam is the model parameter that turns sharing on.
const shareParam = "share_session_between_instances"

// sessionKey names one shared session: one load of one model version
// (the *ModelConfig the core passes every instance of a load, kept alive
// by the entry so its address cannot be reused while the session lives;
// a reload brings a new config, and so fresh sessions, as Triton's new
// ModelState does), on one kind and device.
type sessionKey struct {
	load   *modelconfig.ModelConfig
	path   string
	kind   modelconfig.ModelInstanceGroup_Kind
	device int32
}

func (k sessionKey) where() string {
	if k.kind == modelconfig.ModelInstanceGroup_KIND_GPU {
		return fmt.Sprintf("GPU %d", k.device)
	}
	return k.kind.String()
}

// sharedSession is one session and the instances holding it.
type sharedSession struct {
	owner   string        // the instance that opened it, for the log
	ready   chan struct{} // closed once session or err is set
	session *ort.DynamicAdvancedSession
	err     error
	refs    int // instances holding or waiting for it
}

// sessionTable holds a backend's shared sessions, and counts every live
// session it opened, shared or not.
type sessionTable struct {
	mu     sync.Mutex
	shared map[sessionKey]*sharedSession
	live   int
}

// opened and closed keep the count of live sessions.
func (t *sessionTable) opened() {
	t.mu.Lock()
	t.live++
	t.mu.Unlock()
}

func (t *sessionTable) closed(s *ort.DynamicAdvancedSession, log *slog.Logger) {
	if err := s.Destroy(); err != nil {
		log.Warn("destroy session", "err", err)
	}
	t.mu.Lock()
	t.live--
	t.mu.Unlock()
}

// liveSessions is the number of ORT sessions open now.
func (t *sessionTable) liveSessions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// acquire returns the session of key, opening it with open when no
// instance holds one; release gives the instance's hold back, and the last
// release destroys the session. Instances that arrive while another opens
// it wait for that (or for ctx). A failed open fails its waiters too.
func (t *sessionTable) acquire(ctx context.Context, key sessionKey, instance string, log *slog.Logger,
	open func() (*ort.DynamicAdvancedSession, error)) (s *ort.DynamicAdvancedSession, release func(), err error) {
	t.mu.Lock()
	if t.shared == nil {
		t.shared = map[sessionKey]*sharedSession{}
	}
	e := t.shared[key]
	created := e == nil
	if created {
		e = &sharedSession{owner: instance, ready: make(chan struct{})}
		t.shared[key] = e
		t.logSplit(key, log)
	}
	e.refs++
	t.mu.Unlock()
	release = func() { t.release(key, e, log) }

	if created {
		s, err := open()
		t.mu.Lock()
		e.session, e.err = s, err
		if err != nil {
			delete(t.shared, key) // the next load tries afresh
		} else {
			t.live++
		}
		t.mu.Unlock()
		close(e.ready)
		if err != nil {
			release()
			return nil, nil, err
		}
		return s, release, nil
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, fmt.Errorf("load instance %s: waiting for the shared session: %w", instance, ctx.Err())
	}
	if e.err != nil {
		release()
		return nil, nil, fmt.Errorf("load instance %s: the shared session failed to open: %w", instance, e.err)
	}
	log.Info("instance shares the ONNX Runtime session", "with", e.owner)
	return e.session, release, nil
}

// release drops one hold on e; the last destroys its session.
func (t *sessionTable) release(key sessionKey, e *sharedSession, log *slog.Logger) {
	t.mu.Lock()
	e.refs--
	last := e.refs == 0 && e.session != nil
	if last && t.shared[key] == e {
		delete(t.shared, key)
	}
	t.mu.Unlock()
	if last {
		t.closed(e.session, log)
	}
}

// logSplit says why an instance opens a session of its own although the
// model shares: the load's other instances run on another device or kind.
// Called with t.mu held, for a new key.
func (t *sessionTable) logSplit(key sessionKey, log *slog.Logger) {
	for k, e := range t.shared {
		if k.load == key.load && k.path == key.path && k != key {
			log.Info(shareParam+" does not apply across devices: this instance opens its own session",
				"on", key.where(), "shared_session_on", k.where(), "opened_by", e.owner,
				"why", "an ONNX Runtime session is bound to its execution provider's device")
			return
		}
	}
}
