package perf

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// report is the --json output.
type report struct {
	Model               string  `json:"model"`
	Version             string  `json:"version,omitempty"`
	URL                 string  `json:"url"`
	Protocol            string  `json:"protocol"` // http or grpc
	Streaming           bool    `json:"streaming,omitempty"`
	BatchSize           int     `json:"batch_size"`
	Mode                string  `json:"mode"` // concurrency or request_rate
	Distribution        string  `json:"request_distribution,omitempty"`
	Tensors             string  `json:"tensors"` // binary or json
	InputData           string  `json:"input_data"`
	MeasurementInterval int64   `json:"measurement_interval_ms"`
	StabilityPercentage float64 `json:"stability_percentage"`
	MaxTrials           int     `json:"max_trials"`
	StabilityLatency    string  `json:"stability_latency"` // avg or pN
	// ServiceKind, Endpoint and TextsPerRequest describe the embeddings
	// mode (openai.go); empty for v2 infer.
	ServiceKind     string   `json:"service_kind,omitempty"`
	Endpoint        string   `json:"endpoint,omitempty"`
	TextsPerRequest int      `json:"texts_per_request,omitempty"`
	Results         []result `json:"results"`
}

func tensorsName(o *options) string {
	if o.serviceKind == "openai" {
		return "json" // the embeddings routes' bodies
	}
	if o.protocol == "grpc" {
		return "raw"
	}
	if o.binary {
		return "binary"
	}
	return "json"
}

// writeSettings prints perf_analyzer's "*** Measurement Settings ***" block
// (triton-inference-server/perf_analyzer src/perf_analyzer.cc, PrerunReport)
// and inferd perf's own lines on the model and the protocol.
func writeSettings(w io.Writer, o *options, info *modelInfo) {
	fmt.Fprintf(w, "*** Measurement Settings ***\n")
	if o.serviceKind == "openai" {
		fmt.Fprintf(w, "  Service Kind: OPENAI\n")
	} else {
		fmt.Fprintf(w, "  Batch size: %d\n", o.batch)
		fmt.Fprintf(w, "  Service Kind: Triton\n")
	}
	plural := func(n int) string {
		if n > 1 {
			return "s"
		}
		return ""
	}
	if o.warmupRequests > 0 {
		fmt.Fprintf(w, "  Sending %d warmup request%s\n", o.warmupRequests, plural(o.warmupRequests))
	}
	if o.benchRequests > 0 {
		fmt.Fprintf(w, "  Sending %d benchmark request%s\n", o.benchRequests, plural(o.benchRequests))
	} else {
		writeStabilization(w, o)
	}
	if len(o.rates) > 0 {
		if last := o.rates[len(o.rates)-1]; last != 1 {
			fmt.Fprintf(w, "  Latency limit: %d msec\n", o.latencyThreshold.Milliseconds())
			if !o.openRange {
				fmt.Fprintf(w, "  Request Rate limit: %s requests per seconds\n", cppDouble(last))
			}
		}
		if o.distribution == "poisson" {
			fmt.Fprintf(w, "  Using poisson distribution on request generation\n")
		} else {
			fmt.Fprintf(w, "  Using uniform distribution on request generation\n")
		}
	} else if last := o.concurrency[len(o.concurrency)-1]; last != 1 {
		fmt.Fprintf(w, "  Latency limit: %d msec\n", o.latencyThreshold.Milliseconds())
		if !o.openRange {
			fmt.Fprintf(w, "  Concurrency limit: %d concurrent requests\n", last)
		}
	}
	if o.binarySearch {
		fmt.Fprintf(w, "  Using Binary Search algorithm\n")
	}
	if o.async {
		fmt.Fprintf(w, "  Using asynchronous calls for inference\n")
	} else {
		fmt.Fprintf(w, "  Using synchronous calls for inference\n")
	}
	if o.serviceKind == "openai" {
		fmt.Fprintf(w, "  Model: %s at %s/%s\n", o.model, o.baseURL, o.endpoint)
		fmt.Fprintf(w, "  Texts per request: %d\n", o.textBatch)
		fmt.Fprintf(w, "  Input data: %s\n\n", o.inputData)
		return
	}
	version := o.version
	if version == "" {
		version = "server's choice"
	}
	fmt.Fprintf(w, "  Model: %s (version: %s, max_batch_size %d) at %s\n", o.model, version, info.maxBatch, o.baseURL)
	fmt.Fprintf(w, "  Protocol: %s, %s tensors; input data: %s\n\n", protocolName(o), tensorsName(o), o.inputData)
}

// writeStabilization is the settings block's lines on windows and stability.
func writeStabilization(w io.Writer, o *options) {
	if o.countWindows {
		fmt.Fprintf(w, "  Using \"count_windows\" mode for stabilization\n")
	} else {
		fmt.Fprintf(w, "  Using \"time_windows\" mode for stabilization\n")
	}
	metric := "latency and throughput"
	if o.async {
		metric = "throughput"
	}
	if o.percentile == 0 {
		fmt.Fprintf(w, "  Stabilizing using average %s\n", metric)
	} else {
		fmt.Fprintf(w, "  Stabilizing using p%d %s\n", o.percentile, metric)
	}
	if o.countWindows {
		fmt.Fprintf(w, "  Minimum number of samples in each window: %d\n", o.requestCount)
	} else {
		fmt.Fprintf(w, "  Measurement window: %d msec\n", o.interval.Milliseconds())
	}
}

// cppDouble formats v as C++'s default ostream does (6 significant
// digits, no trailing zeros), which perf_analyzer's output uses for
// throughput and request rates.
func cppDouble(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// usec truncates microseconds to a whole number, as perf_analyzer's
// integer division of nanoseconds does.
func usec(v float64) int64 { return int64(v) }

// writeSettingStart prints the line perf_analyzer prints as a setting's
// load starts.
func writeSettingStart(w io.Writer, o *options, concurrency int, rate float64) {
	if len(o.rates) > 0 {
		fmt.Fprintf(w, "Request Rate: %s inference requests per second\n", cppDouble(rate))
		return
	}
	fmt.Fprintf(w, "Request concurrency: %d\n", concurrency)
}

// writeSettingReport prints one setting's "Client:" and "Server:" blocks
// as perf_analyzer's Report does (triton-inference-server/perf_analyzer
// src/inference_profiler.cc, ReportClientSideStats and
// ReportServerSideStats). The client library's time is the request's
// latency here: inferd perf does not time its client library apart.
func writeSettingReport(w io.Writer, o *options, r result) {
	ok := r.Requests - r.Errors
	fmt.Fprintf(w, "  Client: \n")
	fmt.Fprintf(w, "    Request count: %d\n", ok)
	if ok > 0 && float64(r.Delayed)/float64(ok)*100 > 1 {
		fmt.Fprintf(w, "    [WARNING] Perf Analyzer was not able to keep up with the desired request rate. ")
		fmt.Fprintf(w, "%.2f%% of the requests were delayed. \n", float64(r.Delayed)/float64(ok)*100)
	}
	fmt.Fprintf(w, "    Throughput: %s infer/sec\n", cppDouble(r.Throughput))
	if o.serviceKind == "openai" {
		fmt.Fprintf(w, "    Text throughput: %s texts/sec\n", cppDouble(r.TextsPerSec))
	}
	if o.percentile == 0 {
		fmt.Fprintf(w, "    Avg latency: %d usec (standard deviation %d usec)\n", usec(r.Avg), usec(r.StdDev))
	}
	for _, p := range reportedPercentiles(o.percentile) {
		fmt.Fprintf(w, "    p%d latency: %d usec\n", p, usec(r.Percentiles[p]))
	}
	if o.verbose {
		// Not perf_analyzer's lines, so only when asked; always in --json's report.
		fmt.Fprintf(w, "    p99.9 latency: %d usec (max %d usec)\n", usec(r.P999), usec(r.Max))
	}
	sendRecv := usec(r.ClientSendUS) + usec(r.ClientRecvUS)
	wait := max(usec(r.Avg)-sendRecv, 0)
	switch {
	case o.verbose && o.protocol == "grpc":
		fmt.Fprintf(w, "    Avg gRPC time: %d usec (marshal %d usec + response wait %d usec + unmarshal %d usec)\n", usec(r.Avg), usec(r.ClientSendUS), wait, usec(r.ClientRecvUS))
	case o.verbose:
		fmt.Fprintf(w, "    Avg HTTP time: %d usec (send %d usec + response wait %d usec + receive %d usec)\n", usec(r.Avg), usec(r.ClientSendUS), wait, usec(r.ClientRecvUS))
	case o.protocol == "grpc":
		fmt.Fprintf(w, "    Avg gRPC time: %d usec ((un)marshal request/response %d usec + response wait %d usec)\n", usec(r.Avg), sendRecv, wait)
	default:
		fmt.Fprintf(w, "    Avg HTTP time: %d usec (send/recv %d usec + response wait %d usec)\n", usec(r.Avg), sendRecv, wait)
	}
	if s := r.Server; s != nil {
		writeServer(w, s)
	}
	fmt.Fprintln(w)
}

// writeServer prints the "Server:" block as perf_analyzer's
// ReportServerSideStats does; like perf_analyzer it takes the overhead
// from whole microseconds.
func writeServer(w io.Writer, s *serverSplit) {
	fmt.Fprintf(w, "  Server: \n")
	writeServerStats(w, s, "  ")
}

// writeServerStats prints one model's server figures, indented by ident;
// an ensemble's composing models follow, indented further.
func writeServerStats(w io.Writer, s *serverSplit, ident string) {
	if s.Requests == 0 {
		fmt.Fprintf(w, "%s  Request count: 0\n", ident)
		return
	}
	fmt.Fprintf(w, "%s  Inference count: %d\n", ident, s.InferenceCount)
	fmt.Fprintf(w, "%s  Execution count: %d\n", ident, s.ExecutionCount)
	if s.ResponseCache {
		fmt.Fprintf(w, "%s  Cache hit count: %d\n", ident, s.CacheHits)
		fmt.Fprintf(w, "%s  Cache miss count: %d\n", ident, s.CacheMisses)
	}
	fmt.Fprintf(w, "%s  Successful request count: %d\n", ident, s.Requests)
	switch {
	case len(s.Composing) > 0:
		var queue, compute int64
		for _, c := range s.Composing {
			queue += usec(c.QueueUS)
			compute += usec(c.ComputeUS)
		}
		fmt.Fprintf(w, "%s  Avg request latency: %d usec (overhead %d usec + queue %d usec + compute %d usec)\n\n",
			ident, usec(s.RequestUS), max(usec(s.RequestUS)-queue-compute, 0), queue, compute)
		fmt.Fprintf(w, "%sComposing models: \n", ident)
		for _, c := range s.Composing {
			fmt.Fprintf(w, "%s%s, version: %s\n", ident, c.Model, c.Version)
			writeServerStats(w, &c.serverSplit, ident+"  ")
		}
	case s.ResponseCache:
		fmt.Fprintf(w, "%s  Avg request latency: %d usec (overhead %d usec + queue %d usec + cache hit/miss %d usec)\n",
			ident, usec(s.RequestUS), max(usec(s.RequestUS)-usec(s.QueueUS)-usec(s.ComputeUS), 0), usec(s.QueueUS), usec(s.ComputeUS))
		fmt.Fprintf(w, "%s%s  Average Cache Hit Latency: %d usec\n", ident, ident, usec(s.CacheHitUS))
		fmt.Fprintf(w, "%s%s  Average Cache Miss Latency: %d usec (cache lookup/insertion %d usec + compute input %d usec + compute infer %d usec + compute output %d usec)\n",
			ident, ident, usec(s.CacheMissUS)+usec(s.ComputeInput+s.ComputeInfer+s.ComputeOutput), usec(s.CacheMissUS), usec(s.ComputeInput), usec(s.ComputeInfer), usec(s.ComputeOutput))
	default:
		fmt.Fprintf(w, "%s  Avg request latency: %d usec (overhead %d usec + queue %d usec + compute input %d usec + compute infer %d usec + compute output %d usec)\n",
			ident, usec(s.RequestUS), max(usec(s.RequestUS)-usec(s.QueueUS)-usec(s.ComputeUS), 0), usec(s.QueueUS), usec(s.ComputeInput), usec(s.ComputeInfer), usec(s.ComputeOutput))
	}
}

// reported are the results perf_analyzer reports: stable and within
// --latency-threshold.
func reported(results []result) []result {
	var out []result
	for _, r := range results {
		if r.Stable && !r.OverLatencyThreshold {
			out = append(out, r)
		}
	}
	return out
}

// unstableMessage is perf_analyzer's complaint about a setting that did
// not settle.
func unstableMessage(o *options, r result) string {
	if len(o.rates) > 0 {
		return fmt.Sprintf("request rate %s: Failed to obtain stable measurement.", cppDouble(r.RequestRate))
	}
	flag := "--measurement-interval"
	if o.countWindows {
		flag = "--measurement-request-count"
	}
	return fmt.Sprintf("Failed to obtain stable measurement within %d measurement windows for concurrency %d. Please try to increase the %s.", o.maxTrials, r.Concurrency, flag)
}

// writeSummary prints perf_analyzer's closing lines, one per setting:
// "Concurrency: 1, throughput: 1409.9 infer/sec, latency 709 usec".
func writeSummary(w io.Writer, o *options, results []result) {
	if len(results) == 0 {
		return
	}
	if o.percentile == 0 {
		fmt.Fprintf(w, "Inferences/Second vs. Client Average Batch Latency\n")
	} else {
		fmt.Fprintf(w, "Inferences/Second vs. Client p%d Batch Latency\n", o.percentile)
	}
	for _, r := range results {
		if len(o.rates) > 0 {
			fmt.Fprintf(w, "Request Rate: %s, ", cppDouble(r.RequestRate))
		} else {
			fmt.Fprintf(w, "Concurrency: %d, ", r.Concurrency)
		}
		fmt.Fprintf(w, "throughput: %s infer/sec, ", cppDouble(r.Throughput))
		if o.serviceKind == "openai" {
			fmt.Fprintf(w, "%s texts/sec, ", cppDouble(r.TextsPerSec))
		}
		fmt.Fprintf(w, "latency %d usec\n", usec(r.StabilityLatency))
	}
}

func protocolName(o *options) string {
	switch {
	case o.protocol == "grpc" && o.streaming:
		return "gRPC (streaming)"
	case o.protocol == "grpc":
		return "gRPC"
	}
	return "HTTP"
}

func settingName(o *options) string {
	if len(o.rates) > 0 {
		return "Request Rate"
	}
	return "Concurrency"
}

func settingValue(r result) string {
	if r.RequestRate > 0 {
		return cppDouble(r.RequestRate)
	}
	return strconv.Itoa(r.Concurrency)
}

// us formats microseconds as a whole number, as perf_analyzer's CSV does.
func us(v float64) string { return strconv.FormatInt(int64(math.Round(v)), 10) }

// withServer tells whether every result has the server's split, as
// perf_analyzer's server columns need.
func withServer(results []result) bool {
	for _, r := range results {
		if r.Server == nil {
			return false
		}
	}
	return len(results) > 0
}

// csvHeader is perf_analyzer's column set and order
// (triton-inference-server/perf_analyzer src/report_writer.cc,
// GenerateReport); the server columns only when the server gave
// statistics, the verbose ones with --verbose-csv.
func csvHeader(o *options, server, cached bool) []string {
	h := []string{settingName(o), "Inferences/Second"}
	if o.serviceKind == "openai" {
		h = append(h, "Texts/Second")
	}
	h = append(h, "Client Send")
	if server {
		h = append(h, "Network+Server Send/Recv", "Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")
		if cached {
			h = append(h, "Server Cache Hit", "Server Cache Miss")
		}
	}
	h = append(h, "Client Recv")
	for _, p := range reportedPercentiles(o.percentile) {
		h = append(h, "p"+strconv.Itoa(p)+" latency")
	}
	if o.verboseCSV {
		if o.percentile == 0 {
			h = append(h, "Avg latency")
		}
		h = append(h, "request/response", "response wait")
	}
	return h
}

// writeCSV writes perf_analyzer's CSV: whole microseconds, rows in order
// of increasing throughput as perf_analyzer sorts them.
func writeCSV(w io.Writer, o *options, results []result) error {
	server := withServer(results)
	cached := server && slices.ContainsFunc(results, func(r result) bool { return r.Server.ResponseCache })
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader(o, server, cached)); err != nil {
		return err
	}
	rows := slices.Clone(results)
	slices.SortStableFunc(rows, func(a, b result) int { return cmp.Compare(a.Throughput, b.Throughput) })
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range rows {
		send, recv := usec(r.ClientSendUS), usec(r.ClientRecvUS)
		row := []string{settingValue(r), cppDouble(r.Throughput)}
		if o.serviceKind == "openai" {
			row = append(row, cppDouble(r.TextsPerSec))
		}
		row = append(row, itoa(send))
		if s := r.Server; server {
			// What the client waited for that the server does not account
			// for: the network and the server's own sending and receiving.
			wait := r.Avg - r.ClientSendUS - r.ClientRecvUS
			accounted := s.QueueUS + s.ComputeInput + s.ComputeInfer + s.ComputeOutput + s.CacheHitUS + s.CacheMissUS
			row = append(row, itoa(max(usec(wait-accounted), 0)), itoa(usec(s.QueueUS)), itoa(usec(s.ComputeInput)), itoa(usec(s.ComputeInfer)), itoa(usec(s.ComputeOutput)))
			if cached {
				row = append(row, itoa(usec(s.CacheHitUS)), itoa(usec(s.CacheMissUS)))
			}
		}
		row = append(row, itoa(recv))
		for _, p := range reportedPercentiles(o.percentile) {
			row = append(row, itoa(usec(r.Percentiles[p])))
		}
		if o.verboseCSV {
			if o.percentile == 0 {
				row = append(row, itoa(usec(r.Avg)))
			}
			row = append(row, itoa(send+recv), itoa(max(usec(r.Avg)-send-recv, 0)))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeComposingCSVs writes, for an ensemble, one CSV per composing model
// named NAME_vVERSION.FILE beside -f's, as perf_analyzer's report writer
// does: the model's share of the throughput (its requests over the
// ensemble's) and its server figures.
func writeComposingCSVs(o *options, results []result) error {
	if !withServer(results) || len(results[0].Server.Composing) == 0 {
		return nil
	}
	dir, base := filepath.Split(o.csvPath)
	for i, c := range results[0].Server.Composing {
		path := filepath.Join(dir, c.Model+"_v"+c.Version+"."+base)
		err := writeFile(path, func(w io.Writer) error {
			cw := csv.NewWriter(w)
			h := []string{settingName(o), "Inferences/Second", "Client Send", "Network+Server Send/Recv", "Server Queue",
				"Server Compute Input", "Server Compute Infer", "Server Compute Output"}
			if c.ResponseCache {
				h = append(h, "Server Cache Hit", "Server Cache Miss")
			}
			if err := cw.Write(append(h, "Client Recv")); err != nil {
				return err
			}
			itoa := func(v float64) string { return strconv.FormatInt(usec(v), 10) }
			for _, r := range results {
				if i >= len(r.Server.Composing) {
					continue
				}
				s := r.Server.Composing[i]
				ratio := 0.0
				if r.Server.Requests > 0 {
					ratio = float64(s.Requests) / float64(r.Server.Requests)
				}
				accounted := s.QueueUS + s.ComputeInput + s.ComputeInfer + s.ComputeOutput + s.CacheHitUS + s.CacheMissUS
				row := []string{settingValue(r), cppDouble(ratio * r.Throughput), "0", itoa(max(s.RequestUS-accounted, 0)),
					itoa(s.QueueUS), itoa(s.ComputeInput), itoa(s.ComputeInfer), itoa(s.ComputeOutput)}
				if c.ResponseCache {
					row = append(row, itoa(s.CacheHitUS), itoa(s.CacheMissUS))
				}
				if err := cw.Write(append(row, "0")); err != nil {
					return err
				}
			}
			cw.Flush()
			return cw.Error()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func newReport(o *options, results []result) report {
	rep := report{
		Model: o.model, Version: o.version, URL: o.baseURL, Protocol: o.protocol, Streaming: o.streaming, BatchSize: o.batch, Mode: "concurrency",
		Tensors: tensorsName(o), InputData: o.inputData, MeasurementInterval: o.interval.Milliseconds(),
		StabilityPercentage: o.stability * 100, MaxTrials: o.maxTrials, StabilityLatency: latencyName(o.percentile),
		Results: results,
	}
	if len(o.rates) > 0 {
		rep.Mode, rep.Distribution = "request_rate", o.distribution
	}
	if o.serviceKind == "openai" {
		rep.ServiceKind, rep.Endpoint, rep.TextsPerRequest = o.serviceKind, o.endpoint, o.textBatch
	}
	if rep.Results == nil {
		rep.Results = []result{}
	}
	return rep
}

// writeReports writes the -f CSV and --json files that were asked for.
func writeReports(o *options, results []result) error {
	if o.csvPath != "" {
		if err := writeFile(o.csvPath, func(w io.Writer) error { return writeCSV(w, o, reported(results)) }); err != nil {
			return fmt.Errorf("-f %s: %w", o.csvPath, err)
		}
		if err := writeComposingCSVs(o, reported(results)); err != nil {
			return fmt.Errorf("-f %s: %w", o.csvPath, err)
		}
	}
	if o.jsonPath != "" {
		err := writeFile(o.jsonPath, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(newReport(o, results))
		})
		if err != nil {
			return fmt.Errorf("--json %s: %w", o.jsonPath, err)
		}
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
