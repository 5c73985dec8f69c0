package sagemaker

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// csvRows serves text/csv: every row is one instance of the model's only
// input, whose shape is fixed, its values in row-major order. Rows go to
// the model max_batch_size at a time (one by one without batching); the
// reply is a csv row per input row, the outputs' values in the response's
// order, or with Accept: application/jsonlines a prediction per line. It
// returns the reply's content type and body.
func (h *handler) csvRows(r *http.Request, model string, cfg *modelconfig.ModelConfig, body []byte) (string, []byte, error) {
	in, dims, err := csvInput(cfg)
	if err != nil {
		return "", nil, err
	}
	rows, err := csvRecords(in, dims, body)
	if err != nil {
		return "", nil, err
	}
	chunk := 1
	if mbs := int(cfg.GetMaxBatchSize()); mbs > 0 {
		chunk = mbs
	}
	type part struct {
		lo, n int
		req   *core.InferRequest
		reply []byte
	}
	var parts []part
	opts := instances.Options{MaxInputSize: h.api.MaxInputSize()}
	for lo := 0; lo < len(rows); lo += chunk {
		p := part{lo: lo, n: min(chunk, len(rows)-lo)}
		release := h.api.Work() // --http-thread-count bounds decoding, as on /infer
		p.req, err = csvRequest(r, model, cfg, rows[lo:lo+p.n], opts)
		release()
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", rowsName(p.lo, p.n), err)
		}
		parts = append(parts, p)
	}
	jsonl := acceptsJSONLines(r.Header.Get("Accept"))
	batching := cfg.GetMaxBatchSize() > 0
	meta := recordHeader(r)
	errs := h.runRecords(model, len(parts), func(i int) (err error) {
		p := &parts[i]
		p.reply, err = h.predict(r, model, meta, p.req, func(resp *core.InferResponse) ([]byte, error) {
			return csvReply(resp.Outputs, p.n, batching, jsonl)
		})
		return err
	})
	var out []byte
	for i, p := range parts {
		if errs[i] != nil {
			return "", nil, fmt.Errorf("%s: %w", rowsName(p.lo, p.n), errs[i])
		}
		out = append(out, p.reply...)
	}
	if jsonl {
		return jsonLinesMIME, out, nil
	}
	return csvMIME, out, nil
}

// rowsName names the n rows from row lo (0-based) in an error.
func rowsName(lo, n int) string {
	if n > 1 {
		return fmt.Sprintf("rows %d-%d", lo+1, lo+n)
	}
	return fmt.Sprintf("row %d", lo+1)
}

// csvRecords reads the body's rows, each as the JSON array of its values.
func csvRecords(in *modelconfig.ModelInput, dims []int64, body []byte) ([][]byte, error) {
	per := 1
	for _, d := range dims {
		per *= int(d)
	}
	rd := csv.NewReader(bytes.NewReader(body))
	rd.FieldsPerRecord = -1
	rd.TrimLeadingSpace = true
	var rows [][]byte
	for {
		fields, err := rd.Read()
		if err == io.EOF {
			break
		}
		row := len(rows) + 1
		if err != nil {
			return nil, httpapi.Errorf(http.StatusBadRequest, "row %d: %v", row, err)
		}
		if len(fields) != per {
			return nil, httpapi.Errorf(http.StatusBadRequest, "row %d: input '%s' of shape %v takes %d values, got %d", row, in.GetName(), dims, per, len(fields))
		}
		b := []byte{'['}
		for i, f := range fields {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCSVValue(b, f, in.GetDataType()); err != nil {
				return nil, httpapi.Errorf(http.StatusBadRequest, "row %d, column %d: %v", row, i+1, err)
			}
		}
		rows = append(rows, append(b, ']'))
	}
	if len(rows) == 0 {
		return nil, httpapi.Errorf(http.StatusBadRequest, "no rows in the text/csv body")
	}
	return rows, nil
}

// csvRequest is the core request of some rows, each an instance of the
// model's only input. The rows are the JSON arrays of their checked
// values, so that each value converts by the v2 JSON rules
// (platforms/codec) through the instances translator, as an instance's
// value does.
func csvRequest(r *http.Request, model string, cfg *modelconfig.ModelConfig, rows [][]byte, opts instances.Options) (*core.InferRequest, error) {
	text := append(append([]byte{'['}, bytes.Join(rows, []byte{','})...), ']')
	doc, err := tritonjson.ParseJSON(text)
	if err != nil {
		return nil, fmt.Errorf("csv rows as JSON: %w", err) // written above: cannot happen
	}
	q := instances.Request{Instances: doc.Root()}
	req, err := q.Decode(r.Context(), model, cfg, opts)
	return req, recordError(err)
}

// csvReply renders the outputs of n rows: a csv row per instance (the
// outputs' values, strings unquoted), or a prediction per line.
func csvReply(outs []*core.Tensor, n int, batching, jsonl bool) ([]byte, error) {
	p, err := instances.NewPredictions(outs, n, batching)
	if err != nil {
		return nil, err
	}
	var b []byte
	if jsonl {
		for range p.Len() {
			if b, err = p.AppendNext(b); err != nil {
				return nil, err
			}
			b = append(b, '\n')
		}
		return b, nil
	}
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	for range p.Len() {
		var record []string
		if err := p.NextElements(func(e []byte) { record = append(record, csvField(e)) }); err != nil {
			return nil, err
		}
		_ = cw.Write(record) // a bytes.Buffer does not fail
	}
	cw.Flush()
	return out.Bytes(), nil
}

// csvInput is the model's input a csv row fills: the only one, of fixed
// shape.
func csvInput(cfg *modelconfig.ModelConfig) (*modelconfig.ModelInput, []int64, error) {
	inputs := cfg.GetInput()
	if len(inputs) != 1 {
		return nil, nil, httpapi.Errorf(http.StatusBadRequest, "text/csv needs a model with one input; model '%s' has %d", cfg.GetName(), len(inputs))
	}
	dims := inputs[0].GetDims()
	for _, d := range dims {
		if d < 1 {
			return nil, nil, httpapi.Errorf(http.StatusBadRequest, "text/csv needs an input of fixed shape; input '%s' of model '%s' has shape %v", inputs[0].GetName(), cfg.GetName(), dims)
		}
	}
	return inputs[0], dims, nil
}

// appendCSVValue parses one csv field as a value of dt and appends it as
// JSON.
func appendCSVValue(b []byte, f string, dt modelconfig.DataType) ([]byte, error) {
	f = strings.TrimSpace(f)
	bad := func() error { return fmt.Errorf("cannot parse '%s' as %s", f, wireType(dt)) }
	switch dt {
	case modelconfig.DataType_TYPE_STRING:
		s, _ := json.Marshal(f) // encoding/json's escaping, as the records always had
		return append(b, s...), nil
	case modelconfig.DataType_TYPE_BOOL:
		v, err := strconv.ParseBool(f)
		if err != nil {
			return nil, bad()
		}
		return strconv.AppendBool(b, v), nil
	case modelconfig.DataType_TYPE_UINT8, modelconfig.DataType_TYPE_UINT16, modelconfig.DataType_TYPE_UINT32, modelconfig.DataType_TYPE_UINT64:
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return strconv.AppendUint(b, v, 10), nil
	case modelconfig.DataType_TYPE_INT8, modelconfig.DataType_TYPE_INT16, modelconfig.DataType_TYPE_INT32, modelconfig.DataType_TYPE_INT64:
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return strconv.AppendInt(b, v, 10), nil
	}
	v, err := strconv.ParseFloat(f, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, bad() // JSON has no NaN or infinities
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64), nil
}

// wireType is a config data type's v2 name.
func wireType(dt modelconfig.DataType) string {
	if dt == modelconfig.DataType_TYPE_STRING {
		return "BYTES"
	}
	return strings.TrimPrefix(dt.String(), "TYPE_")
}

// csvField is one output element's csv field: its JSON text, a string
// unquoted.
func csvField(elem []byte) string {
	if len(elem) > 0 && elem[0] == '"' {
		var s string
		if json.Unmarshal(elem, &s) == nil {
			return s
		}
	}
	return string(elem)
}
