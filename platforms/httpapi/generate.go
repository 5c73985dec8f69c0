package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/serve"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The generate extension (triton-inference-server/server
// docs/protocol/extension_generate.md): a flat JSON object in, one flat
// JSON object out per response: /generate expects exactly one, and
// /generate_stream sends each as an SSE event as the model produces it.

// generate is POST /v2/models/{m}[/versions/{v}]/generate. Like /infer's,
// its errors are rendered by the pipeline's Render step (see infer).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, name string, version int64) error {
	s.serveGenerate(w, r, name, version, false)
	return nil
}

// generateStream is POST /v2/models/{m}[/versions/{v}]/generate_stream.
func (s *Server) generateStream(w http.ResponseWriter, r *http.Request, name string, version int64) error {
	s.serveGenerate(w, r, name, version, true)
	return nil
}

// errGenerateEncoding refuses a compressed generate body: the extension
// reads identity bodies only.
var errGenerateEncoding = core.Errorf(core.CodeInvalidArg, "Unsupported content-encoding, only 'identity' is supported.")

// sseContentType is the Content-Type of /generate_stream once it streams.
const sseContentType = "text/event-stream; charset=utf-8"

func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request, name string, version int64, stream bool) {
	call := &infer.Call{Protocol: infer.HTTP, Route: r.URL.Path, Model: name, Version: version, Meta: header(r.Header)}
	decode := func(cfg *modelconfig.ModelConfig, _ *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		// The generate extension forwards no headers: Triton's
		// HandleGenerate does not (triton-inference-server/server
		// src/http_server.cc).
		switch r.Header.Get("Content-Encoding") {
		case "", "identity":
		default:
			return nil, nil, errGenerateEncoding
		}
		body, err := s.readJSONBody(r)
		if err != nil {
			return nil, nil, err
		}
		req, err := decodeGenerate(body, cfg, s.opts.MaxInputSize)
		return req, nil, err
	}
	// Neither form has the pipeline's load report: the generate routes
	// send Triton's KV-cache report with their first answer
	// (generateLoadReport).
	if stream {
		reply, send, dispatch := s.streamGenerate(w, r)
		s.pipe.Dispatch(r.Context(), call, decode, reply, send, dispatch)
		return
	}
	// /generate: the first response decides the status; a model that
	// does not answer with exactly one gets Triton's error object
	// (GenerateRequestClass in triton-inference-server/server
	// src/http_server.cc).
	var first *core.InferResponse
	n := 0
	s.pipe.Run(r.Context(), call, decode, infer.Reply{Shape: infer.Streamed,
		Render: func(_ *core.InferResponse, err error) {
			// A call that did not start has no response either.
			if err == nil || n > 0 {
				err = s.writeGenerate(w, r, first, n, err)
			}
			if err != nil {
				RenderError(w, err)
			}
		},
	}, func(resp *core.InferResponse, _ bool) error {
		if resp != nil {
			if n == 0 {
				first = resp
			}
			n++
		}
		return nil
	})
}

// writeGenerate writes /generate's one object: first, the first of the
// run's n responses, when it was the only one and the run succeeded
// (err nil), Triton's error object otherwise. It returns the error that
// keeps the response from being rendered (nothing written then).
func (s *Server) writeGenerate(w http.ResponseWriter, r *http.Request, first *core.InferResponse, n int, err error) error {
	var obj []byte
	switch {
	case n != 1 || err != nil:
		obj = []byte(`{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}`)
	default:
		if obj, err = appendGenerateResponse(make([]byte, 0, 256), first); err != nil {
			return err
		}
	}
	// Triton sends the one object chunked; flushing after the write gives
	// the same framing.
	s.generateLoadReport(w, r)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(obj)
	_ = http.NewResponseController(w).Flush()
	return nil
}

// streamGenerate is /generate_stream's reply: one SSE event per
// response, sent as it is produced. Errors found before the request runs
// are ordinary JSON replies; the first event sets the status (an error's
// own status when the first response is one), and later errors are error
// events. A final flag alone sends nothing.
//
// The model's sends never wait for the client: they go to the stream's
// bounded queue (streamQueue), which the handler's goroutine writes out
// while the model runs on another (the pipeline's Dispatch), each write
// bounded by streamWriteTimeout. A client that falls too far behind or
// stops reading ends the stream: its request is cancelled and the model's
// further sends fail, so one client can never hold back a Python worker's
// reader or a model instance.
func (s *Server) streamGenerate(w http.ResponseWriter, r *http.Request) (infer.Reply, infer.Send, func(*infer.Inference, func(context.Context))) {
	var (
		q    *streamQueue
		done = make(chan error, 1) // the run's end
		// written is closed once the events are written; the call ends
		// after it.
		written = make(chan struct{})
	)
	reply := infer.Reply{Shape: infer.Streamed, Render: func(_ *core.InferResponse, err error) {
		if q == nil { // the call did not start
			RenderError(w, err)
			return
		}
		done <- err
		<-written
	}}
	send := func(resp *core.InferResponse, _ bool) error {
		if resp == nil {
			return nil
		}
		obj, err := appendGenerateResponse(make([]byte, 0, 256), resp)
		if err != nil {
			// A response that fails to convert is an error event.
			return q.put(errorEvent(err))
		}
		return q.put(streamEvent{obj: obj, status: http.StatusOK})
	}
	dispatch := func(in *infer.Inference, run func(ctx context.Context)) {
		rc := http.NewResponseController(w)
		ctx, cancel := context.WithCancelCause(r.Context())
		q = newStreamQueue(func(t time.Time) { _ = rc.SetWriteDeadline(t) }, cancel)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			run(ctx)
		}()
		s.writeStream(w, r, in, rc, q, cancel, done, written)
		<-ended
	}
	return reply, send, dispatch
}

// writeStream writes q's events until the run ends (done) and then the
// stream's end, on the handler's goroutine; it closes written once it has
// finished with the connection.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, in *infer.Inference, rc *http.ResponseController,
	q *streamQueue, cancel context.CancelCauseFunc, done <-chan error, written chan<- struct{}) {
	defer close(written)
	defer cancel(nil)
	// The connection is the queue's until the request has ended.
	defer q.Close()
	defer func() {
		if errors.Is(q.Err(), serve.ErrClientBehind) {
			s.log.Warn("ended a /generate_stream whose client is not reading", "model", in.Request.ModelName, "remote", r.RemoteAddr)
		}
	}()

	started := false
	buf := make([]byte, 0, 256)
	write := func(ev streamEvent) error {
		if err := q.arm(); err != nil {
			return err
		}
		if !started {
			s.generateLoadReport(w, r)
			w.Header().Set("Content-Type", sseContentType)
			w.WriteHeader(ev.status)
			started = true
		}
		buf = append(append(append(buf[:0], "data: "...), ev.obj...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	}
	// writeAll writes events until one fails; then the stream fails: the
	// request ends, and nothing more is written.
	writeAll := func(events []streamEvent) bool {
		for _, ev := range events {
			if err := write(ev); err != nil {
				q.Fail(fmt.Errorf("writing the stream: %w", err))
				return false
			}
		}
		return true
	}
	var err error
	for running := true; running; {
		events := q.Take()
		if !writeAll(events) {
			<-done
			return
		}
		if len(events) > 0 {
			continue
		}
		select {
		case <-q.Wake():
		case err = <-done:
			// The last events may have come in meanwhile.
			if !writeAll(q.Take()) {
				return
			}
			running = false
		}
	}
	if q.Err() != nil {
		return
	}
	switch {
	case err != nil && !started && core.Rejected(err):
		RenderError(w, err)
	case err != nil:
		_ = write(errorEvent(err))
	case !started:
		w.Header().Set("Content-Type", sseContentType)
		w.WriteHeader(http.StatusOK)
	}
	// A kept-alive connection's next request must not meet the deadline.
	_ = rc.SetWriteDeadline(time.Time{})
}

// errorEvent is the event of an error: its message, with its status when
// it is the stream's first.
func errorEvent(err error) streamEvent {
	obj := tritonjson.AppendString([]byte(`{"error":`), err.Error())
	return streamEvent{obj: append(obj, '}'), status: errorStatus(err)}
}

// generateLoadReport sets Triton's KV-cache load report on a generate reply when
// asked (triton-inference-server/server src/orca_http.cc), with the status
// line, as Triton computes it
// when the first response is ready.
func (s *Server) generateLoadReport(w http.ResponseWriter, r *http.Request) {
	if s.opts.LoadReports != nil {
		s.opts.LoadReports.SetGenerateHeaders(w.Header(), r.Header)
	}
}

// decodeGenerate converts a generate request body for a model with
// configuration cfg. Top-level members are processed in document order:
// "id" is the request ID (and a string parameter), "parameters" an object
// of request parameters, a model input's name an input tensor (a scalar or
// a flat array shaped from the config), anything else a request parameter.
// maxInputSize bounds the cumulative decoded input bytes.
func decodeGenerate(body []byte, cfg *modelconfig.ModelConfig, maxInputSize int64) (*core.InferRequest, error) {
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return nil, err
	}
	root := doc.Root()
	if !root.IsObject() {
		return nil, core.Errorf(core.CodeInternal, "%s", tritonjson.MsgNonObject)
	}
	inputs := make(map[string]*modelconfig.ModelInput, len(cfg.GetInput()))
	for _, in := range cfg.GetInput() {
		inputs[in.GetName()] = in
	}
	batching := cfg.GetMaxBatchSize() > 0
	req := &core.InferRequest{ModelVersion: core.LatestVersion, Parameters: map[string]any{}}
	params := protocol.ParamReader{Rules: protocol.GenerateRules, Request: req}
	var total int64
	for k, v := range root.Members() {
		key := string(k)
		switch in := inputs[key]; {
		case key == "id":
			id, err := v.Str()
			if err != nil {
				return nil, err
			}
			req.ID = id
			req.Parameters["id"] = id
		case key == "parameters":
			if in != nil {
				return nil, core.Errorf(core.CodeInvalidArg, "Keyword 'parameters' for nested schema also given as input tensor name")
			}
			if !v.IsObject() {
				return nil, core.Errorf(core.CodeInternal, "Expected JSON object for keyword: 'parameters': %s", tritonjson.MsgNonObject)
			}
			for pk, pv := range v.Members() {
				if err := params.Read(string(pk), codec.JSONParam(pv)); err != nil {
					return nil, &core.Error{Code: core.CodeOf(err), Msg: "Converting keyword: 'parameters': " + err.Error()}
				}
			}
		case in != nil:
			for _, t := range req.Inputs {
				if t.Name == key {
					return nil, core.Errorf(core.CodeInvalidArg, "input '%s' already exists in request", key)
				}
			}
			t, err := generateInput(in, batching, v, &total, maxInputSize)
			if err != nil {
				return nil, err
			}
			req.Inputs = append(req.Inputs, t)
		default:
			if err := params.Read(key, codec.JSONParam(v)); err != nil {
				return nil, err
			}
		}
	}
	return req, nil
}

// generateInput converts the value of input in's member into a tensor with
// the config datatype and a shape filled from the config (the batch
// dimension included), adding its size to *total.
func generateInput(in *modelconfig.ModelInput, batching bool, v tritonjson.Value, total *int64, maxInputSize int64) (*core.Tensor, error) {
	name := in.GetName()
	dt := core.DataType(in.GetDataType())
	count := int64(1)
	if v.IsArray() {
		count = int64(v.Len())
	}
	shape, ok := generateShape(in.GetDims(), batching, count)
	if !ok {
		return nil, core.Errorf(core.CodeInvalidArg, "The schema can not convert input '%s' to tensor with proper shape", name)
	}
	check := func(size int64) error {
		if maxInputSize > 0 && size > maxInputSize-*total {
			return core.Errorf(core.CodeInvalidArg, "request size of %d bytes with input '%s' of size %d bytes exceeds the maximum allowed input size of %d. Use --http-max-input-size to increase the limit.", *total, name, size, maxInputSize)
		}
		*total += size
		return nil
	}
	// Fixed-size data is checked before it is decoded; BYTES once its size
	// is known.
	if es := int64(dt.ByteSize()); es > 0 {
		size := int64(math.MaxInt64)
		if count <= math.MaxInt64/es {
			size = count * es
		}
		if err := check(size); err != nil {
			return nil, err
		}
	}
	data, _, err := codec.GenerateTensorData(name, dt, v)
	if err != nil {
		return nil, err
	}
	if dt == core.TypeBytes {
		if err := check(int64(len(data))); err != nil {
			return nil, err
		}
	}
	return &core.Tensor{Name: name, DataType: dt, Shape: shape, Data: data}, nil
}

// generateShape fills the input shape (config dims, with the batch
// dimension -1 first for a batching model) for e elements: the fixed dims
// must divide e, the innermost -1 takes the quotient and every other -1
// is 1. ok is false when e cannot fill the shape.
func generateShape(dims []int64, batching bool, e int64) (shape []int64, ok bool) {
	shape = make([]int64, 0, len(dims)+1)
	if batching {
		shape = append(shape, -1)
	}
	shape = append(shape, dims...)
	fixed, last := int64(1), -1
	for i, d := range shape {
		switch {
		case d < 0:
			last = i
		case d > 0 && fixed > math.MaxInt64/d:
			return nil, false
		default:
			fixed *= d
		}
	}
	rest := int64(1)
	switch {
	case fixed == 0:
		if e != 0 {
			return nil, false
		}
	case e%fixed != 0:
		return nil, false
	default:
		rest = e / fixed
	}
	if last < 0 && rest != 1 {
		return nil, false
	}
	for i, d := range shape {
		if d < 0 {
			shape[i] = 1
			if i == last {
				shape[i] = rest
			}
		}
	}
	return shape, true
}

// appendGenerateResponse writes a response as the generate object:
// id (when set), model_name, model_version, every response parameter and
// every output, keys in byte-wise order; a 1-element output is a scalar.
func appendGenerateResponse(b []byte, resp *core.InferResponse) ([]byte, error) {
	type member struct {
		key   string
		str   string       // id, model_name, model_version
		param any          // a response parameter when isPar
		out   *core.Tensor // an output
		isPar bool
	}
	members := make([]member, 0, 3+len(resp.Parameters)+len(resp.Outputs))
	if resp.ID != "" {
		members = append(members, member{key: "id", str: resp.ID})
	}
	members = append(members,
		member{key: "model_name", str: resp.ModelName},
		member{key: "model_version", str: strconv.FormatInt(resp.ModelVersion, 10)})
	for k, v := range resp.Parameters {
		members = append(members, member{key: k, param: v, isPar: true})
	}
	for _, t := range resp.Outputs {
		members = append(members, member{key: t.Name, out: t})
	}
	slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = tritonjson.AppendString(b, m.key)
		b = append(b, ':')
		var err error
		switch {
		case m.out != nil:
			b, err = codec.AppendGenerateValue(b, m.out)
		case m.isPar:
			b, err = codec.AppendParameterValue(b, m.key, m.param)
		default:
			b = tritonjson.AppendString(b, m.str)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
