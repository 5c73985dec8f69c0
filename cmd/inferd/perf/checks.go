package perf

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The checks of the command line's values, in perf_analyzer's order
// (parseArgs runs them one after the other), converting them into options.

// checkTarget reads the model, its version and the server's address.
func (o *options) checkTarget(r *rawArgs) error {
	if o.model == "" {
		return usagef("-m MODEL is required")
	}
	if o.version != "" {
		if v, err := strconv.ParseInt(o.version, 10, 64); err != nil || v < 0 {
			return usagef("-x %q: version must be a non-negative integer", o.version)
		}
	}
	var err error
	o.protocol = strings.ToLower(r.protocol)
	switch o.protocol {
	case "http":
		if o.streaming {
			return usagef("Streaming is only allowed with gRPC protocol and Triton C API.")
		}
		if o.baseURL, err = normalizeURL(r.rawURL); err != nil {
			return usageError{err}
		}
	case "grpc":
		rawURL := r.rawURL
		if !r.set["u"] {
			rawURL = "localhost:8001"
		}
		if o.baseURL, err = normalizeGRPCAddr(rawURL); err != nil {
			return usageError{err}
		}
	default:
		return usagef("Failed to parse -i (protocol). The value should be either HTTP or gRPC.")
	}
	if o.batch < 1 {
		return usagef("Failed to parse -b (batch size). The value must be > 0.")
	}
	return nil
}

// checkLoad reads the load: the concurrency or request-rate range, the
// input data and how the range is searched.
func (o *options) checkLoad(r *rawArgs) error {
	if r.concArg != "" && r.rateArg != "" {
		return usagef("Cannot use both Concurrency and RequestRate inference load modes.")
	}
	if r.zeroInput {
		if len(o.dataPaths) > 0 {
			return usagef("-z and --input-data: give one")
		}
		o.dataPaths = []string{"zero"}
	}
	o.inputData = "random"
	if len(o.dataPaths) > 0 {
		o.inputData = strings.Join(o.dataPaths, ",")
	}
	if len(o.dataPaths) == 1 && (o.dataPaths[0] == "random" || o.dataPaths[0] == "zero") {
		o.dataPaths = nil
	} else if slices.Contains(o.dataPaths, "random") || slices.Contains(o.dataPaths, "zero") {
		return usagef("--input-data %s: random and zero stand alone", o.inputData)
	}
	o.openRange = openEnded(r.rateArg) || openEnded(r.concArg)
	if o.openRange && r.latencyMS == 0 {
		return usagef("The end of the search range and the latency limit can not be both 0 (or 0.0) simultaneously")
	}
	if o.binarySearch && o.openRange {
		return usagef("The end of the range can not be 0 (or 0.0) for binary search mode.")
	}
	if o.binarySearch && r.latencyMS == 0 {
		return usagef("The --latency-threshold cannot be 0 for binary search mode.")
	}
	var err error
	switch {
	case r.rateArg != "":
		if o.rates, err = rateRange(r.rateArg); err != nil {
			return usagef("--request-rate-range %w", err)
		}
	case r.concArg != "":
		if o.concurrency, err = concurrencyRange(r.concArg); err != nil {
			return usagef("--concurrency-range %w", err)
		}
	default:
		o.concurrency = []int{1}
	}
	if o.distribution != "constant" && o.distribution != "poisson" {
		return usagef("--request-distribution %q: want constant or poisson", o.distribution)
	}
	if o.maxThreads < 1 {
		return usagef("Failed to parse --max-threads. The value must be > 0.")
	}
	return nil
}

// checkTensors reads how tensors are sent and generated.
func (o *options) checkTensors(r *rawArgs) error {
	if r.protocolJSON {
		if r.set["binary"] && o.binary {
			return usagef("--protocol-json and --binary=true contradict each other")
		}
		o.binary = false
	}
	if o.protocol == "grpc" && !o.binary {
		return usagef("--protocol-json and --binary=false are HTTP only: gRPC sends raw_input_contents")
	}
	if o.stringLength < 0 {
		return usagef("--string-length %d: must not be negative", o.stringLength)
	}
	return nil
}

// checkMeasurement reads the windows, their stability and the request
// counts, and whether requests are sent asynchronously.
func (o *options) checkMeasurement(r *rawArgs) error {
	if r.intervalMS <= 0 {
		return usagef("--measurement-interval %d: must be greater than 0", r.intervalMS)
	}
	o.interval = time.Duration(r.intervalMS) * time.Millisecond
	if r.stabilityPct <= 0 || math.IsNaN(r.stabilityPct) || math.IsInf(r.stabilityPct, 0) {
		return usagef("--stability-percentage %v: must be greater than 0", r.stabilityPct)
	}
	o.stability = r.stabilityPct / 100
	if o.maxTrials < stabilityWindows {
		return usagef("--max-trials %d: must be at least %d (stability compares the last %d windows)", o.maxTrials, stabilityWindows, stabilityWindows)
	}
	if o.percentile == -1 {
		o.percentile = 0 // the average, as perf_analyzer's -1
	} else if o.percentile < 1 || o.percentile > 99 {
		return usagef("Failed to parse --percentile. The value must be -1 for not reporting or in range (0, 100).")
	}
	// The texts are perf_analyzer's (triton-inference-server/perf_analyzer
	// src/command_line_parser.cc and src/perf_analyzer.cc).
	switch r.mode {
	case "time_windows":
	case "count_windows":
		o.countWindows = true
	default:
		return usagef("Failed to parse --measurement-mode. Unsupported type provided: '%s'. The available options are 'time_windows' or 'count_windows'.", r.mode)
	}
	if o.requestCount <= 0 {
		return usagef("Failed to parse --measurement-request-count. The value must be > 0.")
	}
	if err := checkRequestCounts(o); err != nil {
		return err
	}
	if o.async && r.sync {
		return usagef("Cannot specify --async and --sync simultaneously.")
	}
	if o.streaming {
		if r.sync {
			return usagef("can not use streaming with synchronous API")
		}
		o.async = true
	}
	return nil
}

// checkTransport reads the shared-memory mode and the latency limit.
func (o *options) checkTransport(r *rawArgs) error {
	switch o.sharedMemory {
	case "none", "system":
	case "cuda":
		return usagef("--shared-memory cuda is not supported by inferd perf: use system or none")
	default:
		return usagef("--shared-memory %q: want none, system or cuda", o.sharedMemory)
	}
	if o.outputShmSize <= 0 {
		return usagef("--output-shared-memory-size %d: must be greater than 0", o.outputShmSize)
	}
	if r.latencyMS < 0 {
		return usagef("--latency-threshold %d: must not be negative", r.latencyMS)
	}
	o.latencyThreshold = time.Duration(r.latencyMS) * time.Millisecond
	return nil
}
