package sagemaker

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Record formats of batch transform (and of any /invocations caller):
// Triton has neither, it reads every body as JSON. Each record becomes
// one v2 /infer request on the base server, so the records of a body run
// as that many requests (at most recordWorkers at once, which lets a
// dynamic batcher batch them) and every v2 rule applies to each.
const (
	jsonLinesMIME = "application/jsonlines"
	csvMIME       = "text/csv"
)

// recordWorkers bounds the requests of one record body in flight at once.
const recordWorkers = 8

// recordFormat is the record format a Content-Type names, "" for none.
func recordFormat(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	switch mt {
	case jsonLinesMIME, csvMIME:
		return mt
	}
	return ""
}

// acceptsJSONLines reports whether Accept asks for application/jsonlines
// before text/csv.
func acceptsJSONLines(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		switch mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part)); mt {
		case jsonLinesMIME:
			return true
		case csvMIME:
			return false
		}
	}
	return false
}

// errRecord is a record the frontend cannot turn into a request.
var errRecord = errors.New("invalid record")

func recordErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errRecord}, args...)...)
}

// records serves an /invocations body of jsonlines or csv records for
// model. A failed record fails the body: the reply is that record's
// error, its message prefixed with the line (or row) it came from, so a
// transform job's log names it.
func (h *handler) records(w http.ResponseWriter, r *http.Request, model, format string) {
	if h.restricted(w, r, "inference") {
		return
	}
	if strings.Contains(model, "/") {
		httpapi.WriteError(w, h.unknownStatus(false), "Request for unknown model: '"+model+"' is not found")
		return
	}
	limit := h.api.MaxInputSize()
	body, err := httpapi.ReadBody(r, limit)
	if err != nil {
		if tl := (*httpapi.BodyTooLarge)(nil); errors.As(err, &tl) {
			err = codec.JSONTooLargeError(tl.Size, limit)
		}
		httpapi.WriteError(w, protocol.HTTPStatus(protocol.ClassOf(err)), err.Error())
		return
	}
	mv, release, err := h.core.Acquire(model, core.LatestVersion)
	if err != nil {
		httpapi.WriteError(w, protocol.HTTPStatus(protocol.ClassOf(err)), err.Error())
		return
	}
	cfg := mv.Config
	release()
	if format == jsonLinesMIME {
		h.jsonLines(w, r, model, cfg, body)
		return
	}
	h.csvRows(w, r, model, cfg, body)
}

// forwarded is a base-server reply to one record request.
type forwarded struct {
	status int
	binary bool // the reply carries binary outputs
	body   []byte
}

// message is the error text of a failed reply.
func (f forwarded) message() string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(f.body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return http.StatusText(f.status)
}

// forwardAll runs each body as a v2 /infer request for model on the base
// server, at most recordWorkers at once; replies come back in order.
func (h *handler) forwardAll(r *http.Request, model string, bodies [][]byte) []forwarded {
	out := make([]forwarded, len(bodies))
	sem := make(chan struct{}, recordWorkers)
	var wg sync.WaitGroup
	for i, b := range bodies {
		if b == nil {
			continue // a record that failed before inference
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = h.forward(r, model, b)
		}()
	}
	wg.Wait()
	return out
}

func (h *handler) forward(r *http.Request, model string, body []byte) forwarded {
	fwd := h.rewrite(r, "/v2/models/"+model+"/infer")
	fwd.Method = http.MethodPost
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	fwd.ContentLength = int64(len(body))
	fwd.Header.Set("Content-Type", "application/json")
	fwd.Header.Del("Content-Length")
	rec := &recorder{header: http.Header{}}
	h.api.ServeHTTP(rec, fwd)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return forwarded{status: rec.status, binary: rec.header.Get(codec.HeaderLengthName) != "", body: rec.body.Bytes()}
}

// recorder keeps a base-server reply.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rc *recorder) Header() http.Header { return rc.header }
func (rc *recorder) WriteHeader(status int) {
	if rc.status == 0 {
		rc.status = status
	}
}
func (rc *recorder) Write(p []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	return rc.body.Write(p)
}

// jsonLines serves application/jsonlines: every non-blank line is a v2
// request body or an {"instances": [...]} record, answered by a line of
// the v2 reply or of {"predictions": [...]}, in the order of the lines.
func (h *handler) jsonLines(w http.ResponseWriter, r *http.Request, model string, cfg *modelconfig.ModelConfig, body []byte) {
	type line struct {
		no        int
		instances int // -1: a v2 body
	}
	var lines []line
	var bodies [][]byte
	for i, text := range bytes.Split(body, []byte("\n")) {
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		req, n, err := lineRequest(text, cfg)
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("line %d: %s", i+1, strings.TrimPrefix(err.Error(), errRecord.Error()+": ")))
			return
		}
		lines = append(lines, line{no: i + 1, instances: n})
		bodies = append(bodies, req)
	}
	replies := h.forwardAll(r, model, bodies)
	var out bytes.Buffer
	for i, f := range replies {
		no := lines[i].no
		switch {
		case f.status != http.StatusOK:
			httpapi.WriteError(w, f.status, fmt.Sprintf("line %d: %s", no, f.message()))
			return
		case f.binary:
			httpapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("line %d: binary outputs cannot be returned as %s", no, jsonLinesMIME))
			return
		}
		reply := f.body
		if n := lines[i].instances; n >= 0 {
			preds, err := predictions(reply, n, cfg.GetMaxBatchSize() > 0)
			if err != nil {
				httpapi.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("line %d: %s", no, err))
				return
			}
			reply = append(append([]byte(`{"predictions":`), preds...), '}')
		}
		out.Write(reply)
		out.WriteByte('\n')
	}
	writeBody(w, http.StatusOK, jsonLinesMIME, out.Bytes())
}

// lineRequest is the v2 body of one jsonlines line and, for an
// {"instances": [...]} record, its instance count (-1 for a v2 body, sent
// as it is).
func lineRequest(text []byte, cfg *modelconfig.ModelConfig) ([]byte, int, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(text, &rec); err != nil {
		return nil, 0, recordErrorf("not a JSON object: %v", err)
	}
	raw, ok := rec["instances"]
	if _, v2Body := rec["inputs"]; !ok || v2Body {
		return text, -1, nil
	}
	var instances []json.RawMessage
	if err := json.Unmarshal(raw, &instances); err != nil || len(instances) == 0 {
		return nil, 0, recordErrorf("\"instances\" must be a non-empty array")
	}
	req, err := instancesRequest(cfg, instances)
	return req, len(instances), err
}

// instancesRequest turns instances into a v2 body. An instance is the
// value of the model's only input, or an object of input name to value;
// the values of an input must all have one shape, which the batch
// dimension (for a batching model) precedes.
func instancesRequest(cfg *modelconfig.ModelConfig, instances []json.RawMessage) ([]byte, error) {
	batching := cfg.GetMaxBatchSize() > 0
	if !batching && len(instances) != 1 {
		return nil, recordErrorf("model '%s' does not support batching: a record holds one instance, got %d", cfg.GetName(), len(instances))
	}
	inputs := cfg.GetInput()
	values := make([][]any, len(inputs)) // per input, per instance
	for i, raw := range instances {
		v, err := decodeValue(raw)
		if err != nil {
			return nil, recordErrorf("instance %d: %v", i, err)
		}
		named, isObject := v.(map[string]any)
		if !isObject && len(inputs) != 1 {
			return nil, recordErrorf("instance %d: model '%s' has %d inputs, so an instance is an object of input name to value", i, cfg.GetName(), len(inputs))
		}
		for j, in := range inputs {
			val := v
			if isObject {
				var ok bool
				if val, ok = named[in.GetName()]; !ok {
					return nil, recordErrorf("instance %d: missing input '%s'", i, in.GetName())
				}
			}
			values[j] = append(values[j], val)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"inputs":[`)
	for j, in := range inputs {
		shape := shapeOf(values[j][0])
		var flat []any
		for i, v := range values[j] {
			if s := shapeOf(v); !slices.Equal(s, shape) {
				return nil, recordErrorf("instance %d: input '%s' has shape %v, instance 0 has %v", i, in.GetName(), s, shape)
			}
			flat = flatten(flat, v)
		}
		if batching {
			shape = append([]int64{int64(len(instances))}, shape...)
		}
		if j > 0 {
			b.WriteByte(',')
		}
		if err := writeInput(&b, in, shape, flat); err != nil {
			return nil, err
		}
	}
	b.WriteString(`]}`)
	return b.Bytes(), nil
}

// writeInput appends one v2 JSON input.
func writeInput(b *bytes.Buffer, in *modelconfig.ModelInput, shape []int64, data []any) error {
	name, _ := json.Marshal(in.GetName())
	shapeJSON, _ := json.Marshal(shape)
	dataJSON, err := json.Marshal(data)
	if err != nil {
		return recordErrorf("input '%s': %v", in.GetName(), err)
	}
	fmt.Fprintf(b, `{"name":%s,"datatype":"%s","shape":%s,"data":%s}`, name, wireType(in.GetDataType()), shapeJSON, dataJSON)
	return nil
}

// wireType is a config data type's v2 name.
func wireType(dt modelconfig.DataType) string {
	if dt == modelconfig.DataType_TYPE_STRING {
		return "BYTES"
	}
	return strings.TrimPrefix(dt.String(), "TYPE_")
}

func decodeValue(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// shapeOf is the shape of nested JSON arrays, read along first elements.
func shapeOf(v any) []int64 {
	var s []int64
	for {
		a, ok := v.([]any)
		if !ok {
			return s
		}
		s = append(s, int64(len(a)))
		if len(a) == 0 {
			return s
		}
		v = a[0]
	}
}

func flatten(dst []any, v any) []any {
	a, ok := v.([]any)
	if !ok {
		return append(dst, v)
	}
	for _, e := range a {
		dst = flatten(dst, e)
	}
	return dst
}

// inferReply is the part of a v2 JSON reply the record formats read.
type inferReply struct {
	Outputs []struct {
		Name  string            `json:"name"`
		Shape []int64           `json:"shape"`
		Data  []json.RawMessage `json:"data"`
	} `json:"outputs"`
}

// rows splits a v2 reply into per-instance values: for each of n
// instances, the JSON value of each output (nested by its shape without
// the batch dimension when batching).
func rows(reply []byte, n int, batching bool) (names []string, values [][][]byte, err error) {
	var rep inferReply
	if err := json.Unmarshal(reply, &rep); err != nil {
		return nil, nil, fmt.Errorf("unreadable reply: %w", err)
	}
	values = make([][][]byte, n)
	for _, o := range rep.Outputs {
		dims := o.Shape
		if batching {
			if len(dims) == 0 || dims[0] != int64(n) {
				return nil, nil, fmt.Errorf("output '%s' has shape %v, not %d instances", o.Name, o.Shape, n)
			}
			dims = dims[1:]
		}
		per := 1
		for _, d := range dims {
			per *= int(d)
		}
		if per*n != len(o.Data) {
			return nil, nil, fmt.Errorf("output '%s' has %d values for shape %v", o.Name, len(o.Data), o.Shape)
		}
		names = append(names, o.Name)
		for i := range n {
			values[i] = append(values[i], nest(o.Data[i*per:(i+1)*per], dims))
		}
	}
	return names, values, nil
}

// nest renders flat values as nested JSON arrays of shape dims.
func nest(flat []json.RawMessage, dims []int64) []byte {
	if len(dims) == 0 {
		return flat[0]
	}
	per := len(flat) / max(int(dims[0]), 1)
	b := []byte{'['}
	for i := range int(dims[0]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, nest(flat[i*per:(i+1)*per], dims[1:])...)
	}
	return append(b, ']')
}

// prediction is one instance's value: its only output's value, or an
// object of output name to value.
func prediction(names []string, vals [][]byte) []byte {
	if len(vals) == 1 {
		return vals[0]
	}
	b := []byte{'{'}
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		q, _ := json.Marshal(name)
		b = append(append(append(b, q...), ':'), vals[i]...)
	}
	return append(b, '}')
}

// predictions renders a v2 reply to n instances as a JSON array of
// predictions.
func predictions(reply []byte, n int, batching bool) ([]byte, error) {
	names, values, err := rows(reply, n, batching)
	if err != nil {
		return nil, err
	}
	b := []byte{'['}
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, prediction(names, v)...)
	}
	return append(b, ']'), nil
}

// csvRows serves text/csv: every row is one instance of the model's only
// input, whose shape is fixed, its values in row-major order. Rows go to
// the model max_batch_size at a time (one by one without batching); the
// reply is a csv row per input row, the outputs' values in the reply's
// order, or with Accept: application/jsonlines a prediction per line.
func (h *handler) csvRows(w http.ResponseWriter, r *http.Request, model string, cfg *modelconfig.ModelConfig, body []byte) {
	in, dims, err := csvInput(cfg)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	per := 1
	for _, d := range dims {
		per *= int(d)
	}
	rd := csv.NewReader(bytes.NewReader(body))
	rd.FieldsPerRecord = -1
	rd.TrimLeadingSpace = true
	var instances [][]any
	for {
		fields, err := rd.Read()
		if err == io.EOF {
			break
		}
		row := len(instances) + 1
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("row %d: %v", row, err))
			return
		}
		if len(fields) != per {
			httpapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("row %d: input '%s' of shape %v takes %d values, got %d", row, in.GetName(), dims, per, len(fields)))
			return
		}
		vals := make([]any, per)
		for i, f := range fields {
			if vals[i], err = csvValue(f, in.GetDataType()); err != nil {
				httpapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("row %d, column %d: %v", row, i+1, err))
				return
			}
		}
		instances = append(instances, vals)
	}
	if len(instances) == 0 {
		httpapi.WriteError(w, http.StatusBadRequest, "no rows in the text/csv body")
		return
	}
	chunk := 1
	if mbs := int(cfg.GetMaxBatchSize()); mbs > 0 {
		chunk = mbs
	}
	var bodies [][]byte
	for lo := 0; lo < len(instances); lo += chunk {
		part := instances[lo:min(lo+chunk, len(instances))]
		shape := dims
		if cfg.GetMaxBatchSize() > 0 {
			shape = append([]int64{int64(len(part))}, dims...)
		}
		var flat []any
		for _, v := range part {
			flat = append(flat, v...)
		}
		var b bytes.Buffer
		b.WriteString(`{"inputs":[`)
		if err := writeInput(&b, in, shape, flat); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		b.WriteString(`]}`)
		bodies = append(bodies, b.Bytes())
	}
	jsonl := acceptsJSONLines(r.Header.Get("Accept"))
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	for i, f := range h.forwardAll(r, model, bodies) {
		lo := i * chunk
		n := min(chunk, len(instances)-lo)
		where := fmt.Sprintf("row %d", lo+1)
		if n > 1 {
			where = fmt.Sprintf("rows %d-%d", lo+1, lo+n)
		}
		if f.status != http.StatusOK {
			httpapi.WriteError(w, f.status, where+": "+f.message())
			return
		}
		names, values, err := rows(f.body, n, cfg.GetMaxBatchSize() > 0)
		if err != nil {
			httpapi.WriteError(w, http.StatusInternalServerError, where+": "+err.Error())
			return
		}
		for _, vals := range values {
			if jsonl {
				out.Write(prediction(names, vals))
				out.WriteByte('\n')
				continue
			}
			var record []string
			for _, v := range vals {
				record = append(record, csvFields(v)...)
			}
			_ = cw.Write(record) // a bytes.Buffer does not fail
		}
	}
	cw.Flush()
	if jsonl {
		writeBody(w, http.StatusOK, jsonLinesMIME, out.Bytes())
		return
	}
	writeBody(w, http.StatusOK, csvMIME, out.Bytes())
}

// csvInput is the model's input a csv row fills: the only one, of fixed
// shape.
func csvInput(cfg *modelconfig.ModelConfig) (*modelconfig.ModelInput, []int64, error) {
	inputs := cfg.GetInput()
	if len(inputs) != 1 {
		return nil, nil, fmt.Errorf("text/csv needs a model with one input; model '%s' has %d", cfg.GetName(), len(inputs))
	}
	dims := inputs[0].GetDims()
	for _, d := range dims {
		if d < 1 {
			return nil, nil, fmt.Errorf("text/csv needs an input of fixed shape; input '%s' of model '%s' has shape %v", inputs[0].GetName(), cfg.GetName(), dims)
		}
	}
	return inputs[0], dims, nil
}

// csvValue parses one csv field as a value of dt.
func csvValue(f string, dt modelconfig.DataType) (any, error) {
	f = strings.TrimSpace(f)
	bad := func() error { return fmt.Errorf("cannot parse '%s' as %s", f, wireType(dt)) }
	switch dt {
	case modelconfig.DataType_TYPE_STRING:
		return f, nil
	case modelconfig.DataType_TYPE_BOOL:
		v, err := strconv.ParseBool(f)
		if err != nil {
			return nil, bad()
		}
		return v, nil
	case modelconfig.DataType_TYPE_UINT8, modelconfig.DataType_TYPE_UINT16, modelconfig.DataType_TYPE_UINT32, modelconfig.DataType_TYPE_UINT64:
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return v, nil
	case modelconfig.DataType_TYPE_INT8, modelconfig.DataType_TYPE_INT16, modelconfig.DataType_TYPE_INT32, modelconfig.DataType_TYPE_INT64:
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return v, nil
	}
	v, err := strconv.ParseFloat(f, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, bad() // JSON has no NaN or infinities
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// csvFields flattens one output's JSON value into csv fields: numbers and
// booleans as written, strings unquoted.
func csvFields(v []byte) []string {
	val, err := decodeValue(v)
	if err != nil {
		return []string{string(v)}
	}
	var out []string
	for _, e := range flatten(nil, val) {
		switch x := e.(type) {
		case string:
			out = append(out, x)
		case json.Number:
			out = append(out, x.String())
		default:
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}
