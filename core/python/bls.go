package python

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
)

// blsCalls holds the cancel functions of in-flight BLS calls, by worker
// and seq, for bls_cancel: a restarted worker numbers its calls from 1
// again, so a seq alone, or with the instance's name, could name a call
// of the dead worker.
var blsCalls sync.Map // blsKey -> context.CancelFunc

type blsKey struct {
	w   *worker
	seq int64
}

// onBLS runs a model's BLS request (triton-inference-server/python_backend
// README.md, "Business Logic Scripting") through this
// server's core, like a client request, and answers with bls_response
// messages: one, final, for exec(); each response and then a final one
// for exec(decoupled=True). Failures are error responses, never a failed
// call.
func (in *instance) onBLS(w *worker, f frameIn) {
	var m struct {
		Seq           int64           `json:"seq"`
		ModelName     string          `json:"model_name"`
		ModelVersion  int64           `json:"model_version"`
		RequestID     string          `json:"request_id"`
		CorrelationID json.RawMessage `json:"correlation_id"`
		Flags         uint32          `json:"flags"`
		TimeoutUs     uint64          `json:"timeout_us"`
		Parameters    string          `json:"parameters"`
		Requested     []string        `json:"requested_outputs"`
		Inputs        []tensorDesc    `json:"inputs"`
		Decoupled     bool            `json:"decoupled"`
		TraceRID      int64           `json:"trace_rid"` // the request whose trace() was passed, 0: none
	}
	answer := func(resp *core.InferResponse, err error, final bool) {
		header := map[string]any{"op": "bls_response", "seq": m.Seq, "final": final}
		out := &frameOut{}
		switch {
		case err != nil:
			header["response"] = map[string]any{"error": blsError(m.ModelName, err)}
		case resp != nil:
			header["response"] = wireOf(resp, out)
		}
		_ = w.send(header, out)
	}
	if err := decode(f, &m); err != nil {
		answer(nil, err, true)
		return
	}
	req, err := blsRequest(m.ModelName, m.ModelVersion, m.RequestID, m.CorrelationID, m.Flags, m.Parameters, m.Requested, m.Inputs, f)
	if err != nil {
		answer(nil, err, true)
		return
	}
	notReady := core.Errorf(core.CodeInternal, "Model %s - Error when running inference: Failed for execute the inference request. Model '%s' is not ready.", m.ModelName, m.ModelName)
	if in.server == nil {
		answer(nil, notReady, true)
		return
	}
	mv, release, err := in.server.Acquire(req.ModelName, req.ModelVersion)
	if err != nil {
		answer(nil, notReady, true)
		return
	}
	defer release()
	req.Trace = core.ChildTrace(in.parentTrace(m.TraceRID))
	if mv.Config.GetModelTransactionPolicy().GetDecoupled() && !m.Decoupled {
		answer(nil, core.Errorf(core.CodeInternal, "Model %s - Error when running inference: Model %s is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'", m.ModelName, m.ModelName), true)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if m.TimeoutUs > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(m.TimeoutUs)*time.Microsecond)
	}
	key := blsKey{w, m.Seq}
	blsCalls.Store(key, cancel)
	defer func() {
		blsCalls.Delete(key)
		cancel()
	}()
	// A call whose worker dies has nobody to answer: it ends with it.
	go func() {
		select {
		case <-w.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	if !m.Decoupled {
		resp, err := mv.Infer(ctx, req)
		answer(resp, err, true)
		return
	}
	err = mv.InferStream(ctx, req, func(resp *core.InferResponse, final bool) error {
		if resp != nil {
			answer(resp, nil, false)
		}
		return nil
	})
	answer(nil, err, true)
}

// blsError is the error a BLS call answers with, as Triton's
// triton-inference-server/python_backend src/request_executor.cc gives it:
// a request the server refused before it ran (its validation, a sequence
// without START) as INTERNAL, prefixed with the model's name as
// RequestExecutor::Infer words a failed TRITONSERVER_ServerInferAsync; an
// error of its execution with that error's own code.
func blsError(model string, err error) map[string]any {
	if core.Rejected(err) {
		return map[string]any{"code": int(core.CodeInternal), "message": fmt.Sprintf("Model %s - Error when running inference: %s", model, err.Error())}
	}
	return map[string]any{"code": int(core.CodeOf(err)), "message": err.Error()}
}

// parentTrace is the trace a BLS call joins as a child: that of the
// request whose trace() the model passed to its InferenceRequest (rid 0:
// none, as Triton, which traces BLS children only when asked), nil when
// that request is not traced. The lookup runs only for a call that names
// a request, so untraced BLS calls take no lock for it.
func (in *instance) parentTrace(rid int64) core.Trace {
	if !core.TracingBuilt || rid == 0 {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if o := in.open[rid]; o != nil {
		return o.r.Trace()
	}
	return nil
}

// onBLSCancel cancels a decoupled BLS call (ResponseIterator.cancel).
func (in *instance) onBLSCancel(w *worker, f frameIn) {
	var m struct {
		Seq int64 `json:"seq"`
	}
	if decode(f, &m) != nil {
		return
	}
	if c, ok := blsCalls.Load(blsKey{w, m.Seq}); ok {
		c.(context.CancelFunc)()
	}
}

// blsRequest builds the core request of a BLS call; its tensors share the
// frame's bytes.
func blsRequest(model string, version int64, id string, corr json.RawMessage, flags uint32, params string, requested []string, inputs []tensorDesc, f frameIn) (*core.InferRequest, error) {
	req := &core.InferRequest{ID: id, ModelName: model, ModelVersion: version}
	if version <= 0 {
		req.ModelVersion = core.LatestVersion
	}
	c, err := blsCorrelation(corr)
	if err != nil {
		return nil, err
	}
	req.Correlation = c
	req.Correlation.Flags = flags
	if params != "" && params != "{}" {
		p, err := responseParameters(params)
		if err != nil {
			return nil, fmt.Errorf("BLS request parameters: %w", err)
		}
		req.Parameters = p
	}
	for _, name := range requested {
		req.Outputs = append(req.Outputs, core.RequestedOutput{Name: name})
	}
	for _, d := range inputs {
		t, err := f.tensor(d)
		if err != nil {
			return nil, fmt.Errorf("BLS request: %w", err)
		}
		req.Inputs = append(req.Inputs, t)
	}
	return req, nil
}

// blsCorrelation reads a BLS call's correlation id: a JSON string, or an
// integer read exactly as a uint64 (a float64 would change ids above 2^53).
func blsCorrelation(raw json.RawMessage) (core.Correlation, error) {
	text := strings.TrimSpace(string(raw))
	switch {
	case text == "" || text == "null":
		return core.Correlation{}, nil
	case text[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return core.Correlation{}, fmt.Errorf("BLS request correlation id: %w", err)
		}
		return core.Correlation{StringID: s, IsString: true}, nil
	}
	id, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return core.Correlation{}, fmt.Errorf("BLS request correlation id %s is neither a string nor an unsigned 64-bit integer", text)
	}
	return core.Correlation{ID: id}, nil
}

// onModelControl serves pb_utils.load_model, unload_model and
// is_model_ready: the repository API's semantics, explicit mode only.
func (in *instance) onModelControl(w *worker, f frameIn) {
	var m struct {
		Seq              int64             `json:"seq"`
		Action           string            `json:"action"`
		ModelName        string            `json:"model_name"`
		Config           string            `json:"config"`
		Files            map[string]string `json:"files"`
		UnloadDependents bool              `json:"unload_dependents"`
		ModelVersion     string            `json:"model_version"`
	}
	reply := map[string]any{"op": "reply"}
	err := decode(f, &m)
	reply["seq"] = m.Seq
	switch {
	case err != nil:
	case in.server == nil:
		err = fmt.Errorf("model control is not available")
	case m.Action == "is_ready":
		v := core.LatestVersion
		if m.ModelVersion != "" {
			n, perr := strconv.ParseInt(m.ModelVersion, 10, 64)
			if perr != nil {
				err = fmt.Errorf("invalid model version '%s'", m.ModelVersion)
				break
			}
			v = n
		}
		reply["value"] = in.server.ModelReady(m.ModelName, v)
	case in.server.ControlMode() != core.ModeExplicit:
		err = fmt.Errorf("explicit model load / unload is not allowed if polling is enabled")
	case m.Action == "load":
		var ov *core.LoadOverride
		if m.Config != "" || len(m.Files) > 0 {
			ov = &core.LoadOverride{ConfigJSON: m.Config, Files: map[string][]byte{}}
			for k, v := range m.Files {
				data, derr := base64.StdEncoding.DecodeString(v)
				if derr != nil {
					err = fmt.Errorf("file '%s': %v", k, derr)
					break
				}
				ov.Files[strings.TrimPrefix(k, "file:")] = data
			}
		}
		if err == nil {
			err = in.server.Load(context.Background(), m.ModelName, ov)
		}
	case m.Action == "unload":
		// Without waiting for the unload, as Triton: the caller's own
		// request may be one the unload waits for.
		err = in.server.BeginUnload(context.Background(), m.ModelName, m.UnloadDependents)
	default:
		err = fmt.Errorf("unknown model control action '%s'", m.Action)
	}
	if err != nil {
		reply["error"] = strings.TrimSpace(err.Error())
	}
	_ = w.send(reply, nil)
}

// wireOf describes a response for the worker, its tensors as blobs.
func wireOf(resp *core.InferResponse, out *frameOut) map[string]any {
	outputs := make([]tensorDesc, len(resp.Outputs))
	for i, t := range resp.Outputs {
		outputs[i] = out.add(t)
	}
	params := "{}"
	if len(resp.Parameters) > 0 {
		if b, err := json.Marshal(resp.Parameters); err == nil {
			params = string(b)
		}
	}
	return map[string]any{"outputs": outputs, "parameters": params}
}
