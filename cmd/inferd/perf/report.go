package perf

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"text/tabwriter"
)

// report is the --json output.
type report struct {
	Model               string   `json:"model"`
	Version             string   `json:"version,omitempty"`
	URL                 string   `json:"url"`
	Protocol            string   `json:"protocol"` // http or grpc
	Streaming           bool     `json:"streaming,omitempty"`
	BatchSize           int      `json:"batch_size"`
	Mode                string   `json:"mode"` // concurrency or request_rate
	Distribution        string   `json:"request_distribution,omitempty"`
	Tensors             string   `json:"tensors"` // binary or json
	InputData           string   `json:"input_data"`
	MeasurementInterval int64    `json:"measurement_interval_ms"`
	StabilityPercentage float64  `json:"stability_percentage"`
	MaxTrials           int      `json:"max_trials"`
	StabilityLatency    string   `json:"stability_latency"` // avg or pN
	Results             []result `json:"results"`
}

func tensorsName(o *options) string {
	if o.protocol == "grpc" {
		return "raw"
	}
	if o.binary {
		return "binary"
	}
	return "json"
}

func writeSettings(w io.Writer, o *options, info *modelInfo) {
	version := o.version
	if version == "" {
		version = "server's choice"
	}
	fmt.Fprintf(w, "*** Measurement Settings ***\n")
	fmt.Fprintf(w, "  Model: %s (version: %s) at %s\n", o.model, version, o.baseURL)
	fmt.Fprintf(w, "  Batch size: %d (model max_batch_size %d)\n", o.batch, info.maxBatch)
	fmt.Fprintf(w, "  Protocol: %s, %s tensors; input data: %s\n", protocolName(o), tensorsName(o), o.inputData)
	if len(o.rates) > 0 {
		fmt.Fprintf(w, "  Mode: request rate (%s schedule)\n", o.distribution)
	} else {
		fmt.Fprintf(w, "  Mode: concurrency (closed loop)\n")
	}
	fmt.Fprintf(w, "  Windows: %d ms, stable within %g%% over %d windows (%s latency), at most %d\n\n",
		o.interval.Milliseconds(), o.stability*100, stabilityWindows, latencyName(o.percentile), o.maxTrials)
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
		return strconv.FormatFloat(r.RequestRate, 'g', -1, 64)
	}
	return strconv.Itoa(r.Concurrency)
}

// us formats microseconds as a whole number, as perf_analyzer's CSV does.
func us(v float64) string { return strconv.FormatInt(int64(math.Round(v)), 10) }

// writeTable prints the human-readable summary.
func writeTable(w io.Writer, o *options, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rate := len(o.rates) > 0
	head := settingName(o) + "\tInfer/s\tp50 µs\tp90 µs\tp95 µs\tp99 µs\tAvg µs\tErrors\t"
	if rate {
		head += "Delayed\t"
	}
	head += "Queue µs\tCompute in µs\tCompute infer µs\tCompute out µs\tServer batch\tStable\t"
	fmt.Fprintln(tw, head)
	for _, r := range results {
		row := fmt.Sprintf("%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%d\t", settingValue(r), r.Throughput,
			us(r.P50), us(r.P90), us(r.P95), us(r.P99), us(r.Avg), r.Errors)
		if rate {
			row += strconv.Itoa(r.Delayed) + "\t"
		}
		if s := r.Server; s != nil {
			row += fmt.Sprintf("%s\t%s\t%s\t%s\t%.2f\t", us(s.QueueUS), us(s.ComputeInput), us(s.ComputeInfer), us(s.ComputeOutput), s.AvgBatchSize)
		} else {
			row += "n/a\tn/a\tn/a\tn/a\tn/a\t"
		}
		if r.Stable {
			row += "yes\t"
		} else {
			row += "no\t"
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

// csvHeader follows perf_analyzer's column names (client send/recv
// columns are left out: the tool cannot split the client side that finely).
func csvHeader(o *options) []string {
	h := []string{settingName(o), "Inferences/Second", "Server Queue", "Server Compute Input", "Server Compute Infer",
		"Server Compute Output", "p50 latency", "p90 latency", "p95 latency", "p99 latency", "Avg latency",
		"Errors", "Server Avg Batch Size", "Stable"}
	if len(o.rates) > 0 {
		h = append(h, "Delayed Requests")
	}
	return h
}

func writeCSV(w io.Writer, o *options, results []result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader(o)); err != nil {
		return err
	}
	for _, r := range results {
		row := []string{settingValue(r), strconv.FormatFloat(r.Throughput, 'f', 2, 64)}
		if s := r.Server; s != nil {
			row = append(row, us(s.QueueUS), us(s.ComputeInput), us(s.ComputeInfer), us(s.ComputeOutput))
		} else {
			row = append(row, "", "", "", "")
		}
		row = append(row, us(r.P50), us(r.P90), us(r.P95), us(r.P99), us(r.Avg), strconv.Itoa(r.Errors))
		if r.Server != nil {
			row = append(row, strconv.FormatFloat(r.Server.AvgBatchSize, 'f', 2, 64))
		} else {
			row = append(row, "")
		}
		row = append(row, strconv.FormatBool(r.Stable))
		if len(o.rates) > 0 {
			row = append(row, strconv.Itoa(r.Delayed))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
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
	if rep.Results == nil {
		rep.Results = []result{}
	}
	return rep
}

// writeReports writes the -f CSV and --json files that were asked for.
func writeReports(o *options, results []result) error {
	if o.csvPath != "" {
		if err := writeFile(o.csvPath, func(w io.Writer) error { return writeCSV(w, o, results) }); err != nil {
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
