// Package dynamic holds Triton's default scheduler and dynamic batcher
// (triton-inference-server/server docs/user_guide/batcher.md,
// triton-inference-server/core src/dynamic_batch_scheduler.cc): priority
// levels with their queue policies, batches formed to the preferred sizes
// within the queue delay, preserve_ordering, the direct lanes that run a
// request on its caller's goroutine when an instance is idle, and the
// pipeline workers of instances that run several executions at once, and,
// for a model that opts in (core/padbatch's pad_inputs and token_budget,
// docs/openai.md "Token-budget batching"), batches of requests of
// different lengths grouped by length under a token budget (form.go). A
// default scheduler is a dynamic batcher that forms batches of one. It
// reaches the core through the seam in core/seam.go (core.Batching,
// core.BatchScheduler, core.Runner, the Job's scheduler methods and
// core.RunExecution).
package dynamic
