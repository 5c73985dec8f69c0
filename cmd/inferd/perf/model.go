package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// tensorMeta is one input or output of the model metadata.
type tensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// modelInfo is what the tool needs to know about the model.
type modelInfo struct {
	name     string
	inputs   []tensorMeta // shapes without the batch dimension
	outputs  []tensorMeta
	maxBatch int // 0: the model does not batch
	noConfig bool
}

// endpoints are the URLs of one model (version) on the server.
type endpoints struct {
	metadata, config, infer, stats string
}

func newEndpoints(base, model, version string) endpoints {
	p := base + "/v2/models/" + url.PathEscape(model)
	if version != "" {
		p += "/versions/" + version
	}
	return endpoints{metadata: p, config: p + "/config", infer: p + "/infer", stats: p + "/stats"}
}

// serverError is a non-2xx answer with the server's {"error": ...} text.
type serverError struct {
	status int
	msg    string
}

func (e *serverError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.msg)
}

// errorFromBody builds a serverError from a failed response body.
func errorFromBody(status int, body []byte) *serverError {
	var e struct {
		Error string `json:"error"`
	}
	msg := string(bytes.TrimSpace(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	return &serverError{status: status, msg: msg}
}

// getJSON fetches url into v; a non-200 answer becomes a *serverError.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return errorFromBody(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", url, err)
	}
	return nil
}

// flexInt reads a JSON integer that may also come as a string (protobuf
// JSON prints 64-bit integers as strings; Triton mostly does not).
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if string(b) == "null" || len(b) == 0 {
		*f = 0
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(string(b), 10, 64)
		if uerr != nil {
			return fmt.Errorf("not an integer: %s", b)
		}
		v = int64(u)
	}
	*f = flexInt(v)
	return nil
}

// fetchModel reads metadata and config. The metadata gives names, datatypes
// and dims; only the config says whether the model batches (the metadata's
// leading -1 could be a variable dim as well).
func fetchModel(ctx context.Context, hc *http.Client, ep endpoints, base, model string) (*modelInfo, error) {
	var meta struct {
		Name    string       `json:"name"`
		Inputs  []tensorMeta `json:"inputs"`
		Outputs []tensorMeta `json:"outputs"`
	}
	if err := getJSON(ctx, hc, ep.metadata, &meta); err != nil {
		var se *serverError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		return nil, fmt.Errorf("cannot reach the server at %s: %w", base, err)
	}
	if len(meta.Inputs) == 0 {
		return nil, fmt.Errorf("model %q: the metadata lists no inputs", model)
	}
	info := &modelInfo{name: model, inputs: meta.Inputs, outputs: meta.Outputs}
	var cfg struct {
		MaxBatchSize flexInt `json:"max_batch_size"`
	}
	if err := getJSON(ctx, hc, ep.config, &cfg); err != nil {
		var se *serverError
		if !errors.As(err, &se) {
			return nil, fmt.Errorf("model %q config: %w", model, err)
		}
		// Plain KServe v2 servers have no config extension: treat the
		// model as non-batching and send the metadata shapes as they are.
		info.noConfig = true
	}
	info.maxBatch = int(cfg.MaxBatchSize)
	if err := info.stripBatch(); err != nil {
		return nil, err
	}
	return info, nil
}

// stripBatch drops the batch dimension from the metadata shapes of a
// batching model.
func (info *modelInfo) stripBatch() error {
	if info.maxBatch <= 0 {
		return nil
	}
	for _, list := range [][]tensorMeta{info.inputs, info.outputs} {
		for i := range list {
			if len(list[i].Shape) == 0 {
				return fmt.Errorf("model %q: %s has no batch dimension although max_batch_size is %d", info.name, list[i].Name, info.maxBatch)
			}
			list[i].Shape = list[i].Shape[1:]
		}
	}
	return nil
}

// statsSnapshot is the cumulative statistics of the model, summed over the
// versions the server reports.
type statsSnapshot struct {
	successCount, inferenceCount, executionCount int64
	queueNS, inputNS, inferNS, outputNS          int64
}

type durationStat struct {
	Count flexInt `json:"count"`
	NS    flexInt `json:"ns"`
}

func fetchStats(ctx context.Context, hc *http.Client, url string) (statsSnapshot, error) {
	var body struct {
		ModelStats []struct {
			InferenceCount flexInt `json:"inference_count"`
			ExecutionCount flexInt `json:"execution_count"`
			InferenceStats struct {
				Success       durationStat `json:"success"`
				Queue         durationStat `json:"queue"`
				ComputeInput  durationStat `json:"compute_input"`
				ComputeInfer  durationStat `json:"compute_infer"`
				ComputeOutput durationStat `json:"compute_output"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if err := getJSON(ctx, hc, url, &body); err != nil {
		return statsSnapshot{}, fmt.Errorf("statistics: %w", err)
	}
	if len(body.ModelStats) == 0 {
		return statsSnapshot{}, errors.New("statistics: no model_stats entry")
	}
	var s statsSnapshot
	for _, m := range body.ModelStats {
		st := m.InferenceStats
		s.successCount += int64(st.Success.Count)
		s.inferenceCount += int64(m.InferenceCount)
		s.executionCount += int64(m.ExecutionCount)
		s.queueNS += int64(st.Queue.NS)
		s.inputNS += int64(st.ComputeInput.NS)
		s.inferNS += int64(st.ComputeInfer.NS)
		s.outputNS += int64(st.ComputeOutput.NS)
	}
	return s, nil
}

// serverSplit is the server-side view of one measurement: average
// microseconds per successful request in each phase.
type serverSplit struct {
	Requests      int64   `json:"requests"`
	QueueUS       float64 `json:"queue_us"`
	ComputeInput  float64 `json:"compute_input_us"`
	ComputeInfer  float64 `json:"compute_infer_us"`
	ComputeOutput float64 `json:"compute_output_us"`
	AvgBatchSize  float64 `json:"avg_batch_size"`
}

// split turns the difference of two snapshots into averages; nil when the
// counters went backwards (a model reload) or nothing succeeded.
func split(before, after statsSnapshot) *serverSplit {
	d := statsSnapshot{
		successCount:   after.successCount - before.successCount,
		inferenceCount: after.inferenceCount - before.inferenceCount,
		executionCount: after.executionCount - before.executionCount,
		queueNS:        after.queueNS - before.queueNS,
		inputNS:        after.inputNS - before.inputNS,
		inferNS:        after.inferNS - before.inferNS,
		outputNS:       after.outputNS - before.outputNS,
	}
	if d.successCount <= 0 || d.queueNS < 0 || d.inputNS < 0 || d.inferNS < 0 || d.outputNS < 0 || d.inferenceCount < 0 || d.executionCount < 0 {
		return nil
	}
	n := float64(d.successCount) * 1000 // ns → µs
	s := &serverSplit{
		Requests:      d.successCount,
		QueueUS:       float64(d.queueNS) / n,
		ComputeInput:  float64(d.inputNS) / n,
		ComputeInfer:  float64(d.inferNS) / n,
		ComputeOutput: float64(d.outputNS) / n,
	}
	if d.executionCount > 0 {
		s.AvgBatchSize = float64(d.inferenceCount) / float64(d.executionCount)
	}
	return s
}
