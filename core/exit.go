package core

import (
	"context"
	"time"
)

// errStopping refuses new work while the server exits, in Triton's words
// (triton-inference-server/core src/dynamic_batch_scheduler.cc and
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc, Enqueue).
const errStopping = "Server is stopping, scheduler for model has stopped accepting new inference requests"

// errNotReady refuses a load or an unload once the exit began, as
// Triton's InferenceServer::LoadModel and UnloadModel do
// (triton-inference-server/core src/server.cc).
var errNotReady = Errorf(CodeUnavailable, "Server not ready")

// exitTimeout is Triton's error for an exit whose timeout passed
// (triton-inference-server/core src/server.cc, InferenceServer::Stop), on
// which tritonserver exits with status 1.
func exitTimeout() error {
	return Errorf(CodeInternal, "Exit timeout expired. Exiting immediately.")
}

// exitPoll is how often Stop looks whether the live sequences ended.
const exitPoll = 10 * time.Millisecond

// Stop begins the exit as Triton's InferenceServer::Stop: loads and
// unloads are refused, and every model stops taking new work (a sequence
// model only new STARTs; an ensemble's steps refuse for it) while the
// requests of live sequences go on, so that a client can finish them.
// Stop returns once no sequence is live, whether ended by its END or by
// max_sequence_idle_microseconds, or with Triton's exit timeout error when
// ctx ends first. The models keep serving: Shutdown unloads them.
func (s *Server) Stop(ctx context.Context) error {
	t := time.NewTicker(exitPoll)
	defer t.Stop()
	for {
		// Each round stops the copies a load committed meanwhile too.
		if s.stopVersions() == 0 {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			s.log.Warn("exit: gave up waiting for live sequences", "err", ctx.Err())
			return exitTimeout()
		}
	}
}

// stopVersions stops every serving copy and the copies reloads replaced
// that still run sequences, and counts their live sequences.
func (s *Server) stopVersions() int {
	s.mu.Lock()
	s.stopping = true
	var serving []*ModelVersion
	for _, m := range s.models {
		for _, slot := range m.versions {
			if slot.mv != nil {
				serving = append(serving, slot.mv)
			}
		}
	}
	s.unlock()
	live := 0
	for _, mv := range serving {
		live += mv.stop()
		for _, h := range mv.handovers {
			live += h.mv.stop()
		}
	}
	return live
}

// isStopping reports whether Stop was called.
func (s *Server) isStopping() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stopping
}

// stop makes mv refuse new work and returns its live sequences.
func (mv *ModelVersion) stop() int {
	mv.stopping.Store(true)
	if mv.seqs != nil {
		return mv.seqs.Stop()
	}
	return 0
}

// stopRefusal refuses r once mv is stopped, as Triton's dynamic batcher
// does every request (its default scheduler is one too). The sequence
// batcher refuses only STARTs itself, and the ensemble scheduler nothing:
// Triton's ensemble scheduler's Stop does nothing, its steps refuse.
func (mv *ModelVersion) stopRefusal(r *ExecRequest) error {
	if !mv.stopping.Load() {
		return nil
	}
	if mv.batch == nil {
		return nil
	}
	return Errorf(CodeUnavailable, "%s%s", RequestPrefix(r.ID), errStopping)
}
