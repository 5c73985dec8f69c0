package core

import (
	"context"
)

// jobState says where a job is; it changes only under scheduler.mu.
type jobState uint8

const (
	jobNew     jobState = iota
	jobQueued           // waiting in a level
	jobTaken            // in a batch handed to an instance
	jobRemoved          // cancelled or expired while queued; already answered
)

// Job is one request travelling through a scheduler, from its submission
// to its end: the unit a Scheduler receives (see the glossary in
// docs/architecture.md).
type Job struct {
	ctx   context.Context
	req   ExecRequest // the validated request, as its backend sees it
	times requestTimes
	done  chan error // the request's end: nil, or the error that ended it

	mv   *ModelVersion
	orig *InferRequest
	emit func(*InferResponse, bool) error // nil: collect into one and n
	one  *InferResponse
	n    int
	held []heldResponse // preserve_ordering: responses kept until the job's turn

	// runner is the scheduler that runs the job on instances, if any.
	runner Runner
	// Owned is its scheduler's own record of the job (the sequence
	// batcher's slot of its sequence); the core never reads it.
	Owned any

	state jobState
	size  int64 // max(1, batch size): what the request adds to a batch
	// Queue is its queueing scheduler's record of it while it waits.
	Queue QueueState

	// preserve_ordering: the finished result waits for earlier jobs.
	finished bool
	err      error
}

// cancelled marks a request whose client went away while it was queued.
type cancelled struct{ cause error }

func (c *cancelled) Error() string { return "request cancelled: " + c.cause.Error() }

// Runner is a scheduler that runs jobs on instances: the default scheduler
// and dynamic batcher, or the sequence batcher. A job's ExecRequest asks it
// what its scheduler decides; a job without one (an ensemble's, a cached
// response's) is neither held back nor left sending after its execution.
type Runner interface {
	// Keep sees each response of j before its consumer does: the sequence
	// batcher takes the state outputs out of it.
	Keep(j *Job, resp *ExecResponse) error
	// Preserves reports whether responses wait for their job's turn
	// (preserve_ordering).
	Preserves() bool
	// Settle answers j, whose request went on sending after its execution
	// returned and has now ended with err.
	Settle(j *Job, err error)
}

// Rescheduler is a Runner whose models may reschedule a request
// (ExecRequest.Reschedule): the sequence batcher of an iterative_sequence
// model.
type Rescheduler interface {
	// Reschedulable reports whether j may be rescheduled.
	Reschedulable(j *Job) bool
}
