package dynamic

import "github.com/inferd/inferd/core"

// Pipeliner is an Instance that can take its next execution while its last
// one runs: Depth executions at once, which it runs one after the other
// (a Python worker reads the next batch from its socket as soon as it has
// answered the last, instead of sleeping until the server has processed
// the answer and sent more). Depth ≤ 1 means no pipelining.
type Pipeliner interface {
	Depth() int
}

// pipeline is a Pipeliner's second worker. While instances execute, it
// waits for work like any worker, but gives way to workers with nothing to
// do: it takes a batch only while no instance of the model is idle, so an
// idle instance is never passed over for a busy one. wake receives a value
// each time any instance starts an execution (all may be busy now).
func (s *scheduler) pipeline(inst core.Instance, wake <-chan struct{}) {
	defer s.wg.Done()
	var e core.Execution
	var errs []error
	away := s.outOfService(inst)
	idle := func() bool { return s.idle.Load() > 0 || (away != nil && away()) }
	for {
		select {
		case <-wake:
		case <-s.quit:
			return
		}
		core.AwaitService(inst, s.quit)
		<-s.turn
		jobs, _ := s.nextUnless(nil, idle)
		s.turn <- struct{}{}
		if jobs == nil {
			continue
		}
		errs = core.RunExecution(inst, s.cfg.model, s.cfg.decoupled, s.stats, jobs, s.log, &e, errs)
		s.answer(jobs, errs)
	}
}

// pipelined starts inst's second worker if it pipelines.
func (s *scheduler) pipelined(inst core.Instance) {
	if p, ok := inst.(Pipeliner); !ok || p.Depth() < 2 {
		return
	}
	wake := make(chan struct{}, 1)
	s.pipes = append(s.pipes, wake)
	s.wg.Add(1)
	go s.pipeline(inst, wake)
}

// wakePipelines tells the pipeline workers that an instance starts an
// execution.
func (s *scheduler) wakePipelines() {
	for _, wake := range s.pipes {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}
