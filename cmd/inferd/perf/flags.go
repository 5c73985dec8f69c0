package perf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options is the parsed command line.
type options struct {
	model   string
	version string
	baseURL string // HTTP: scheme://host[:port][/prefix], no trailing slash; gRPC: host:port
	batch   int

	protocol  string // http or grpc
	streaming bool   // gRPC: one ModelStreamInfer stream per sender

	concurrency  []int     // closed-loop settings; empty in request-rate mode
	rates        []float64 // open-loop settings (requests/s)
	openRange    bool      // the range's end was 0: the sweep ends at --latency-threshold
	distribution string    // constant or poisson
	maxThreads   int       // most requests in flight at once in request-rate mode

	inputData    string   // random, zero, or the data paths joined by commas (for display)
	dataPaths    []string // --input-data JSON files and directories, in order
	shapes       map[string][]int64
	stringLength int
	binary       bool

	interval         time.Duration
	countWindows     bool // --measurement-mode count_windows: windows of at least requestCount requests
	requestCount     int
	benchRequests    int     // --request-count: one window of this many requests, taken as stable (0: windows)
	warmupRequests   int     // --warmup-request-count: requests before measuring
	stability        float64 // fraction, 0.1 = 10%
	maxTrials        int
	percentile       int // 0: average latency decides stability
	latencyThreshold time.Duration
	async            bool // only changes stabilisation, as perf_analyzer's --async does

	sharedMemory  string // none or system
	outputShmSize int    // bytes of each output's region

	csvPath    string
	verboseCSV bool
	jsonPath   string
	// reportPath is --report: an HTML page with charts (htmlreport.go).
	reportPath string
	// collectMetrics, metricsURL and metricsInterval are perf_analyzer's
	// --collect-metrics options: server CPU and GPU use in --report
	// (servermetrics.go).
	collectMetrics  bool
	metricsURL      string
	metricsInterval time.Duration
}

// usageError marks bad command-line input (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// shapeFlag collects repeated --shape NAME:d1,d2,... values.
type shapeFlag map[string][]int64

func (s shapeFlag) String() string {
	parts := make([]string, 0, len(s))
	for name, dims := range s {
		parts = append(parts, name+":"+joinDims(dims))
	}
	return strings.Join(parts, " ")
}

func (s shapeFlag) Set(v string) error {
	name, dims, err := parseShape(v)
	if err != nil {
		return err
	}
	if _, dup := s[name]; dup {
		return fmt.Errorf("input %q given twice", name)
	}
	s[name] = dims
	return nil
}

// parseShape reads NAME:d1,d2,...; the name may itself hold colons, so the
// last one separates it from the dims.
func parseShape(v string) (string, []int64, error) {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return "", nil, fmt.Errorf("%q: want NAME:D1,D2", v)
	}
	name, list := v[:i], v[i+1:]
	if list == "" {
		return name, []int64{}, nil // a scalar input
	}
	var dims []int64
	for _, f := range strings.Split(list, ",") {
		d, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || d < 0 {
			return "", nil, fmt.Errorf("%q: dimension %q is not a non-negative integer", v, f)
		}
		dims = append(dims, d)
	}
	return name, dims, nil
}

// maxSettings bounds a sweep: a range of more settings is refused, and
// one without an end (end 0) stops after this many.
const maxSettings = 10000

// parseRange reads perf_analyzer's start[:end[:step]] (step defaults to 1).
// An end of 0 means no end: end comes back as the last of maxSettings
// settings.
func parseRange(v string) (start, end, step float64, err error) {
	parts := strings.Split(v, ":")
	if len(parts) > 3 {
		return 0, 0, 0, fmt.Errorf("%q: want start:end:step", v)
	}
	vals := []float64{0, 0, 1}
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, 0, 0, fmt.Errorf("%q: %q is not a number", v, p)
		}
		vals[i] = f
	}
	if len(parts) == 1 {
		vals[1] = vals[0]
	}
	start, end, step = vals[0], vals[1], vals[2]
	if end == 0 && len(parts) > 1 && step > 0 {
		end = start + step*(maxSettings-1)
	}
	switch {
	case start <= 0:
		return 0, 0, 0, fmt.Errorf("%q: start must be greater than 0", v)
	case end < start:
		return 0, 0, 0, fmt.Errorf("%q: end must not be below start", v)
	case step <= 0:
		return 0, 0, 0, fmt.Errorf("%q: step must be greater than 0", v)
	case (end-start)/step >= maxSettings:
		return 0, 0, 0, fmt.Errorf("%q: more than %d settings", v, maxSettings)
	}
	return start, end, step, nil
}

// checkRequestCounts applies perf_analyzer's rules to --request-count and
// --warmup-request-count: one setting only, and no fewer requests than it.
func checkRequestCounts(o *options) error {
	if o.benchRequests < 0 || o.warmupRequests < 0 {
		return usagef("--request-count and --warmup-request-count must not be negative")
	}
	kind, several := "concurrency", len(o.concurrency) > 1
	if len(o.rates) > 0 {
		kind, several = "request rate", len(o.rates) > 1
	}
	if o.warmupRequests > 0 && several {
		return usagef("--warmup-request-count not supported with multiple %s values in one run", kind)
	}
	if o.benchRequests == 0 {
		return nil
	}
	if len(o.rates) > 0 && float64(o.benchRequests) < math.Trunc(o.rates[0]) || len(o.concurrency) > 0 && o.benchRequests < o.concurrency[0] {
		return usagef("--request-count can not be less than %s", kind)
	}
	if several {
		return usagef("--request-count not supported with multiple %s values in one run", kind)
	}
	return nil
}

// openEnded tells whether a range's end is 0.
func openEnded(v string) bool {
	parts := strings.Split(v, ":")
	if len(parts) < 2 {
		return false
	}
	end, err := strconv.ParseFloat(strings.TrimSpace(parts[1]), 64)
	return err == nil && end == 0
}

// concurrencyRange expands a range of whole worker counts.
func concurrencyRange(v string) ([]int, error) {
	start, end, step, err := parseRange(v)
	if err != nil {
		return nil, err
	}
	if start != math.Trunc(start) || end != math.Trunc(end) || step != math.Trunc(step) {
		return nil, fmt.Errorf("%q: concurrency values must be whole numbers", v)
	}
	var out []int
	for c := start; c <= end; c += step {
		out = append(out, int(c))
	}
	return out, nil
}

// rateRange expands a range of request rates; the values are computed from
// the index so that steps like 0.1 do not drift.
func rateRange(v string) ([]float64, error) {
	start, end, step, err := parseRange(v)
	if err != nil {
		return nil, err
	}
	var out []float64
	for i := 0; ; i++ {
		r := start + float64(i)*step
		if r > end*(1+1e-9) {
			break
		}
		out = append(out, r)
	}
	return out, nil
}

// normalizeURL accepts host:port or a full http(s) URL.
func normalizeURL(v string) (string, error) {
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", fmt.Errorf("-u %q: %w", v, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("-u %q: scheme must be http or https", v)
	}
	if u.Host == "" {
		return "", fmt.Errorf("-u %q: no host", v)
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

// normalizeGRPCAddr accepts host:port (a grpc:// prefix is dropped).
func normalizeGRPCAddr(v string) (string, error) {
	v = strings.TrimPrefix(v, "grpc://")
	if strings.Contains(v, "/") {
		return "", fmt.Errorf("-u %q: gRPC takes HOST:PORT", v)
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("-u %q: gRPC takes HOST:PORT", v)
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("-u %q: gRPC takes HOST:PORT", v)
	}
	return v, nil
}

const usageText = `usage: inferd perf -m MODEL [flags]

Measures throughput and latency of a KServe v2 (Triton-compatible) server
over HTTP or gRPC.

  -m MODEL                        model name (required)
  -x VERSION                      model version (default: the server's choice)
  -u HOST:PORT|URL                server (default localhost:8000, gRPC localhost:8001)
  -i, --protocol http|grpc        protocol (default http)
  --streaming                     gRPC: one ModelStreamInfer stream per concurrent sender
  -b N                            batch size (default 1)
  --concurrency-range S:E:STEP    closed loop: N requests kept in flight (default 1)
  --request-rate-range S:E:STEP   open loop: requests/s sent on a schedule
  --request-distribution D        constant or poisson (default constant)
  --max-threads N                 request-rate mode: most requests in flight (default 1024)
  --input-data random|zero|PATH   input values; PATH is a perf_analyzer JSON data file or a directory
                                  of one file per input (repeatable: the files' steps follow each other)
  --shape NAME:D1,D2,...          dims of a variable-shape input, batch dim excluded (repeatable)
  --string-length N               length of generated BYTES elements (default 128)
  --binary                        HTTP: binary tensor extension for inputs and outputs (default true)
  --protocol-json                 HTTP: JSON tensors instead (same as --binary=false)
  --shared-memory none|system     pass tensors through system shared memory regions (default none)
  --output-shared-memory-size N   bytes of each output's region (default 102400)
  --measurement-mode M            time_windows or count_windows (default time_windows)
  -p, --measurement-interval MS   time_windows: window length in milliseconds (default 5000)
  --measurement-request-count N   count_windows: at least N requests and 1 s a window (default 50)
  -s, --stability-percentage P    the last 3 windows' max/min within P percent (default 10)
  -r, --max-trials N              windows per setting before giving up on stability (default 10)
  --request-count N               measure one window of N requests instead (one setting only)
  --warmup-request-count N        send N requests before measuring (one setting only)
  --percentile P                  use the P-th percentile latency for stability (default -1: average)
  -a, --async | --sync            async: a setting whose latency never settles counts as stable
                                  once its throughput does (--streaming is async)
  -l, --latency-threshold MS      stop the sweep once latency exceeds MS (default: off)
  -f FILE                         write perf_analyzer's CSV report
  --verbose-csv                   add perf_analyzer's verbose CSV columns
  --json FILE                     write a JSON report
  --report FILE                   write an HTML report with charts
  --collect-metrics               read the server's CPU and GPU use into --report
  --metrics-url URL               its metrics endpoint (default localhost:8002/metrics)
  --metrics-interval MS           how often to read it (default 1000)

See also: inferd perf search -h, the configuration search.
`

// parseArgs reads the command line; -h gives flag.ErrHelp after printing
// the usage to stderr.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{shapes: map[string][]int64{}}
	fs := flag.NewFlagSet("inferd perf", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by Main
	fs.Usage = func() {}
	var (
		rawURL, protocol, concArg, rateArg, mode string
		intervalMS, latencyMS                    int
		stabilityPct                             float64
		protocolJSON, sync                       bool
	)
	fs.StringVar(&o.model, "m", "", "model name")
	fs.StringVar(&o.version, "x", "", "model version")
	fs.StringVar(&rawURL, "u", "localhost:8000", "server")
	for _, n := range []string{"i", "protocol"} {
		fs.StringVar(&protocol, n, "http", "protocol")
	}
	fs.BoolVar(&o.streaming, "streaming", false, "gRPC streaming")
	fs.IntVar(&o.batch, "b", 1, "batch size")
	fs.StringVar(&concArg, "concurrency-range", "", "closed-loop range")
	fs.StringVar(&rateArg, "request-rate-range", "", "open-loop range")
	fs.StringVar(&o.distribution, "request-distribution", "constant", "constant or poisson")
	fs.IntVar(&o.maxThreads, "max-threads", 1024, "request-rate concurrency cap")
	fs.Func("input-data", "random, zero or a data file (repeatable)", func(v string) error {
		o.dataPaths = append(o.dataPaths, v)
		return nil
	})
	fs.Var(shapeFlag(o.shapes), "shape", "NAME:dims")
	fs.IntVar(&o.stringLength, "string-length", 128, "generated BYTES length")
	fs.BoolVar(&o.binary, "binary", true, "binary tensors")
	fs.BoolVar(&protocolJSON, "protocol-json", false, "JSON tensors")
	for _, n := range []string{"p", "measurement-interval"} {
		fs.IntVar(&intervalMS, n, 5000, "window ms")
	}
	for _, n := range []string{"s", "stability-percentage"} {
		fs.Float64Var(&stabilityPct, n, 10, "stability percent")
	}
	for _, n := range []string{"r", "max-trials"} {
		fs.IntVar(&o.maxTrials, n, 10, "windows per setting")
	}
	fs.IntVar(&o.percentile, "percentile", -1, "stability percentile")
	fs.StringVar(&mode, "measurement-mode", "time_windows", "time_windows or count_windows")
	fs.IntVar(&o.requestCount, "measurement-request-count", 50, "count_windows: requests a window")
	fs.IntVar(&o.benchRequests, "request-count", 0, "requests to measure")
	fs.IntVar(&o.warmupRequests, "warmup-request-count", 0, "warm-up requests")
	for _, n := range []string{"a", "async"} {
		fs.BoolVar(&o.async, n, false, "asynchronous")
	}
	fs.BoolVar(&sync, "sync", false, "synchronous")
	fs.StringVar(&o.sharedMemory, "shared-memory", "none", "none, system or cuda")
	fs.IntVar(&o.outputShmSize, "output-shared-memory-size", 102400, "bytes per output region")
	fs.BoolVar(&o.verboseCSV, "verbose-csv", false, "verbose CSV")
	for _, n := range []string{"l", "latency-threshold"} {
		fs.IntVar(&latencyMS, n, 0, "latency threshold ms")
	}
	fs.StringVar(&o.csvPath, "f", "", "CSV report")
	fs.StringVar(&o.jsonPath, "json", "", "JSON report")
	fs.StringVar(&o.reportPath, "report", "", "HTML report")
	fs.BoolVar(&o.collectMetrics, "collect-metrics", false, "server metrics")
	fs.Func("metrics-url", "metrics URL", o.setMetricsURL)
	fs.Func("metrics-interval", "metrics interval ms", o.setMetricsInterval)

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if o.model == "" {
		return nil, usagef("-m MODEL is required")
	}
	if o.version != "" {
		if v, err := strconv.ParseInt(o.version, 10, 64); err != nil || v < 0 {
			return nil, usagef("-x %q: version must be a non-negative integer", o.version)
		}
	}
	var err error
	o.protocol = strings.ToLower(protocol)
	switch o.protocol {
	case "http":
		if o.streaming {
			return nil, usagef("--streaming is only allowed with gRPC (-i grpc)")
		}
		if o.baseURL, err = normalizeURL(rawURL); err != nil {
			return nil, usageError{err}
		}
	case "grpc":
		if !set["u"] {
			rawURL = "localhost:8001"
		}
		if o.baseURL, err = normalizeGRPCAddr(rawURL); err != nil {
			return nil, usageError{err}
		}
	default:
		return nil, usagef("-i %q: want http or grpc", protocol)
	}
	if o.batch < 1 {
		return nil, usagef("-b %d: batch size must be at least 1", o.batch)
	}
	if concArg != "" && rateArg != "" {
		return nil, usagef("--concurrency-range and --request-rate-range are mutually exclusive")
	}
	o.inputData = "random"
	if len(o.dataPaths) > 0 {
		o.inputData = strings.Join(o.dataPaths, ",")
	}
	if len(o.dataPaths) == 1 && (o.dataPaths[0] == "random" || o.dataPaths[0] == "zero") {
		o.dataPaths = nil
	} else if slices.Contains(o.dataPaths, "random") || slices.Contains(o.dataPaths, "zero") {
		return nil, usagef("--input-data %s: random and zero stand alone", o.inputData)
	}
	o.openRange = openEnded(rateArg) || openEnded(concArg)
	if o.openRange && latencyMS == 0 {
		return nil, usagef("The end of the search range and the latency limit can not be both 0 (or 0.0) simultaneously")
	}
	switch {
	case rateArg != "":
		if o.rates, err = rateRange(rateArg); err != nil {
			return nil, usagef("--request-rate-range %w", err)
		}
	case concArg != "":
		if o.concurrency, err = concurrencyRange(concArg); err != nil {
			return nil, usagef("--concurrency-range %w", err)
		}
	default:
		o.concurrency = []int{1}
	}
	if o.distribution != "constant" && o.distribution != "poisson" {
		return nil, usagef("--request-distribution %q: want constant or poisson", o.distribution)
	}
	if o.maxThreads < 1 {
		return nil, usagef("--max-threads %d: must be at least 1", o.maxThreads)
	}
	if protocolJSON {
		if set["binary"] && o.binary {
			return nil, usagef("--protocol-json and --binary=true contradict each other")
		}
		o.binary = false
	}
	if o.protocol == "grpc" && !o.binary {
		return nil, usagef("--protocol-json and --binary=false are HTTP only: gRPC sends raw_input_contents")
	}
	if o.stringLength < 0 {
		return nil, usagef("--string-length %d: must not be negative", o.stringLength)
	}
	if intervalMS <= 0 {
		return nil, usagef("--measurement-interval %d: must be greater than 0", intervalMS)
	}
	o.interval = time.Duration(intervalMS) * time.Millisecond
	if stabilityPct <= 0 || math.IsNaN(stabilityPct) || math.IsInf(stabilityPct, 0) {
		return nil, usagef("--stability-percentage %v: must be greater than 0", stabilityPct)
	}
	o.stability = stabilityPct / 100
	if o.maxTrials < stabilityWindows {
		return nil, usagef("--max-trials %d: must be at least %d (stability compares the last %d windows)", o.maxTrials, stabilityWindows, stabilityWindows)
	}
	if o.percentile == -1 {
		o.percentile = 0 // the average, as perf_analyzer's -1
	} else if o.percentile < 1 || o.percentile > 99 {
		return nil, usagef("--percentile %d: must be -1 (the average) or between 1 and 99", o.percentile)
	}
	// The texts are perf_analyzer's (triton-inference-server/perf_analyzer
	// src/command_line_parser.cc and src/perf_analyzer.cc).
	switch mode {
	case "time_windows":
	case "count_windows":
		o.countWindows = true
	default:
		return nil, usagef("Failed to parse --measurement-mode. Unsupported type provided: '%s'. The available options are 'time_windows' or 'count_windows'.", mode)
	}
	if o.requestCount <= 0 {
		return nil, usagef("Failed to parse --measurement-request-count. The value must be > 0.")
	}
	if err := checkRequestCounts(o); err != nil {
		return nil, err
	}
	if o.async && sync {
		return nil, usagef("Cannot specify --async and --sync simultaneously.")
	}
	if o.streaming {
		if sync {
			return nil, usagef("can not use streaming with synchronous API")
		}
		o.async = true
	}
	switch o.sharedMemory {
	case "none", "system":
	case "cuda":
		return nil, usagef("--shared-memory cuda is not supported by inferd perf: use system or none")
	default:
		return nil, usagef("--shared-memory %q: want none, system or cuda", o.sharedMemory)
	}
	if o.outputShmSize <= 0 {
		return nil, usagef("--output-shared-memory-size %d: must be greater than 0", o.outputShmSize)
	}
	if latencyMS < 0 {
		return nil, usagef("--latency-threshold %d: must not be negative", latencyMS)
	}
	o.latencyThreshold = time.Duration(latencyMS) * time.Millisecond
	return o, nil
}

func joinDims(dims []int64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(s, ",")
}
