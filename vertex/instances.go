package vertex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// instancesBody reports whether body is a Vertex {"instances": ...}
// request and returns its top-level members. A v2 body names "inputs";
// the substring test keeps v2 bodies from being parsed twice.
func instancesBody(body []byte) (map[string]json.RawMessage, bool) {
	if !bytes.Contains(body, []byte(`"instances"`)) {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, false // not a JSON object: the base server reports it
	}
	_, instances := top["instances"]
	_, inputs := top["inputs"]
	return top, instances && !inputs
}

// predictInstances serves an "instances" request on model through the base
// infer route and maps the outputs to "predictions".
func (h *Handler) predictInstances(w http.ResponseWriter, r *http.Request, model, path string, top map[string]json.RawMessage) {
	mv, release, err := h.core.Acquire(model, core.LatestVersion)
	if err != nil {
		// The base route reports the lookup failure with its own status.
		h.api.ServeHTTP(w, rewriteBody(r, path, nil))
		return
	}
	cfg := mv.Config
	release()
	body, n, err := v2Request(model, cfg, top)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, err.Error())
		return
	}
	reply := newReplyBuffer()
	h.api.ServeHTTP(reply, rewriteBody(r, path, body))
	if reply.status != http.StatusOK {
		reply.copyTo(w)
		return
	}
	out, err := predictions(reply.body.Bytes(), n, cfg.GetMaxBatchSize() > 0)
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// The base route's load report (endpoint-load-metrics-format) goes
	// with the translated reply.
	for _, k := range [...]string{orca.Header, orca.BinHeader} {
		if v, ok := reply.header[k]; ok {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// v2Request builds the v2 request for the request's instances and returns
// it with the number of instances.
func v2Request(model string, cfg *modelconfig.ModelConfig, top map[string]json.RawMessage) ([]byte, int, error) {
	var instances []json.RawMessage
	if err := json.Unmarshal(top["instances"], &instances); err != nil || len(instances) == 0 {
		return nil, 0, badRequest("'instances' must be a non-empty JSON array")
	}
	inputs := cfg.GetInput()
	if len(inputs) == 0 {
		return nil, 0, badRequest(fmt.Sprintf("model '%s' has no inputs to map 'instances' to", model))
	}
	batching := cfg.GetMaxBatchSize() > 0
	if !batching && len(instances) != 1 {
		return nil, 0, badRequest(fmt.Sprintf("model '%s' does not support batching (max_batch_size 0): send exactly one instance, got %d", model, len(instances)))
	}
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = in.GetName()
	}
	rows, err := instanceRows(model, names, instances)
	if err != nil {
		return nil, 0, err
	}

	b := []byte(`{"inputs":[`)
	first := true
	for _, in := range inputs {
		rs, ok := rows[in.GetName()]
		if !ok {
			if in.GetOptional() {
				continue
			}
			return nil, 0, badRequest(fmt.Sprintf("instances lack input '%s' of model '%s' (inputs: %s)", in.GetName(), model, strings.Join(names, ", ")))
		}
		shape, err := rowShape(in, rs)
		if err != nil {
			return nil, 0, err
		}
		if err := checkCounts(in.GetName(), shape, rs); err != nil {
			return nil, 0, err
		}
		if batching {
			shape = append([]int64{int64(len(rs))}, shape...)
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, in.GetName())
		b = append(b, `,"datatype":`...)
		b = tritonjson.AppendString(b, core.DataType(in.GetDataType()).String())
		b = append(b, `,"shape":[`...)
		for i, d := range shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data":[`...)
		for i, row := range rs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, row...)
		}
		b = append(b, "]}"...)
	}
	b = append(b, ']')
	if params, ok := top["parameters"]; ok && string(params) != "null" {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, 0, badRequest("'parameters' must be a JSON object")
		}
		// Predictions are JSON: binary outputs could not be mapped back.
		delete(p, "binary_data_output")
		if len(p) > 0 {
			raw, err := json.Marshal(p)
			if err != nil {
				return nil, 0, badRequest("'parameters': " + err.Error())
			}
			b = append(b, `,"parameters":`...)
			b = append(b, raw...)
		}
	}
	return append(b, '}'), len(instances), nil
}

// instanceRows sorts the instances' values by input name. An instance is an
// object keyed by input name, or (one-input models only) the row itself;
// all instances must use the same form and keys, so no row is guessed.
func instanceRows(model string, names []string, instances []json.RawMessage) (map[string][]json.RawMessage, error) {
	rows := map[string][]json.RawMessage{}
	var keys []string // the first keyed instance's input names, sorted
	keyed := isObject(instances[0])
	for i, inst := range instances {
		if isObject(inst) != keyed {
			return nil, badRequest("instances mix objects keyed by input name with plain values; use one form for all instances")
		}
		if !keyed {
			if len(names) != 1 {
				return nil, badRequest(fmt.Sprintf("model '%s' has %d inputs (%s): each instance must be an object keyed by input name", model, len(names), strings.Join(names, ", ")))
			}
			rows[names[0]] = append(rows[names[0]], inst)
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(inst, &obj); err != nil {
			return nil, badRequest(fmt.Sprintf("instance %d: %v", i, err))
		}
		got := make([]string, 0, len(obj))
		for k, v := range obj {
			if !slices.Contains(names, k) {
				return nil, badRequest(fmt.Sprintf("instance %d: model '%s' has no input '%s' (inputs: %s)", i, model, k, strings.Join(names, ", ")))
			}
			got = append(got, k)
			rows[k] = append(rows[k], v)
		}
		slices.Sort(got)
		if i == 0 {
			keys = got
		} else if !slices.Equal(keys, got) {
			return nil, badRequest(fmt.Sprintf("instance %d has inputs [%s] but instance 0 has [%s]; every instance must name the same inputs", i, strings.Join(got, ", "), strings.Join(keys, ", ")))
		}
	}
	return rows, nil
}

// rowShape is one instance's shape for input in: its dims when all are
// fixed (a row may then be nested or flat), else the nesting of the JSON
// arrays, which must agree between instances.
func rowShape(in *modelconfig.ModelInput, rows []json.RawMessage) ([]int64, error) {
	dims := in.GetDims()
	if !slices.ContainsFunc(dims, func(d int64) bool { return d < 0 }) {
		return slices.Clone(dims), nil
	}
	var shape []int64
	for i, row := range rows {
		s, err := jsonShape(row)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("input '%s', instance %d: %v", in.GetName(), i, err))
		}
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
func jsonShape(raw json.RawMessage) ([]int64, error) {
	var shape []int64
	for {
		raw = bytes.TrimLeft(raw, " \t\r\n")
		if len(raw) == 0 || raw[0] != '[' {
			return shape, nil
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, err
		}
		shape = append(shape, int64(len(elems)))
		if len(elems) == 0 {
			return shape, nil
		}
		raw = elems[0]
	}
}

// checkCounts makes sure every row holds as many values as its shape, so a
// client mistake is a 400 here rather than the JSON decoder's 500.
func checkCounts(name string, shape []int64, rows []json.RawMessage) error {
	want := int64(1)
	for _, d := range shape {
		want *= d
	}
	for i, row := range rows {
		dec := json.NewDecoder(bytes.NewReader(row))
		var n int64
		for {
			tok, err := dec.Token()
			if err != nil {
				break // io.EOF; the row was already parsed once
			}
			if _, delim := tok.(json.Delim); !delim {
				n++
			}
		}
		if n != want {
			return badRequest(fmt.Sprintf("input '%s', instance %d has %d values, want %d (row shape %v)", name, i, n, want, shape))
		}
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// predictions maps a v2 JSON response to {"predictions":[...]} for n
// instances: row i of each output (the whole output without batching).
func predictions(resp []byte, n int, batching bool) ([]byte, error) {
	var v2 struct {
		Outputs []struct {
			Name  string            `json:"name"`
			Shape []int64           `json:"shape"`
			Data  []json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(resp, &v2); err != nil {
		return nil, fmt.Errorf("failed to map the inference response to predictions: %v", err)
	}
	if !batching {
		n = 1
	}
	// rows[o][i] is output o's prediction for instance i.
	rows := make([][][]byte, len(v2.Outputs))
	for o, out := range v2.Outputs {
		shape := out.Shape
		if batching {
			if len(shape) == 0 || shape[0] != int64(n) {
				return nil, fmt.Errorf("output '%s' has shape %v: its first dimension must be the %d instances", out.Name, shape, n)
			}
			shape = shape[1:]
		}
		per := int64(1)
		for _, d := range shape {
			per *= d
		}
		if int64(len(out.Data)) != per*int64(n) {
			return nil, fmt.Errorf("output '%s' carries %d JSON elements, want %d", out.Name, len(out.Data), per*int64(n))
		}
		for i := range n {
			rows[o] = append(rows[o], nest(nil, out.Data[int64(i)*per:int64(i+1)*per], shape))
		}
	}
	b := []byte(`{"predictions":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if len(v2.Outputs) == 1 {
			b = append(b, rows[0][i]...)
			continue
		}
		b = append(b, '{')
		for o, out := range v2.Outputs {
			if o > 0 {
				b = append(b, ',')
			}
			b = tritonjson.AppendString(b, out.Name)
			b = append(b, ':')
			b = append(b, rows[o][i]...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// nest appends flat row-major data as nested JSON arrays of shape (a scalar
// for an empty shape).
func nest(b []byte, data []json.RawMessage, shape []int64) []byte {
	if len(shape) == 0 {
		return append(b, data[0]...)
	}
	sub := int64(1)
	for _, d := range shape[1:] {
		sub *= d
	}
	b = append(b, '[')
	for j := range shape[0] {
		if j > 0 {
			b = append(b, ',')
		}
		b = nest(b, data[j*sub:(j+1)*sub], shape[1:])
	}
	return append(b, ']')
}
