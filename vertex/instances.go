package vertex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// instancesRequest is a parsed Vertex {"instances": [...], "parameters":
// {...}} body; its values refer to the body's bytes.
type instancesRequest struct {
	instances tritonjson.Value
	params    tritonjson.Value // the zero Value when absent
}

// parseInstances reports whether body is a Vertex {"instances": ...}
// request: a JSON object with an "instances" member and no "inputs" (a v2
// body). The substring test keeps v2 bodies from being parsed twice; a body
// that does not parse goes to the base route, which reports the error.
func parseInstances(body []byte) (*instancesRequest, bool) {
	if !bytes.Contains(body, []byte(`"instances"`)) {
		return nil, false
	}
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return nil, false
	}
	root := doc.Root()
	instances, ok := root.Find("instances")
	if !ok || root.Has("inputs") {
		return nil, false
	}
	params, _ := root.Find("parameters")
	return &instancesRequest{instances: instances, params: params}, true
}

// predictInstances serves an "instances" request on model through the
// inference pipeline (platforms/infer) as the base route path would serve
// its v2 equivalent, and renders the outputs as "predictions".
func (h *Handler) predictInstances(w http.ResponseWriter, r *http.Request, model, path string, q *instancesRequest) {
	if h.api.Restricted(w, r, "inference") {
		return
	}
	pipe := h.api.Pipeline()
	if pipe.Logs.Verbose() > 0 {
		// The base route's request line (httpapi.LogRequests), as when the
		// translation ran through it.
		pipe.Logs.LogHTTP(r.Context(), pipe.Log, http.MethodPost, (&url.URL{Path: path}).EscapedPath())
	}
	var batching bool
	pipe.Run(r.Context(), &infer.Call{
		Protocol: infer.HTTP, Route: path, Model: model, Version: core.LatestVersion,
		Decoupled: httpapi.ErrDecoupled, Meta: header(r.Header),
	}, func(cfg *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		batching = cfg.GetMaxBatchSize() > 0
		release := h.api.Work() // --http-thread-count bounds decoding, as on /infer
		req, err := q.decode(r.Context(), model, cfg, h.api.MaxInputSize())
		release()
		if err == nil && fh != nil {
			err = fh.Apply(req) // after the body, as the base route does
		}
		return req, nil, err
	}, infer.Reply{Report: h.api.InferLoadReport(w, r), Render: func(resp *core.InferResponse, err error) {
		if err != nil {
			writeError(w, err)
			return
		}
		h.writePredictions(w, resp, q.instances.Len(), batching)
	}}, nil)
}

// writePredictions renders and writes resp's predictions in a worker slot,
// as /infer writes its response.
func (h *Handler) writePredictions(w http.ResponseWriter, resp *core.InferResponse, n int, batching bool) {
	release := h.api.Work()
	defer release()
	out, err := appendPredictions(make([]byte, 0, 256), resp.Outputs, n, batching)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// writeError answers err with {"error": ...}: a badRequest with 400, any
// other error with its class's status, as the base route does.
func writeError(w http.ResponseWriter, err error) {
	status := protocol.HTTPStatus(protocol.ClassOf(err))
	if errors.As(err, new(badRequest)) {
		status = http.StatusBadRequest
	}
	httpapi.WriteError(w, status, err.Error())
}

// header is the predict request's headers as the pipeline reads them.
type header http.Header

func (h header) Carrier(context.Context) propagation.TextMapCarrier {
	return propagation.HeaderCarrier(h)
}

// Headers are those forwarded to the model (--http-header-forward-pattern):
// without the encodings and the JSON header length, which the Vertex
// listener takes for itself (rewrite).
func (h header) Headers(context.Context) map[string][]string {
	fwd := http.Header(h).Clone()
	for _, k := range [...]string{"Content-Encoding", "Accept-Encoding", codec.HeaderLengthName} {
		fwd.Del(k)
	}
	return fwd
}

// decode builds the core request for q's instances against the model's
// configuration cfg: one tensor per input, whose data is the instances'
// rows in order (see the package documentation), and q's parameters but
// binary_data_output. Mapping errors are 400; the parameters and the
// tensor data fail as a v2 request's would. maxInput is
// --http-max-input-size. Decoding gives up once ctx is done (the client
// went away).
func (q *instancesRequest) decode(ctx context.Context, model string, cfg *modelconfig.ModelConfig, maxInput int64) (*core.InferRequest, error) {
	n := q.instances.Len()
	if !q.instances.IsArray() || n == 0 {
		return nil, badRequest("'instances' must be a non-empty JSON array")
	}
	inputs := cfg.GetInput()
	if len(inputs) == 0 {
		return nil, badRequest(fmt.Sprintf("model '%s' has no inputs to map 'instances' to", model))
	}
	batching := cfg.GetMaxBatchSize() > 0
	if !batching && n != 1 {
		return nil, badRequest(fmt.Sprintf("model '%s' does not support batching (max_batch_size 0): send exactly one instance, got %d", model, n))
	}
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = in.GetName()
	}
	rows, err := instanceRows(ctx, model, names, q.instances, n)
	if err != nil {
		return nil, err
	}

	// Every mapping error comes before the parameters and the data are
	// read, as when a v2 body was built first.
	shapes := make([][]int64, len(inputs))
	tensors := 0
	for i, in := range inputs {
		if len(rows[i]) == 0 {
			if in.GetOptional() {
				continue
			}
			return nil, badRequest(fmt.Sprintf("instances lack input '%s' of model '%s' (inputs: %s)", in.GetName(), model, strings.Join(names, ", ")))
		}
		shape, err := rowShape(in, rows[i])
		if err != nil {
			return nil, err
		}
		if err := checkCounts(in.GetName(), shape, rows[i]); err != nil {
			return nil, err
		}
		shapes[i] = shape
		tensors++
	}
	if q.params.Exists() && !q.params.IsNull() && !q.params.IsObject() {
		return nil, badRequest("'parameters' must be a JSON object")
	}

	req := &core.InferRequest{}
	if err := readParams(ctx, req, q.params); err != nil {
		return nil, err
	}
	ts := make([]core.Tensor, 0, tensors)
	req.Inputs = make([]*core.Tensor, 0, tensors)
	for i, in := range inputs {
		if len(rows[i]) == 0 {
			continue
		}
		shape := shapes[i]
		if batching {
			shape = append([]int64{int64(n)}, shape...)
		}
		dt := core.DataType(in.GetDataType())
		data, err := tensorData(in.GetName(), dt, core.ElementCount(shape), rows[i], maxInput)
		if err != nil {
			return nil, err
		}
		ts = append(ts, core.Tensor{Name: in.GetName(), DataType: dt, Shape: shape, Data: data})
		req.Inputs = append(req.Inputs, &ts[len(ts)-1])
	}
	return req, nil
}

// readParams applies the request's "parameters" (an object, or absent or
// null) to req by the HTTP infer rules (protocol.ParamReader), member by member
// in document order, but binary_data_output: the predictions are always
// JSON.
func readParams(ctx context.Context, req *core.InferRequest, params tritonjson.Value) error {
	pr := protocol.ParamReader{Rules: protocol.HTTPRules, Request: req}
	// Each name is looked up again, as a v2 body's (platforms/codec): an
	// index keeps that linear in a client's member count.
	index := params.IndexMembers()
	if n := index.Names(); n > presizeParams {
		// Sized at once for a large object, as a v2 body's
		// (platforms/codec); nil again when no member was a model
		// parameter.
		req.Parameters = make(map[string]any, n)
		defer func() {
			if len(req.Parameters) == 0 {
				req.Parameters = nil
			}
		}()
	}
	step := 0
	for key := range params.Members() {
		if err := alive(ctx, step); err != nil {
			return err
		}
		step++
		// A name is read as a C string, as a v2 body's (platforms/codec).
		if i := bytes.IndexByte(key, 0); i >= 0 {
			key = key[:i]
		}
		if string(key) == "binary_data_output" {
			continue
		}
		name := string(key)
		v, ok := index.Find(name)
		if !ok {
			return pr.Missing(name)
		}
		p := codec.JSONParam(v)
		if v.IsString() {
			p.String, _ = v.CString()
		}
		if err := pr.Read(name, p); err != nil {
			return err
		}
	}
	return nil
}

// instanceRows sorts the instances' values by input: rows[i] holds input
// names[i]'s value of every instance, or nothing. An instance is an object
// keyed by input name, or (one-input models only) the row itself; all
// instances must use the same form and keys, so no row is guessed. A name
// repeated in one instance keeps its last value.
func instanceRows(ctx context.Context, model string, names []string, instances tritonjson.Value, n int) ([][]tritonjson.Value, error) {
	rows := make([][]tritonjson.Value, len(names))
	var keyed bool
	var first, present []bool // the inputs instance 0 and this one name
	for i, inst := range instances.Elements() {
		if err := alive(ctx, i); err != nil {
			return nil, err
		}
		if i == 0 {
			keyed = inst.IsObject()
			first, present = make([]bool, len(names)), make([]bool, len(names))
		}
		if inst.IsObject() != keyed {
			return nil, badRequest("instances mix objects keyed by input name with plain values; use one form for all instances")
		}
		if !keyed {
			if len(names) != 1 {
				return nil, badRequest(fmt.Sprintf("model '%s' has %d inputs (%s): each instance must be an object keyed by input name", model, len(names), strings.Join(names, ", ")))
			}
			if rows[0] == nil {
				rows[0] = make([]tritonjson.Value, 0, n)
			}
			rows[0] = append(rows[0], inst)
			continue
		}
		clear(present)
		for k, v := range inst.Members() {
			j := slices.Index(names, string(k))
			if j < 0 {
				return nil, badRequest(fmt.Sprintf("instance %d: model '%s' has no input '%s' (inputs: %s)", i, model, k, strings.Join(names, ", ")))
			}
			if present[j] {
				rows[j][len(rows[j])-1] = v
				continue
			}
			present[j] = true
			if rows[j] == nil {
				rows[j] = make([]tritonjson.Value, 0, n)
			}
			rows[j] = append(rows[j], v)
		}
		if i == 0 {
			copy(first, present)
		} else if !slices.Equal(first, present) {
			return nil, badRequest(fmt.Sprintf("instance %d has inputs [%s] but instance 0 has [%s]; every instance must name the same inputs", i, sortedNames(names, present), sortedNames(names, first)))
		}
	}
	return rows, nil
}

// presizeParams is the most distinct parameter names left to v2 to store
// in a map it grows.
const presizeParams = 64

// checkEvery is how many members or instances are decoded between two
// looks at the request's context.
const checkEvery = 4096

// alive reports a done ctx as CodeCancelled, looking only at every
// checkEvery-th step i of a loop: the client went away, and the rest of
// its body is work for nobody.
func alive(ctx context.Context, i int) error {
	if i%checkEvery != checkEvery-1 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return core.Errorf(core.CodeCancelled, "request cancelled while decoding its body: %v", err)
	}
	return nil
}

// sortedNames lists the names marked in, sorted.
func sortedNames(names []string, in []bool) string {
	var s []string
	for j, name := range names {
		if in[j] {
			s = append(s, name)
		}
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// rowShape is one instance's shape for input in: its dims when all are
// fixed (a row may then be nested or flat), else the nesting of the JSON
// arrays, which must agree between instances.
func rowShape(in *modelconfig.ModelInput, rows []tritonjson.Value) ([]int64, error) {
	dims := in.GetDims()
	if !slices.ContainsFunc(dims, func(d int64) bool { return d < 0 }) {
		return slices.Clone(dims), nil
	}
	var shape []int64
	for i, row := range rows {
		s := jsonShape(row)
		if len(s) == 0 && len(dims) == 1 {
			s = []int64{1} // a scalar for a one-dimensional input
		}
		if i == 0 {
			shape = s
		} else if !slices.Equal(shape, s) {
			return nil, badRequest(fmt.Sprintf("input '%s': instance %d has shape %v but instance 0 has %v; instances must agree", in.GetName(), i, s, shape))
		}
	}
	return shape, nil
}

// jsonShape follows the first element of nested arrays; ragged arrays are
// caught later by the element count check.
func jsonShape(v tritonjson.Value) []int64 {
	var shape []int64
	for v.IsArray() {
		shape = append(shape, int64(v.Len()))
		if v.Len() == 0 {
			break
		}
		v, _ = v.Index(0)
	}
	return shape
}

// checkCounts makes sure every row holds as many values as its shape, so a
// client mistake is a 400 here rather than the data conversion's 500.
func checkCounts(name string, shape []int64, rows []tritonjson.Value) error {
	want := int64(1)
	for _, d := range shape {
		want *= d
	}
	for i, row := range rows {
		if n := tokens(row); n != want {
			return badRequest(fmt.Sprintf("input '%s', instance %d has %d values, want %d (row shape %v)", name, i, n, want, shape))
		}
	}
	return nil
}

// tokens counts the JSON tokens of v but brackets and braces: the
// values of nested arrays, and an object's names and values.
func tokens(v tritonjson.Value) int64 {
	switch v.Kind() {
	case tritonjson.KindArray:
		var n int64
		w := v.ArrayWalk()
		for e, ok := w.Next(); ok; e, ok = w.Next() {
			if e.IsObject() {
				n += tokens(e)
			} else if !e.IsArray() {
				n++
			}
		}
		return n
	case tritonjson.KindObject:
		var n int64
		for _, m := range v.Members() {
			n += 1 + tokens(m)
		}
		return n
	}
	return 1
}

// tensorData converts an input's rows, count elements of dt in all, to
// the tensor's bytes: little endian, BYTES as 4-byte lengths and bytes.
// Elements convert, and fail, as a v2 request's "data" (platforms/codec),
// within --http-max-input-size maxInput.
func tensorData(name string, dt core.DataType, count int64, rows []tritonjson.Value, maxInput int64) ([]byte, error) {
	if count == 0 {
		return []byte{}, nil // a v2 body's data is not read either
	}
	var data []byte
	if size := int64(dt.ByteSize()); size > 0 {
		if maxInput > 0 && count > maxInput/size {
			return nil, jsonInputTooLarge(name, count*size, maxInput)
		}
		data = make([]byte, 0, count*size)
	}
	for _, row := range rows {
		var err error
		if data, err = appendRow(data, name, dt, row, 0); err != nil {
			return nil, err
		}
	}
	if maxInput > 0 && int64(len(data)) > maxInput {
		return nil, jsonInputTooLarge(name, int64(len(data)), maxInput) // BYTES
	}
	return data, nil
}

// appendRow appends one row's elements: each innermost array, or a scalar,
// converted by codec.GenerateTensorData. depth is the number of arrays
// around row within its row: with the "data" array of a v2 body around
// them, codec.MaxDataNesting arrays are too many, checked in document
// order as a v2 body's are.
func appendRow(b []byte, name string, dt core.DataType, row tritonjson.Value, depth int) ([]byte, error) {
	if depth+1 >= codec.MaxDataNesting || (row.Len() > 0 && row.IsArray() && depth+2 >= codec.MaxDataNesting) {
		return nil, errNestingTooDeep()
	}
	if nested(row) {
		for _, e := range row.Elements() {
			var err error
			if b, err = appendRow(b, name, dt, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	data, _, err := codec.GenerateTensorData(name, dt, row)
	return append(b, data...), err
}

// errNestingTooDeep is a v2 body's failure for "data" nested too deeply
// (platforms/codec).
func errNestingTooDeep() error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (" + strconv.Itoa(codec.MaxDataNesting) + ")"}
}

// nested reports whether v is an array holding an array.
func nested(v tritonjson.Value) bool {
	for _, e := range v.Elements() {
		if e.IsArray() {
			return true
		}
	}
	return false
}

// jsonInputTooLarge is the base route's --http-max-input-size failure for
// a JSON input of n bytes (triton-inference-server/server
// src/http_server.cc).
func jsonInputTooLarge(name string, n, limit int64) error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "JSON input '" + name + "' has a byte_size (" + strconv.FormatInt(n, 10) +
		" bytes) that exceeds the maximum allowed value of " + strconv.FormatInt(limit, 10) +
		" bytes. Use --http-max-input-size to increase the limit."}
}

// appendPredictions appends {"predictions":[...]} for n instances: row i
// of each output (the whole output without batching), nested to the row
// shape; with several outputs, an object keyed by output name. Elements
// are written as in a v2 JSON response (codec.AppendGenerateValue).
func appendPredictions(b []byte, outs []*core.Tensor, n int, batching bool) ([]byte, error) {
	if !batching {
		n = 1
	}
	rows := make([]outputRows, len(outs))
	for o, t := range outs {
		if err := rows[o].init(t, n, batching); err != nil {
			return nil, err
		}
	}
	b = append(b, `{"predictions":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if len(outs) == 1 {
			var err error
			if b, err = rows[0].next(b, rows[0].shape); err != nil {
				return nil, err
			}
			continue
		}
		b = append(b, '{')
		for o := range rows {
			if o > 0 {
				b = append(b, ',')
			}
			b = tritonjson.AppendString(b, outs[o].Name)
			b = append(b, ':')
			var err error
			if b, err = rows[o].next(b, rows[o].shape); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// outputRows reads one output's elements in order, a row at a time.
type outputRows struct {
	t     *core.Tensor
	shape []int64 // a row's shape
	off   int     // the next element's offset in t.Data
	elem  core.Tensor
}

func (r *outputRows) init(t *core.Tensor, n int, batching bool) error {
	r.t, r.shape = t, t.Shape
	if batching {
		if len(r.shape) == 0 || r.shape[0] != int64(n) {
			return fmt.Errorf("output '%s' has shape %v: its first dimension must be the %d instances", t.Name, r.shape, n)
		}
		r.shape = r.shape[1:]
	}
	count := int64(1) // a scalar's, for an empty shape
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && count > math.MaxInt64/d) {
			return errOutputSize(t.Name)
		}
		count *= d
	}
	if t.DataType != core.TypeBytes && (count > int64(len(t.Data)) || int64(len(t.Data)) != count*int64(t.DataType.ByteSize())) {
		return errOutputSize(t.Name)
	}
	r.elem = core.Tensor{Name: t.Name, DataType: t.DataType}
	return nil
}

// next appends the next shape's worth of elements as nested arrays (a
// scalar for an empty shape).
func (r *outputRows) next(b []byte, shape []int64) ([]byte, error) {
	if len(shape) == 0 {
		return r.element(b)
	}
	b = append(b, '[')
	for j := range shape[0] {
		if j > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = r.next(b, shape[1:]); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// element appends the next element.
func (r *outputRows) element(b []byte) ([]byte, error) {
	data := r.t.Data[r.off:]
	size := r.t.DataType.ByteSize()
	if r.t.DataType == core.TypeBytes {
		if len(data) < 4 || int(binary.LittleEndian.Uint32(data)) > len(data)-4 {
			return nil, errOutputSize(r.t.Name)
		}
		size = 4 + int(binary.LittleEndian.Uint32(data))
	}
	r.elem.Data = data[:size:size]
	r.off += size
	return codec.AppendGenerateValue(b, &r.elem)
}

// errOutputSize is the v2 JSON writer's failure for an output whose data
// does not match its shape (platforms/codec).
func errOutputSize(name string) error {
	return core.Errorf(core.CodeInternal, "output tensor shape does not match size of output for '%s'", name)
}
