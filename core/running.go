package core

// The running-requests gauge (inferd_inference_running_request_count, see
// docs/metrics.md): the requests an instance has taken and not yet
// finished. Triton exports only the queue (nv_inference_pending_request_count)
// and executions as a counter; scalers and endpoint pickers also want what
// is executing now. A request counts from the moment its execution starts
// until that execution ends, or, for a decoupled request still sending
// after it, until its final response (or its client going away). Warm-up
// requests and a sequence batcher's not-ready filler rows are no clients'
// requests and never count; an ensemble counts nothing itself, its steps
// count in their composing models.

// startRunning counts the clients' requests among jobs, an execution that
// is about to start.
func (s *Stats) startRunning(jobs []*Job) {
	var n int64
	for _, j := range jobs {
		if j.state == jobTaken {
			n++
		}
	}
	if n > 0 {
		sh := s.take()
		sh.running.Add(n)
		s.give(sh)
	}
}

// EndRunning uncounts j, a job whose execution (or, for a decoupled
// request, whose last response) is over; one startRunning did not count
// is ignored.
func (s *Stats) EndRunning(j *Job) {
	if j.state == jobTaken {
		sh := s.take()
		sh.running.Add(-1)
		s.give(sh)
	}
}

// runningNow sums the shards' running counts. A request may start in one
// shard and end in another, and the shards are read one at a time, so a
// reading is off by the requests that start or end while it reads (as any
// reading of a gauge that moves); it never goes below zero.
func (s *Stats) runningNow() int64 {
	var n int64
	for i, shards := 0, s.all(); i < len(shards); i++ {
		n += shards[i].running.Load()
	}
	return max(n, 0)
}
