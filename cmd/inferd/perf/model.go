package perf

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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
	// responseCache is the config's response_cache.enable: perf_analyzer
	// then reports cache hits and misses.
	responseCache bool
	// composing are an ensemble's models, sorted, as perf_analyzer lists
	// them; their statistics are read beside the ensemble's.
	composing []modelRef
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
	msg := string(bytes.TrimSpace(body))
	if m := errorMessage(body); m != "" {
		msg = m
	}
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	return &serverError{status: status, msg: msg}
}

// errorMessage reads the message of an error body in KServe v2's and
// TEI's shape, {"error": "..."}, or OpenAI's, {"error": {"message": ...}}
// (openai/openai-python src/openai/_exceptions.py reads it there); "" when
// the body is neither.
func errorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return ""
	}
	var text string
	if json.Unmarshal(e.Error, &text) == nil {
		return text
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Error, &obj) == nil {
		return obj.Message
	}
	return ""
}

// getJSON fetches url into v; a non-200 answer becomes a *serverError.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	body, err := call(ctx, hc, http.MethodGet, url, nil, nil, 64<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", url, err)
	}
	return nil
}

// postJSON posts body to url; a non-200 answer becomes a *serverError.
func postJSON(ctx context.Context, hc *http.Client, url string, body []byte) error {
	_, err := call(ctx, hc, http.MethodPost, url, nil, body, 64<<10)
	return err
}

// call sends one request with the extra header (a POST's body is JSON) and
// returns up to limit bytes of a 200 answer's body; any other status
// becomes a *serverError.
func call(ctx context.Context, hc *http.Client, method, url string, header http.Header, body []byte, limit int64) ([]byte, error) {
	var rd io.Reader
	if method == http.MethodPost {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for name, values := range header {
		req.Header[name] = values
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorFromBody(resp.StatusCode, msg)
	}
	return msg, nil
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
		MaxBatchSize  flexInt `json:"max_batch_size"`
		ResponseCache struct {
			Enable bool `json:"enable"`
		} `json:"response_cache"`
		EnsembleScheduling struct {
			Step []struct {
				ModelName    string  `json:"model_name"`
				ModelVersion flexInt `json:"model_version"`
			} `json:"step"`
		} `json:"ensemble_scheduling"`
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
	info.responseCache = cfg.ResponseCache.Enable
	for _, st := range cfg.EnsembleScheduling.Step {
		info.addComposing(st.ModelName, int64(st.ModelVersion))
	}
	if err := info.stripBatch(); err != nil {
		return nil, err
	}
	return info, nil
}

// modelRef names one model version; version "" is the server's choice.
type modelRef struct {
	name, version string
}

// addComposing adds an ensemble step's model, once, in sorted order; a
// version below 1 is the server's choice.
func (info *modelInfo) addComposing(name string, version int64) {
	ref := modelRef{name: name}
	if version > 0 {
		ref.version = strconv.FormatInt(version, 10)
	}
	i, found := slices.BinarySearchFunc(info.composing, ref, func(a, b modelRef) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.version, b.version))
	})
	if !found {
		info.composing = slices.Insert(info.composing, i, ref)
	}
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
// versions the server reports: each phase's count and total time.
type statsSnapshot struct {
	name, version                                          string // the model and the version its statistics came from
	composing                                              []statsSnapshot
	successCount, inferenceCount, executionCount           int64
	successNS                                              int64
	queueCount, inputCount, inferCount, outputCount        int64
	queueNS, inputNS, inferNS, outputNS                    int64
	cacheHitCount, cacheHitNS, cacheMissCount, cacheMissNS int64
}

// sub gives s - o, field by field, composing models included when both
// have the same ones.
func (s statsSnapshot) sub(o statsSnapshot) statsSnapshot {
	d := s.subOwn(o)
	if len(s.composing) == len(o.composing) {
		for i := range s.composing {
			d.composing = append(d.composing, s.composing[i].sub(o.composing[i]))
		}
	}
	return d
}

func (s statsSnapshot) subOwn(o statsSnapshot) statsSnapshot {
	return statsSnapshot{
		name: s.name, version: s.version,
		successCount: s.successCount - o.successCount, inferenceCount: s.inferenceCount - o.inferenceCount,
		executionCount: s.executionCount - o.executionCount, successNS: s.successNS - o.successNS,
		queueCount: s.queueCount - o.queueCount, inputCount: s.inputCount - o.inputCount,
		inferCount: s.inferCount - o.inferCount, outputCount: s.outputCount - o.outputCount,
		queueNS: s.queueNS - o.queueNS, inputNS: s.inputNS - o.inputNS, inferNS: s.inferNS - o.inferNS, outputNS: s.outputNS - o.outputNS,
		cacheHitCount: s.cacheHitCount - o.cacheHitCount, cacheHitNS: s.cacheHitNS - o.cacheHitNS,
		cacheMissCount: s.cacheMissCount - o.cacheMissCount, cacheMissNS: s.cacheMissNS - o.cacheMissNS,
	}
}

// negative tells whether any counter went backwards (a model reload).
func (s statsSnapshot) negative() bool {
	for _, c := range s.composing {
		if c.negative() {
			return true
		}
	}
	for _, v := range []int64{s.successCount, s.inferenceCount, s.executionCount, s.successNS, s.queueCount, s.inputCount,
		s.inferCount, s.outputCount, s.queueNS, s.inputNS, s.inferNS, s.outputNS,
		s.cacheHitCount, s.cacheHitNS, s.cacheMissCount, s.cacheMissNS} {
		if v < 0 {
			return true
		}
	}
	return false
}

type durationStat struct {
	Count flexInt `json:"count"`
	NS    flexInt `json:"ns"`
}

func fetchStats(ctx context.Context, hc *http.Client, url string) (statsSnapshot, error) {
	var body struct {
		ModelStats []struct {
			Name           string  `json:"name"`
			Version        string  `json:"version"`
			InferenceCount flexInt `json:"inference_count"`
			ExecutionCount flexInt `json:"execution_count"`
			InferenceStats struct {
				Success       durationStat `json:"success"`
				Queue         durationStat `json:"queue"`
				ComputeInput  durationStat `json:"compute_input"`
				ComputeInfer  durationStat `json:"compute_infer"`
				ComputeOutput durationStat `json:"compute_output"`
				CacheHit      durationStat `json:"cache_hit"`
				CacheMiss     durationStat `json:"cache_miss"`
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
		s.name, s.version = m.Name, m.Version
		st := m.InferenceStats
		s.add(statsSnapshot{
			successCount: int64(st.Success.Count), successNS: int64(st.Success.NS),
			inferenceCount: int64(m.InferenceCount), executionCount: int64(m.ExecutionCount),
			queueCount: int64(st.Queue.Count), queueNS: int64(st.Queue.NS),
			inputCount: int64(st.ComputeInput.Count), inputNS: int64(st.ComputeInput.NS),
			inferCount: int64(st.ComputeInfer.Count), inferNS: int64(st.ComputeInfer.NS),
			outputCount: int64(st.ComputeOutput.Count), outputNS: int64(st.ComputeOutput.NS),
			cacheHitCount: int64(st.CacheHit.Count), cacheHitNS: int64(st.CacheHit.NS),
			cacheMissCount: int64(st.CacheMiss.Count), cacheMissNS: int64(st.CacheMiss.NS),
		})
	}
	return s, nil
}

// add sums o into s (one version's statistics into the model's).
func (s *statsSnapshot) add(o statsSnapshot) {
	var zero statsSnapshot
	*s = s.sub(zero.sub(o))
}

// serverSplit is the server-side view of one measurement, as perf_analyzer
// prints it under "Server:": counts, and average microseconds of a request
// in each phase, each over that phase's own count.
type serverSplit struct {
	Requests       int64 `json:"requests"`
	InferenceCount int64 `json:"inference_count"`
	ExecutionCount int64 `json:"execution_count"`
	// RequestUS is the server's average request latency; OverheadUS what
	// of it neither the queue nor ComputeUS account for. ComputeUS is the
	// compute phases' and the cache's time over the requests that computed
	// or hit (the compute phases alone without a cache).
	RequestUS     float64 `json:"request_us"`
	OverheadUS    float64 `json:"overhead_us"`
	ComputeUS     float64 `json:"compute_us"`
	QueueUS       float64 `json:"queue_us"`
	ComputeInput  float64 `json:"compute_input_us"`
	ComputeInfer  float64 `json:"compute_infer_us"`
	ComputeOutput float64 `json:"compute_output_us"`
	AvgBatchSize  float64 `json:"avg_batch_size"`
	// Composing are an ensemble's models' own figures.
	Composing []composingSplit `json:"composing,omitempty"`
	// ResponseCache says the model's config enables the response cache;
	// the cache figures are averages over their own counts.
	ResponseCache bool    `json:"response_cache,omitempty"`
	CacheHits     int64   `json:"cache_hits,omitempty"`
	CacheMisses   int64   `json:"cache_misses,omitempty"`
	CacheHitUS    float64 `json:"cache_hit_us,omitempty"`
	CacheMissUS   float64 `json:"cache_miss_us,omitempty"`
}

// composingSplit is one composing model's figures.
type composingSplit struct {
	Model   string `json:"model"`
	Version string `json:"version"`
	serverSplit
}

// split turns the difference of two snapshots into averages; nil when the
// counters went backwards (a model reload) or nothing succeeded. It follows
// triton-inference-server/perf_analyzer src/inference_profiler.cc,
// ReportServerSideStats.
func split(before, after statsSnapshot) *serverSplit {
	d := after.sub(before)
	if d.successCount <= 0 || d.negative() {
		return nil
	}
	avg := func(ns, n int64) float64 { // µs
		if n <= 0 {
			return 0
		}
		return float64(ns) / float64(n) / 1000
	}
	s := &serverSplit{
		Requests:       d.successCount,
		InferenceCount: d.inferenceCount,
		ExecutionCount: d.executionCount,
		RequestUS:      avg(d.successNS, d.successCount),
		QueueUS:        avg(d.queueNS, d.queueCount),
		ComputeInput:   avg(d.inputNS, d.inputCount),
		ComputeInfer:   avg(d.inferNS, d.inferCount),
		ComputeOutput:  avg(d.outputNS, d.outputCount),
	}
	s.CacheHits, s.CacheMisses = d.cacheHitCount, d.cacheMissCount
	s.CacheHitUS, s.CacheMissUS = avg(d.cacheHitNS, d.cacheHitCount), avg(d.cacheMissNS, d.cacheMissCount)
	s.ComputeUS = avg(d.inputNS+d.inferNS+d.outputNS+d.cacheHitNS+d.cacheMissNS, d.inputCount+d.cacheHitCount)
	s.OverheadUS = max(s.RequestUS-s.QueueUS-s.ComputeUS, 0)
	if d.executionCount > 0 {
		s.AvgBatchSize = float64(d.inferenceCount) / float64(d.executionCount)
	}
	for i := range d.composing {
		cs := composingSplit{Model: after.composing[i].name, Version: after.composing[i].version}
		if own := split(before.composing[i], after.composing[i]); own != nil {
			cs.serverSplit = *own
		}
		s.Composing = append(s.Composing, cs)
	}
	return s
}
