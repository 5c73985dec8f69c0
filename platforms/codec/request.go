package codec

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
)

// OutputKind says how one output travels back in the response.
type OutputKind uint8

// Output kinds, as Triton's HTTP frontend assigns them from
// binary_data_output and each output's parameters (ParseJsonTritonIO in
// triton-inference-server/server src/http_server.cc).
const (
	OutputJSON         OutputKind = iota // a "data" array in the JSON header
	OutputBinary                         // a blob after the JSON header
	OutputSharedMemory                   // written to a shared-memory region; header only
)

func (k OutputKind) String() string {
	switch k {
	case OutputJSON:
		return "JSON"
	case OutputBinary:
		return "BINARY"
	case OutputSharedMemory:
		return "SHM"
	}
	return "OutputKind(" + strconv.Itoa(int(k)) + ")"
}

// SharedMemoryRef places a tensor in a registered shared-memory region
// (triton-inference-server/server docs/protocol/extension_shared_memory.md).
type SharedMemoryRef struct {
	Region   string
	Offset   uint64
	ByteSize uint64
}

// RequestedOutput is one entry of the request's "outputs" array.
type RequestedOutput struct {
	Name string
	Kind OutputKind
	// ClassCount > 0 asks for the classification extension's top-K.
	ClassCount uint64
	// SharedMemory is set for OutputSharedMemory.
	SharedMemory *SharedMemoryRef
}

// Sequence holds the sequence-batcher request parameters
// (triton-inference-server/server docs/protocol/extension_sequence.md).
// A zero ID (or empty StringID) means "not part of a sequence".
type Sequence struct {
	ID       uint64
	StringID string
	IsString bool // sequence_id was given as a string
	Start    bool
	End      bool
}

// Apply gives req the sequence's correlation id and flags.
func (s Sequence) Apply(req *core.InferRequest) {
	req.Correlation = core.Correlation{ID: s.ID, StringID: s.StringID, IsString: s.IsString}
	if s.Start {
		req.Correlation.Flags |= core.FlagSequenceStart
	}
	if s.End {
		req.Correlation.Flags |= core.FlagSequenceEnd
	}
}

// Envelope is a decoded infer request together with what the response
// encoder needs to know about it.
type Envelope struct {
	Request *core.InferRequest
	// Outputs are the request's "outputs" entries in order; nil when the
	// request listed none.
	Outputs []RequestedOutput
	// DefaultKind is the kind of every output not listed in Outputs:
	// BINARY when parameters.binary_data_output is true or the request is
	// raw, JSON otherwise.
	DefaultKind OutputKind
	// Sequence is parsed from the request parameters.
	Sequence Sequence
}

// OutputKind returns how output name is to be returned.
func (e *Envelope) OutputKind(name string) OutputKind {
	if e == nil {
		return OutputJSON
	}
	for i := range e.Outputs {
		if e.Outputs[i].Name == name {
			return e.Outputs[i].Kind
		}
	}
	return e.DefaultKind
}

// DecodeRequest decodes an infer request body for model as Triton's HTTP
// frontend does (triton-inference-server/server src/http_server.cc).
// jsonLen is the Inference-Header-Content-Length value, or -1 when the
// header is absent (the whole body is JSON); 0 means a raw binary request
// whose single unnamed input the core completes from the model
// configuration. maxInputSize (--http-max-input-size; <= 0: no limit)
// bounds the JSON text, each JSON-decoded tensor and a raw body.
//
// Binary tensor data is sub-sliced from body, not copied: body must stay
// unchanged while the request is in use.
func DecodeRequest(model string, body []byte, jsonLen int, maxInputSize int64) (*Envelope, error) {
	if jsonLen < 0 {
		jsonLen = len(body)
	}
	if jsonLen > len(body) {
		return nil, invalidArg("inference header size should be in range (0, " + strconv.Itoa(len(body)) + "), got: " + strconv.Itoa(jsonLen))
	}
	if jsonLen == 0 {
		if maxInputSize > 0 && int64(len(body)) > maxInputSize {
			return nil, RawTooLargeError(int64(len(body)), maxInputSize)
		}
		st := &RequestHeader{}
		env := &st.env
		env.Request = &st.req
		st.req.ModelName, st.req.ModelVersion = model, core.LatestVersion
		env.Request.Raw = true
		env.Request.Inputs = []*core.Tensor{{Data: body}}
		env.DefaultKind = OutputBinary
		return env, nil
	}
	h, err := ParseRequestHeader(model, body[:jsonLen], maxInputSize)
	if err != nil {
		return nil, err
	}
	return h.Decode(body)
}

// RequestHeader is the parsed JSON header of an infer request whose binary
// section is still to be read: ParseRequestHeader, then BinarySize to know
// how much binary data the header announces, then Decode. The envelope,
// its request and the decoder share this one allocation.
type RequestHeader struct {
	env Envelope
	req core.InferRequest
	dec decoder
}

// ParseRequestHeader parses the JSON header of an infer request for model
// (the first Inference-Header-Content-Length bytes of the body, at least
// one), after the --http-max-input-size check of its length. It reports the
// same errors, in the same order, as DecodeRequest up to and including the
// JSON parse.
func ParseRequestHeader(model string, header []byte, maxInputSize int64) (*RequestHeader, error) {
	if maxInputSize > 0 && int64(len(header)) > maxInputSize {
		return nil, JSONTooLargeError(int64(len(header)), maxInputSize)
	}
	h := &RequestHeader{}
	h.env.Request = &h.req
	h.req.ModelName, h.req.ModelVersion = model, core.LatestVersion
	h.dec = decoder{model: model, off: len(header), max: maxInputSize, env: &h.env}
	if err := h.dec.doc.parse(header); err != nil {
		return nil, err
	}
	return h, nil
}

// BinarySize is the number of binary bytes the header announces: the sum
// of the inputs' "binary_data_size" parameters (saturating at MaxInt64).
// Values that are not unsigned integers count as 0; Decode reports them.
// A body longer than the header plus BinarySize fails to decode whatever
// follows, so a reader needs no more than one byte beyond it.
func (h *RequestHeader) BinarySize() int64 {
	inputs, ok := h.dec.doc.Root().Find("inputs")
	if !ok || !inputs.IsArray() {
		return 0
	}
	var total uint64
	for _, in := range inputs.Elements() {
		params, ok := in.Find("parameters")
		if !ok {
			continue
		}
		v, ok := params.Find("binary_data_size")
		if !ok {
			continue
		}
		if n, err := v.Uint64(); err == nil {
			total += n
			if total < n || total > math.MaxInt64 {
				return math.MaxInt64
			}
		}
	}
	return int64(total)
}

// Decode decodes the request. body is the whole request body: the header
// given to ParseRequestHeader followed by the binary section (or a prefix
// of it one byte longer than BinarySize, which decodes the same way). Call
// it once.
func (h *RequestHeader) Decode(body []byte) (*Envelope, error) {
	d := &h.dec
	d.body = body
	err := d.decode()
	// Clear the decoder so the parsed document is not kept alive by the
	// request.
	*d = decoder{}
	if err != nil {
		return nil, err
	}
	return &h.env, nil
}

// decoder walks the JSON header in Triton's order: id, parameters, inputs
// (consuming binary blobs in order), leftover bytes, outputs.
type decoder struct {
	model string
	body  []byte
	off   int // next unread byte of the binary section
	max   int64
	env   *Envelope
	doc   Document
}

func (d *decoder) decode() error {
	root := d.doc.Root()
	req := d.env.Request
	if v, ok := root.Find("id"); ok {
		id, err := v.CString()
		if err != nil {
			return wrap("Unable to parse 'id'", err)
		}
		req.ID = id
	}
	if err := d.parameters(root); err != nil {
		return err
	}
	if err := d.inputs(root); err != nil {
		return err
	}
	if d.off != len(d.body) {
		return invalidArg("unexpected additional input data for model '" + d.model + "'")
	}
	return d.outputs(root)
}

// cstring is what survives of a key Triton handles as a C string.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// parameters applies the request-level "parameters" object (Triton's
// ParseJsonTritonParams in triton-inference-server/server
// src/http_server.cc), member by
// member in document order.
func (d *decoder) parameters(root Value) error {
	params, ok := root.Find("parameters")
	if !ok {
		return nil
	}
	if !params.IsObject() {
		return typeError("failed to get request params.: attempt to get members for non-object")
	}
	req, seq := d.env.Request, &d.env.Sequence
	for key := range params.Members() {
		// Triton lists member names as C strings and looks each one up
		// again, so a name with a NUL finds the member of its prefix.
		name := cstring(key)
		switch {
		case name == "sequence_id":
			if u, err := params.MemberUint64(name); err == nil {
				seq.ID, seq.StringID, seq.IsString = u, "", false
				continue
			}
			s, err := params.MemberString(name)
			if err != nil {
				return wrap("Unable to parse 'sequence_id'", err)
			}
			seq.ID, seq.StringID, seq.IsString = 0, cstring(s), true
		case name == "sequence_start":
			b, err := params.MemberBool(name)
			if err != nil {
				return wrap("Unable to parse 'sequence_start'", err)
			}
			seq.Start = b
		case name == "sequence_end":
			b, err := params.MemberBool(name)
			if err != nil {
				return wrap("Unable to parse 'sequence_end'", err)
			}
			seq.End = b
		case name == "priority":
			p, err := params.MemberUint64(name)
			if err != nil {
				return wrap("Unable to parse 'priority'", err)
			}
			req.Priority = p
		case name == "timeout":
			t, err := params.MemberUint64(name)
			if err != nil {
				return wrap("Unable to parse 'timeout'", err)
			}
			req.TimeoutMicros = t
		case name == "binary_data_output":
			b, err := params.MemberBool(name)
			if err != nil {
				return wrap("Unable to parse 'binary_data_output'", err)
			}
			d.env.DefaultKind = OutputJSON
			if b {
				d.env.DefaultKind = OutputBinary
			}
		case strings.HasPrefix(name, "triton_"):
			return invalidArg("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.")
		default:
			v, ok := params.Find(name)
			if !ok {
				return typeError("parameter key '" + name + "' was not found in the JSON")
			}
			var val any
			switch {
			case v.IsString():
				s, _ := v.CString()
				val = s
			case v.IsInt64():
				val, _ = v.Int64()
			case v.IsBool():
				val, _ = v.Bool()
			case v.IsNumber():
				val, _ = v.Float64()
			default:
				return invalidArg("parameter '" + name + "' has invalid type. It should be either 'int', 'bool', or 'string'.")
			}
			if req.Parameters == nil {
				req.Parameters = make(map[string]any)
			}
			req.Parameters[name] = val
		}
	}
	seq.Apply(req)
	return nil
}

// inputs decodes the "inputs" array in order.
func (d *decoder) inputs(root Value) error {
	arr, err := root.MemberArray("inputs")
	if err != nil {
		return wrap("Unable to parse 'inputs'", err)
	}
	n := arr.Len()
	if n == 0 {
		return nil
	}
	// One allocation for the tensors and one for all shapes.
	dims := 0
	for _, in := range arr.Elements() {
		if s, ok := in.Find("shape"); ok {
			dims += s.Len()
		}
	}
	tensors := make([]core.Tensor, n)
	ptrs := make([]*core.Tensor, 0, n)
	shapes := make([]int64, 0, dims)
	req := d.env.Request
	var names Names
	for i, in := range arr.Elements() {
		t := &tensors[i]
		if err := d.input(in, t, &shapes, &names); err != nil {
			return err
		}
		ptrs = append(ptrs, t)
	}
	req.Inputs = ptrs
	return nil
}

// input decodes one input object into t. names holds the input names decoded so
// far (for the duplicate-name check).
func (d *decoder) input(in Value, t *core.Tensor, shapes *[]int64, names *Names) error {
	// Exactly one of data / binary_data_size / shared_memory_region.
	hasData := in.Has("data")
	params, hasParams := in.Find("parameters")
	hasBinary := hasParams && params.Has("binary_data_size")
	hasSHM := hasParams && params.Has("shared_memory_region")
	if set := b2i(hasData) + b2i(hasBinary) + b2i(hasSHM); set != 1 {
		msg := "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But"
		if set == 0 {
			msg += " no field is set"
		} else {
			msg += " set"
			if hasData {
				msg += " 'data'"
			}
			if hasBinary {
				msg += " 'binary_data_size'"
			}
			if hasSHM {
				msg += " 'shared_memory_region'"
			}
		}
		return invalidArg(msg)
	}

	name, err := in.MemberString("name")
	if err != nil {
		return wrap("Unable to parse 'name'", err)
	}
	t.Name = cstring(name)
	dt, err := in.MemberString("datatype")
	if err != nil {
		return wrap("Unable to parse 'datatype'", err)
	}
	t.DataType = parseDataType(dt)
	shape, err := in.MemberArray("shape")
	if err != nil {
		return wrap("Unable to parse 'shape'", err)
	}
	start := len(*shapes)
	for _, e := range shape.Elements() {
		u, err := e.Uint64()
		if err != nil {
			return wrap("Unable to parse 'shape'", err)
		}
		*shapes = append(*shapes, int64(u))
	}
	t.Shape = (*shapes)[start:len(*shapes):len(*shapes)]
	if names.Add(t.Name) {
		return DuplicateInput(d.env.Request.ID, t.Name)
	}

	if hasBinary {
		v, _ := params.Find("binary_data_size")
		size, err := v.Uint64()
		if err != nil {
			return wrap("Unable to parse 'binary_data_size'", err)
		}
		if rem := uint64(len(d.body) - d.off); size > rem {
			return invalidArg("unexpected size for input '" + t.Name + "', expecting " +
				strconv.FormatUint(size-rem, 10) + " additional bytes for model '" + d.model + "'")
		}
		end := d.off + int(size)
		t.Data = d.body[d.off:end:end]
		d.off = end
		return d.checkBinarySize(t)
	}
	if hasSHM {
		ref, err := parseSharedMemory(params)
		if err != nil {
			return err
		}
		// No region can be registered yet (client shared memory is off).
		return UnknownRegion(ref.Region)
	}

	count := core.ElementCount(t.Shape)
	if count < 0 {
		return shapeOverflowError(t)
	}
	if count == 0 {
		t.Data = []byte{}
		return nil
	}
	data, err := in.MemberArray("data")
	if err != nil {
		return wrap("Unable to parse 'data'", err)
	}
	t.Data, err = d.jsonTensor(t.Name, t.DataType, count, data)
	return err
}

// parseDataType maps a protocol datatype name; Triton reads it as a C
// string, so anything after a NUL is ignored.
func parseDataType(b []byte) core.DataType {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	// Compare without converting, so the hot path does not allocate.
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		if string(b) == dt.String() {
			return dt
		}
	}
	return core.TypeInvalid
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func shapeOverflowError(t *core.Tensor) error {
	return invalidArg("invalid shape for input '" + t.Name + "': shape " + core.ShapeString(t.Shape) +
		" causes total element count to exceed maximum size of " + strconv.FormatInt(math.MaxInt64, 10))
}

// checkBinarySize rejects binary data whose size disagrees with the shape,
// with the core's message, so that every decoded fixed-size tensor is
// consistent. BYTES and unknown datatypes are left to the core.
func (d *decoder) checkBinarySize(t *core.Tensor) error {
	size := t.DataType.ByteSize()
	if size == 0 {
		return nil
	}
	count := core.ElementCount(t.Shape)
	if count < 0 {
		return shapeOverflowError(t)
	}
	if count > math.MaxInt64/int64(size) {
		return byteSizeOverflowError(t.Name, count, size)
	}
	if want := count * int64(size); want != int64(len(t.Data)) {
		return invalidArg(core.RequestPrefix(d.env.Request.ID) + "input byte size mismatch for input '" + t.Name +
			"' for model '" + d.model + "'. Expected " + strconv.FormatInt(want, 10) + ", got " + strconv.Itoa(len(t.Data)))
	}
	return nil
}

func byteSizeOverflowError(name string, count int64, size int) error {
	return invalidArg("byte size overflow for input '" + name + "': element count " + strconv.FormatInt(count, 10) +
		" times element size " + strconv.Itoa(size) + " exceeds maximum size of " + strconv.FormatInt(math.MaxInt64, 10))
}

// parseSharedMemory reads shared_memory_region / _offset / _byte_size.
func parseSharedMemory(params Value) (SharedMemoryRef, error) {
	var ref SharedMemoryRef
	if v, ok := params.Find("shared_memory_region"); ok {
		s, err := v.CString()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_region'", err)
		}
		ref.Region = s
	}
	if v, ok := params.Find("shared_memory_offset"); ok {
		u, err := v.Uint64()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_offset'", err)
		}
		ref.Offset = u
	}
	if v, ok := params.Find("shared_memory_byte_size"); ok {
		u, err := v.Uint64()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_byte_size'", err)
		}
		ref.ByteSize = u
	}
	return ref, nil
}

// outputs decodes the optional "outputs" array.
func (d *decoder) outputs(root Value) error {
	if !root.Has("outputs") {
		return nil
	}
	arr, err := root.MemberArray("outputs")
	if err != nil {
		return wrap("Unable to parse 'outputs'", err)
	}
	n := arr.Len()
	if n == 0 {
		return nil
	}
	outs := make([]RequestedOutput, 0, n)
	var names Names
	for _, o := range arr.Elements() {
		params, hasParams := o.Find("parameters")
		if hasParams && params.Has("shared_memory_region") {
			if params.Has("classification") {
				return invalidArg("Output can't set both 'shared_memory_region' and 'classification'")
			}
			if v, ok := params.Find("binary_data"); ok {
				b, err := v.Bool()
				if err != nil {
					return wrap("Unable to set 'binary_data'", err)
				}
				if b {
					return invalidArg("Output can't set both 'shared_memory_region' and 'binary_data'")
				}
			}
		}
		nb, err := o.MemberString("name")
		if err != nil {
			return wrap("Unable to parse 'name'", err)
		}
		out := RequestedOutput{Name: cstring(nb)}
		if names.Add(out.Name) {
			return DuplicateOutput(out.Name)
		}
		if v, ok := params.Find("classification"); ok {
			k, err := v.Uint64()
			if err != nil {
				return wrap("Unable to set 'classification'", err)
			}
			out.ClassCount = k
		}
		if hasParams && params.Has("shared_memory_region") {
			ref, err := parseSharedMemory(params)
			if err != nil {
				return err
			}
			return UnknownRegion(ref.Region)
		}
		if v, ok := params.Find("binary_data"); ok {
			b, err := v.Bool()
			if err != nil {
				return wrap("Unable to parse 'binary_data'", err)
			}
			if b {
				out.Kind = OutputBinary
			}
		}
		outs = append(outs, out)
	}
	d.env.Outputs = outs
	req := d.env.Request
	req.Outputs = make([]core.RequestedOutput, len(outs))
	for i, o := range outs {
		req.Outputs[i] = core.RequestedOutput{Name: o.Name, ClassCount: o.ClassCount}
	}
	return nil
}
