// Package autopilot tunes, while a model serves, the dynamic batching of
// the versions that declare a p99 latency target (`slo_p99_ms` in
// config.pbtxt, `--model-slo` on the command line), and estimates the
// rate each could serve within its target, for autoscalers
// (docs/autopilot.md).
//
// Each period it reads what the core already keeps, the version's
// statistics (execution costs per batch size, requests) and a window of
// request latencies, and picks the smallest preferred batch size whose
// capacity covers the arrival rate with a margin, and the queue delay that
// lets such batches fill, both within the target and the configuration's
// bounds. It changes them through the scheduler's Tune, which never drops
// or fails a request; it holds when the window has too few requests to
// judge, and returns to unbatched execution when the rate falls too low
// for a batch to fill.
//
// Where the configuration allows, it also scales the instances (scale.go,
// scaler.go): from the instance group's count down to one and back, the
// CPUs it may use split between them as ONNX Runtime intra-op threads,
// each change a reload through core.Server.Retune (the new copy serves
// before the old retires), at most one a dwell of periods, judged over
// the periods after it and reverted when it measures worse.
package autopilot
