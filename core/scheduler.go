package core

import (
	"context"
	"sync"
	"time"
)

// job is one request travelling through a scheduler.
type job struct {
	ctx   context.Context
	p     *prepared
	times requestTimes
	done  chan error
}

// scheduler is the default scheduler: requests wait FIFO for the next free
// instance and run one per execution. The dynamic batcher replaces it for
// models with a dynamic_batching block.
type scheduler struct {
	queue chan *job
	stats *Stats
	wg    sync.WaitGroup
	insts []Instance
}

// queueDepth bounds how many requests may wait before Submit blocks the
// caller (who can still give up through its context).
const queueDepth = 1 << 14

func newScheduler(insts []Instance, stats *Stats) *scheduler {
	s := &scheduler{queue: make(chan *job, queueDepth), stats: stats, insts: insts}
	for _, inst := range insts {
		s.wg.Add(1)
		go s.worker(inst)
	}
	return s
}

func (s *scheduler) submit(j *job) error {
	s.stats.addPending(1)
	select {
	case s.queue <- j:
		return nil
	case <-j.ctx.Done():
		s.stats.addPending(-1)
		return Errorf(CodeCancelled, "request cancelled before it was queued")
	}
}

func (s *scheduler) worker(inst Instance) {
	defer s.wg.Done()
	for j := range s.queue {
		s.stats.addPending(-1)
		j.times.exec = time.Now()
		if err := j.ctx.Err(); err != nil {
			j.done <- &cancelled{err}
			continue
		}
		b := &j.p.batch
		err := inst.Execute(j.ctx, b)
		if err == nil {
			bs := max(j.p.batchSize, 1)
			s.stats.recordExecution(bs, b.InferStart.Sub(b.ComputeStart).Nanoseconds(),
				b.InferEnd.Sub(b.InferStart).Nanoseconds(), b.ComputeEnd.Sub(b.InferEnd).Nanoseconds())
		}
		j.done <- err
	}
}

// close stops taking work, lets queued jobs finish and closes the instances.
func (s *scheduler) close() {
	close(s.queue)
	s.wg.Wait()
	for _, inst := range s.insts {
		_ = inst.Close()
	}
}

// cancelled marks a request whose client went away while it was queued.
type cancelled struct{ cause error }

func (c *cancelled) Error() string { return "request cancelled: " + c.cause.Error() }
