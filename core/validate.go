package core

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/inferd/inferd/repo/modelconfig"
)

// batchNote is the sentence Triton appends to shape errors of batching models.
const batchNote = " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size."

// RequestPrefix is the "[request id: <id>] " prefix of request validation
// messages; an empty id reads <id_unknown>, as in Triton.
func RequestPrefix(id string) string {
	if id == "" {
		id = "<id_unknown>"
	}
	return "[request id: " + id + "] "
}

// prefix is a request's id, printed (%s) as its RequestPrefix: prepare
// builds the prefix only for an error message, not for every request.
type prefix string

func (p prefix) String() string { return RequestPrefix(string(p)) }

// prepare validates req against the model configuration, in Triton's order,
// and returns the backend inputs (config order, reshaped) and outputs.
func (mv *ModelVersion) prepare(req *InferRequest, r *ExecRequest) error {
	pfx := prefix(req.ID)
	if req.Raw {
		if err := mv.fillRaw(req, pfx); err != nil {
			return err
		}
	}
	if err := mv.selectOutputs(req, r, pfx); err != nil {
		return err
	}
	// The map is made here and filled by checkInputNames: returned from
	// it, it would escape to the heap, two allocations a request.
	given := make(map[string]*Tensor, len(req.Inputs))
	if err := mv.checkInputNames(req, given, pfx); err != nil {
		return err
	}
	zeroBatch, err := mv.checkBatch(req, r, pfx)
	if err != nil {
		return err
	}
	if err := mv.prepareInputs(req, r, given, zeroBatch, pfx); err != nil {
		return err
	}
	r.ID, r.Parameters = req.ID, req.Parameters
	r.Correlation, r.Priority, r.TimeoutMicros = req.Correlation, req.Priority, req.TimeoutMicros
	r.batch = ConcatBatch{Inputs: r.Inputs, Outputs: r.Outputs}
	if mv.cache == nil {
		// A response to cache stays in memory of the backend's own: the
		// caller's destination may change or be lost under it.
		r.batch.Into = destinations(req.Outputs, r.Outputs)
	}
	r.batch.IntoDevice = mv.deviceDestinations(req.Outputs, r.Outputs)
	return nil
}

// selectOutputs sets r's outputs from req's requested ones: unknown names
// fail, none means all; the backend returns them in ascending byte order of
// name (ONNX Runtime backend).
func (mv *ModelVersion) selectOutputs(req *InferRequest, r *ExecRequest, pfx prefix) error {
	if req.Outputs == nil {
		r.Outputs = mv.outputOrder
		return nil
	}
	seen := make(map[string]bool, len(req.Outputs))
	for _, o := range req.Outputs {
		if _, ok := mv.outputs[o.Name]; !ok {
			return Errorf(CodeInvalidArg, "%sunexpected inference output '%s' for model '%s'", pfx, o.Name, mv.Name)
		}
		seen[o.Name] = true
	}
	for _, n := range mv.outputOrder {
		if seen[n] {
			r.Outputs = append(r.Outputs, n)
		}
	}
	return nil
}

// checkInputNames checks req's input count and names against the
// configuration and fills given with its inputs by name.
func (mv *ModelVersion) checkInputNames(req *InferRequest, given map[string]*Tensor, pfx prefix) error {
	cfg := mv.Config
	required := 0
	for _, in := range cfg.GetInput() {
		if !in.GetOptional() {
			required++
		}
	}
	total := len(cfg.GetInput())
	for _, t := range req.Inputs {
		given[t.Name] = t
	}
	if len(req.Inputs) > total || len(req.Inputs) < required || len(given) != len(req.Inputs) {
		return mv.inputCountError(req, pfx, required, total)
	}
	for _, t := range req.Inputs {
		if _, ok := mv.inputs[t.Name]; !ok {
			return Errorf(CodeInvalidArg, "%sunexpected inference input '%s' for model '%s'", pfx, t.Name, mv.Name)
		}
	}
	for _, in := range cfg.GetInput() {
		if !in.GetOptional() && given[in.GetName()] == nil {
			return mv.inputCountError(req, pfx, required, total)
		}
	}
	return nil
}

// checkBatch checks the batch dimension of a batching model's inputs and
// sets r's batch size; zeroBatch reports a batch of 0.
func (mv *ModelVersion) checkBatch(req *InferRequest, r *ExecRequest, pfx prefix) (zeroBatch bool, err error) {
	maxBatch := int64(mv.Config.GetMaxBatchSize())
	if maxBatch <= 0 {
		return false, nil
	}
	var bs int64 = -1
	for _, t := range req.Inputs {
		if len(t.Shape) == 0 {
			return false, Errorf(CodeInvalidArg, "%sinput '%s' has no shape but model requires batch dimension for '%s'", pfx, t.Name, mv.Name)
		}
		switch {
		case bs < 0:
			bs = t.Shape[0]
		case t.Shape[0] != bs:
			return false, Errorf(CodeInvalidArg, "%sinput '%s' batch size does not match other inputs for '%s'", pfx, t.Name, mv.Name)
		}
	}
	if bs > maxBatch {
		return false, Errorf(CodeInvalidArg, "%sinference request batch-size must be <= %d for '%s'", pfx, maxBatch, mv.Name)
	}
	if bs > 0 {
		r.BatchSize = uint64(bs)
	}
	// Triton takes a batch of 0 as no batch dimension at all and sizes the
	// inputs without it (triton-inference-server/core src/infer_request.cc,
	// Normalize): [0, 4] of dims [4] is "Expected 16, got 0", refused
	// before any model runs.
	return bs == 0, nil
}

// prepareInputs checks each given input (datatype, shape, byte size) and
// sets r's inputs, in configuration order, in the shape the model sees.
func (mv *ModelVersion) prepareInputs(req *InferRequest, r *ExecRequest, given map[string]*Tensor, zeroBatch bool, pfx prefix) error {
	var tensors []Tensor
	for _, in := range mv.Config.GetInput() {
		t := given[in.GetName()]
		if t == nil {
			continue
		}
		shape, err := mv.checkInput(in, t, zeroBatch, pfx)
		if err != nil {
			return err
		}
		if r.Inputs == nil {
			// One allocation for all the inputs' tensors, one for the list.
			r.Inputs, tensors = make([]*Tensor, 0, len(req.Inputs)), make([]Tensor, len(req.Inputs))
		}
		tensors[len(r.Inputs)] = Tensor{Name: t.Name, DataType: t.DataType, Shape: shape, Data: t.Data, Device: t.Device}
		r.Inputs = append(r.Inputs, &tensors[len(r.Inputs)])
	}
	return nil
}

// checkInput checks t against its configuration in (datatype, shape, byte
// size) and returns the shape the model sees (in's reshape applied).
func (mv *ModelVersion) checkInput(in *modelconfig.ModelInput, t *Tensor, zeroBatch bool, pfx prefix) ([]int64, error) {
	name := mv.Name
	maxBatch := int64(mv.Config.GetMaxBatchSize())
	want := DataType(in.GetDataType())
	if t.DataType != want {
		return nil, Errorf(CodeInvalidArg, "%sinference input '%s' data-type is '%s', but model '%s' expects '%s'", pfx, t.Name, t.DataType, name, want)
	}
	dims := t.Shape
	if maxBatch > 0 {
		dims = t.Shape[1:]
	}
	if !shapeMatches(dims, in.GetDims()) {
		expected := in.GetDims()
		note := ""
		if maxBatch > 0 {
			expected = append([]int64{-1}, expected...)
			note = batchNote
		}
		return nil, Errorf(CodeInvalidArg, "%sunexpected shape for input '%s' for model '%s'. Expected %s, got %s.%s", pfx, t.Name, name, ShapeString(expected), ShapeString(t.Shape), note)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return nil, Errorf(CodeInvalidArg, "%sAll input dimensions should be specified for input '%s' for model '%s', got %s", pfx, t.Name, name, ShapeString(t.Shape))
		}
	}
	sized := t.Shape
	if zeroBatch {
		sized = dims
	}
	if err := checkByteSize(t, sized, pfx, name); err != nil {
		return nil, err
	}
	if zeroBatch {
		// The data fits the shape without its batch dimension, but the
		// backend gets the shape as sent, whose batch of 0 holds nothing:
		// refused against the whole shape (Expected 0) rather than handed
		// on with more bytes than its shape holds (FuzzValidateInputs).
		if err := checkByteSize(t, t.Shape, pfx, name); err != nil {
			return nil, err
		}
	}
	shape := t.Shape
	if rs := in.GetReshape(); rs != nil {
		shape = reshape(t.Shape, in.GetDims(), rs.GetShape(), maxBatch > 0)
	}
	return shape, nil
}

// deviceDestinations are the IntoDevice of requested in the order of names,
// kept where this version's instances write to that device
// (readsDevice); nil when none is kept.
func (mv *ModelVersion) deviceDestinations(requested []RequestedOutput, names []string) []DeviceData {
	var into []DeviceData
	for _, o := range requested {
		if o.IntoDevice == nil || o.ClassCount > 0 || !mv.readsDevice(o.IntoDevice.DeviceID()) {
			continue
		}
		if into == nil {
			into = make([]DeviceData, len(names))
		}
		for i, n := range names {
			if n == o.Name {
				into[i] = o.IntoDevice
			}
		}
	}
	return into
}

func (mv *ModelVersion) inputCountError(req *InferRequest, pfx prefix, required, total int) error {
	var got, missing []string
	present := map[string]bool{}
	for _, t := range req.Inputs {
		got = append(got, "'"+t.Name+"'")
		present[t.Name] = true
	}
	for _, in := range mv.Config.GetInput() {
		if !in.GetOptional() && !present[in.GetName()] {
			missing = append(missing, "'"+in.GetName()+"'")
		}
	}
	sort.Strings(missing)
	expected := fmt.Sprintf("expected %d inputs", total)
	if required != total {
		expected = fmt.Sprintf("expected number of inputs between %d and %d", required, total)
	}
	return Errorf(CodeInvalidArg, "%s%s but got %d inputs for model '%s'. Got input(s) [%s], but missing required input(s) [%s]. Please provide all required input(s).",
		pfx, expected, len(req.Inputs), mv.Name, strings.Join(got, ","), strings.Join(missing, ","))
}

// shapeMatches compares request dims with config dims (-1 matches any).
func shapeMatches(got, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if want[i] != -1 && got[i] != want[i] {
			return false
		}
	}
	return true
}

// checkByteSize checks t's bytes against shape: t's own, or the shape
// Triton sizes a batch of 0 by.
func checkByteSize(t *Tensor, shape []int64, pfx prefix, model string) error {
	n := ElementCount(shape)
	if n < 0 {
		return Errorf(CodeInvalidArg, "%sinvalid shape for input '%s': shape %s causes total element count to exceed maximum size of 9223372036854775807", pfx, t.Name, ShapeString(shape))
	}
	if t.DataType == TypeBytes {
		got := CountBytesElements(t.Data)
		if got < 0 {
			return Errorf(CodeInvalidArg, "%sunexpected number of string elements for inference input '%s' for model '%s': element framing is broken", pfx, t.Name, model)
		}
		if got != n {
			return Errorf(CodeInvalidArg, "%sexpected %d string elements for inference input '%s' for model '%s', got %d", pfx, n, t.Name, model, got)
		}
		return nil
	}
	size := int64(t.DataType.ByteSize())
	if size > 0 && n > math.MaxInt64/size {
		// n*size would wrap (to 0 for 2^62 FP32 elements) and let an empty
		// tensor through; Triton refuses with this text.
		return Errorf(CodeInvalidArg, "%sbyte size overflow for input '%s': element count %d times element size %d exceeds maximum size of %d", pfx, t.Name, n, size, int64(math.MaxInt64))
	}
	want := n * size
	if got := t.ByteLen(); int64(got) != want {
		return Errorf(CodeInvalidArg, "%sinput byte size mismatch for input '%s' for model '%s'. Expected %d, got %d", pfx, t.Name, model, want, got)
	}
	return nil
}

// reshape maps a request shape onto the config's reshape: each -1 of the
// reshape takes, in order, the request values that matched the -1s of dims.
func reshape(full, dims, target []int64, batching bool) []int64 {
	var wild []int64
	body := full
	if batching {
		body = full[1:]
	}
	for i, d := range dims {
		if d == -1 && i < len(body) {
			wild = append(wild, body[i])
		}
	}
	out := make([]int64, 0, len(target)+1)
	if batching {
		out = append(out, full[0])
	}
	for _, d := range target {
		if d == -1 && len(wild) > 0 {
			d, wild = wild[0], wild[1:]
		}
		out = append(out, d)
	}
	return out
}

// fillRaw completes a raw binary request (Inference-Header-Content-Length: 0):
// the body is the data of the model's single input.
func (mv *ModelVersion) fillRaw(req *InferRequest, pfx prefix) error {
	inputs := mv.Config.GetInput()
	if len(inputs) != 1 {
		return Errorf(CodeInvalidArg, "%sRaw request must only have 1 input (found 1) to be deduced but got %d inputs in '%s' model configuration", pfx, len(inputs), mv.Name)
	}
	in := inputs[0]
	t := req.Inputs[0]
	t.Name = in.GetName()
	t.DataType = DataType(in.GetDataType())
	dims := append([]int64(nil), in.GetDims()...)
	if t.DataType == TypeBytes {
		if len(dims) != 1 || dims[0] != 1 {
			return Errorf(CodeInvalidArg, "%sFor BYTE datatype raw input '%s', the model must have input shape [1]", pfx, t.Name)
		}
		t.Data = AppendBytesElement(make([]byte, 0, 4+len(t.Data)), t.Data)
	} else {
		variable := -1
		per := int64(t.DataType.ByteSize()) // bytes per element of the variable dim
		for i, d := range dims {
			if d == -1 {
				if variable >= 0 {
					return Errorf(CodeInvalidArg, "%sThe shape of the raw input '%s' can not be deduced because there are more than one variable-sized dimension", pfx, t.Name)
				}
				variable = i
				continue
			}
			per = mulNonNeg(per, d)
		}
		// per <= 0 (a zero dim, or a product past int64) deduces nothing:
		// the dim stays -1 and the shape check refuses the request.
		if variable >= 0 && per > 0 {
			dims[variable] = int64(len(t.Data)) / per
		}
	}
	if mv.Config.GetMaxBatchSize() > 0 {
		dims = append([]int64{1}, dims...)
	}
	t.Shape = dims
	return nil
}

// responseShape converts an output's produced shape back to its config dims
// when the output has a reshape (the model produces reshape.shape).
func responseShape(out *modelconfig.ModelOutput, produced []int64, batching bool) []int64 {
	if out.GetReshape() == nil {
		return produced
	}
	dims := out.GetDims()
	shape := make([]int64, 0, len(dims)+1)
	if batching && len(produced) > 0 {
		shape = append(shape, produced[0])
	}
	known, wild := int64(1), -1
	for _, d := range dims {
		if d == -1 {
			wild = len(shape)
		} else {
			known = mulNonNeg(known, d)
		}
		shape = append(shape, d)
	}
	if wild >= 0 {
		total := int64(1)
		start := 0
		if batching {
			start = 1
		}
		for _, d := range produced[min(start, len(produced)):] {
			total = mulNonNeg(total, d)
		}
		if known > 0 && total >= 0 {
			shape[wild] = total / known
		}
	}
	return shape
}

// mulNonNeg is a*b for a, b >= 0; -1 when either is negative or the
// product does not fit in an int64.
func mulNonNeg(a, b int64) int64 {
	switch {
	case a < 0 || b < 0:
		return -1
	case a == 0 || b == 0:
		return 0
	case a > math.MaxInt64/b:
		return -1
	}
	return a * b
}
