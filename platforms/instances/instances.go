// Package instances translates the {"instances": [...]} requests of the
// cloud frontends (Vertex AI's predict route, SageMaker's JSON Lines and
// CSV records) to core requests and core responses back to predictions.
// It is the one translator of both clouds: a decoder that builds the core
// request straight from the instances, for the inference pipeline
// (platforms/infer) to run as it runs a v2 /infer body, and a renderer of
// the outputs as predictions, with no v2 body between. What differs
// between the clouds (the envelopes, content types, error bodies and
// statuses) stays in their packages, vertex and sagemaker.
//
// The mapping (docs/deploy.md shows it to users):
//
//   - Each instance is either the value of the model's only input or an
//     object keyed by input name. Every instance uses the same form and
//     names the same inputs; an optional input may be left out of all.
//   - Each input becomes one tensor whose data is the instances' rows in
//     order, each element converted as in a v2 body's "data"
//     (platforms/codec). For models with max_batch_size > 0 the shape is
//     [len(instances)] + row shape; a model without batching takes exactly
//     one instance, whose value is the whole tensor. The row shape is the
//     input's dims when they are all fixed, else the nesting of the JSON
//     arrays.
//   - "parameters" are the request parameters, read as a v2 body's, but
//     "binary_data_output" (predictions are always JSON).
//   - The outputs render as predictions: with one output, prediction i is
//     that output's row i (nested to the row shape); with several, an
//     object of output name to row i.
//
// A failure to map is an *Error, which each cloud answers 400; the data's
// and the parameters' failures are a v2 body's, with their statuses.
package instances

import (
	"bytes"
	"context"
	"slices"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Request is a parsed {"instances": [...], "parameters": {...}} body; its
// values refer to the body's bytes.
type Request struct {
	Instances tritonjson.Value
	Params    tritonjson.Value // the zero Value when absent
}

// Parse reports whether body is an instances request: a JSON object with
// an "instances" member and no "inputs" (a v2 body). The substring test
// keeps v2 bodies from being parsed twice; a body that does not parse is
// not one, and its frontend reports the error as it would for a v2 body.
func Parse(body []byte) (*Request, bool) {
	if !bytes.Contains(body, []byte(`"instances"`)) {
		return nil, false
	}
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return nil, false
	}
	return FromObject(doc.Root())
}

// FromObject reports whether the JSON object root is an instances request
// (see Parse).
func FromObject(root tritonjson.Value) (*Request, bool) {
	instances, ok := root.Find("instances")
	if !ok || root.Has("inputs") {
		return nil, false
	}
	params, _ := root.Find("parameters")
	return &Request{Instances: instances, Params: params}, true
}

// Len is the number of instances (0 when "instances" is no array).
func (q *Request) Len() int { return q.Instances.Len() }

// Options are a decoding's limits and a cloud's leniency.
type Options struct {
	// MaxInputSize is --http-max-input-size, which bounds each tensor's
	// bytes as a v2 body's JSON input is bounded; 0: no bound.
	MaxInputSize int64
	// SkipUnknown ignores members of a keyed instance that name no input,
	// as SageMaker's records always did (a transform job's records may
	// carry fields of their own); otherwise they fail (UnknownInput).
	SkipUnknown bool
}

// Decode builds the core request for q's instances against the model's
// configuration cfg: one tensor per input, whose data is the instances'
// rows in order, and q's parameters but binary_data_output. Every mapping
// error (an *Error) comes before the parameters and the data are read, as
// when a v2 body was built first. Decoding gives up once ctx is done (the
// client went away).
func (q *Request) Decode(ctx context.Context, model string, cfg *modelconfig.ModelConfig, opts Options) (*core.InferRequest, error) {
	n := q.Instances.Len()
	if !q.Instances.IsArray() || n == 0 {
		return nil, &Error{Kind: NotArray, Model: model}
	}
	inputs := cfg.GetInput()
	if len(inputs) == 0 {
		return nil, &Error{Kind: NoInputs, Model: model}
	}
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = in.GetName()
	}
	batching := cfg.GetMaxBatchSize() > 0
	if !batching && n != 1 {
		return nil, &Error{Kind: NotBatching, Model: model, Inputs: names, Count: int64(n)}
	}
	rows, err := instanceRows(ctx, model, names, q.Instances, n, opts.SkipUnknown)
	if err != nil {
		return nil, err
	}

	shapes := make([][]int64, len(inputs))
	tensors := 0
	for i, in := range inputs {
		if len(rows[i]) == 0 {
			if in.GetOptional() {
				continue
			}
			return nil, &Error{Kind: MissingInput, Model: model, Inputs: names, Input: in.GetName()}
		}
		shape, err := rowShape(in, rows[i])
		if err != nil {
			err.Model, err.Inputs = model, names
			return nil, err
		}
		if err := checkCounts(in.GetName(), shape, rows[i]); err != nil {
			err.Model, err.Inputs = model, names
			return nil, err
		}
		shapes[i] = shape
		tensors++
	}
	if q.Params.Exists() && !q.Params.IsNull() && !q.Params.IsObject() {
		return nil, &Error{Kind: ParamsNotObject, Model: model, Inputs: names}
	}

	req := &core.InferRequest{}
	if err := readParams(ctx, req, q.Params); err != nil {
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
		data, err := tensorData(in.GetName(), dt, core.ElementCount(shape), rows[i], opts.MaxInputSize)
		if err != nil {
			return nil, err
		}
		ts = append(ts, core.Tensor{Name: in.GetName(), DataType: dt, Shape: shape, Data: data})
		req.Inputs = append(req.Inputs, &ts[len(ts)-1])
	}
	return req, nil
}

// readParams applies the request's "parameters" (an object, or absent or
// null) to req by the HTTP infer rules (protocol.ParamReader), member by
// member in document order, but binary_data_output: the predictions are
// always JSON.
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
// repeated in one instance keeps its last value; with skipUnknown a name
// that is no input is left out.
func instanceRows(ctx context.Context, model string, names []string, instances tritonjson.Value, n int, skipUnknown bool) ([][]tritonjson.Value, error) {
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
			return nil, &Error{Kind: MixedForms, Model: model, Inputs: names, Instance: i}
		}
		if !keyed {
			if len(names) != 1 {
				return nil, &Error{Kind: NotKeyed, Model: model, Inputs: names, Instance: i}
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
				if skipUnknown {
					continue
				}
				return nil, &Error{Kind: UnknownInput, Model: model, Inputs: names, Instance: i, Input: string(k)}
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
			return nil, &Error{Kind: InputsDiffer, Model: model, Inputs: names, Instance: i,
				Named: sortedNames(names, present), FirstNamed: sortedNames(names, first)}
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
func sortedNames(names []string, in []bool) []string {
	s := []string{}
	for j, name := range names {
		if in[j] {
			s = append(s, name)
		}
	}
	slices.Sort(s)
	return s
}
