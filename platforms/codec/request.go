package codec

import (
	"bytes"
	"context"
	"math"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
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

// sharedMemoryRef places a tensor in a registered shared-memory region
// (triton-inference-server/server docs/protocol/extension_shared_memory.md).
type sharedMemoryRef struct {
	Region   string
	Offset   uint64
	ByteSize uint64
}

// InferRequest is an HTTP infer request once decoded: the core request and
// how each of its outputs travels back in the reply. Between
// ParseRequestHeader and Decode it also holds the parsed JSON header. The
// core request and the decoder share its one allocation.
type InferRequest struct {
	Request *core.InferRequest
	// Kinds are the kinds of the requested outputs, Request.Outputs[i]'s at
	// index i; nil when the request listed none.
	Kinds []OutputKind
	// DefaultKind is the kind of every output the request does not list:
	// BINARY when parameters.binary_data_output is true or the request is
	// raw, JSON otherwise.
	DefaultKind OutputKind
	// Holds keeps the shared-memory spans of the outputs written to
	// regions and of the inputs read in place from the decode until the
	// response is written: the caller releases it when the call ends. A
	// failed decode holds nothing.
	Holds shm.Holds

	// spans are the regions of the outputs in shared memory,
	// Request.Outputs[i]'s at index i; nil when no output is.
	spans []*shm.Span
	req   core.InferRequest
	dec   decoder
}

// newInferRequest is an empty request for model, its core request in place.
func newInferRequest(model string) *InferRequest {
	r := &InferRequest{}
	r.Request = &r.req
	r.req.ModelName, r.req.ModelVersion = model, core.LatestVersion
	return r
}

// OutputKind returns how output name is to be returned; JSON for a nil r.
func (r *InferRequest) OutputKind(name string) OutputKind {
	if r == nil {
		return OutputJSON
	}
	if r.Request != nil {
		for i, o := range r.Request.Outputs {
			if o.Name == name && i < len(r.Kinds) {
				return r.Kinds[i]
			}
		}
	}
	return r.DefaultKind
}

// outputSpan is the region output name is written to; nil when it is not
// in shared memory.
func (r *InferRequest) outputSpan(name string) *shm.Span {
	if r == nil || r.spans == nil {
		return nil
	}
	for i, o := range r.Request.Outputs {
		if o.Name == name {
			return r.spans[i]
		}
	}
	return nil
}

// DecodeRequest decodes an infer request body for model as Triton's HTTP
// frontend does (triton-inference-server/server src/http_server.cc).
// jsonLen is the Inference-Header-Content-Length value, or -1 when the
// header is absent (the whole body is JSON); 0 means a raw binary request
// whose single unnamed input the core completes from the model
// configuration. maxInputSize (--http-max-input-size; <= 0: no limit)
// bounds the JSON text, each JSON-decoded tensor and a raw body. regions
// holds the shared-memory regions tensors may name (nil: client shared
// memory is off, and naming a region finds none).
//
// Binary tensor data is sub-sliced from body, not copied: body must stay
// unchanged while the request is in use. Inputs in shared memory are read
// in place from regions guarded against truncation
// (shm.Manager.InstallGuard) and copied out of others; the regions read in
// place and those of outputs in shared memory are held in Holds, which the
// caller releases.
//
// Decoding gives up with a CodeCancelled error once ctx is done (the
// client went away), checked every few thousand parameters, inputs,
// outputs or data elements.
func DecodeRequest(ctx context.Context, model string, body []byte, jsonLen int, maxInputSize int64, regions *shm.Manager) (*InferRequest, error) {
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
		r := newInferRequest(model)
		r.req.Raw = true
		r.req.Inputs = []*core.Tensor{{Data: body}}
		r.DefaultKind = OutputBinary
		return r, nil
	}
	r, err := ParseRequestHeader(model, body[:jsonLen], maxInputSize, regions)
	if err != nil {
		return nil, err
	}
	return r.Decode(ctx, body)
}

// ParseRequestHeader parses the JSON header of an infer request for model
// (the first Inference-Header-Content-Length bytes of the body, at least
// one), after the --http-max-input-size check of its length: then
// BinarySize tells how much binary data the header announces, and Decode
// decodes the request. It reports the same errors, in the same order, as
// DecodeRequest up to and including the JSON parse.
func ParseRequestHeader(model string, header []byte, maxInputSize int64, regions *shm.Manager) (*InferRequest, error) {
	if maxInputSize > 0 && int64(len(header)) > maxInputSize {
		return nil, JSONTooLargeError(int64(len(header)), maxInputSize)
	}
	r := newInferRequest(model)
	r.dec = decoder{model: model, off: len(header), max: maxInputSize, regions: regions, r: r}
	if err := r.dec.doc.Parse(header); err != nil {
		return nil, err
	}
	return r, nil
}

// BinarySize is the number of binary bytes the header announces: the sum
// of the inputs' "binary_data_size" parameters (saturating at MaxInt64).
// Values that are not unsigned integers count as 0; Decode reports them.
// A body longer than the header plus BinarySize fails to decode whatever
// follows, so a reader needs no more than one byte beyond it.
func (r *InferRequest) BinarySize() int64 {
	inputs, ok := r.dec.doc.Root().Find("inputs")
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

// Decode decodes the request and returns r. body is the whole request
// body: the header given to ParseRequestHeader followed by the binary
// section (or a prefix of it one byte longer than BinarySize, which
// decodes the same way). Call it once. Decoding stops once ctx is done,
// as DecodeRequest's.
func (r *InferRequest) Decode(ctx context.Context, body []byte) (*InferRequest, error) {
	d := &r.dec
	d.body = body
	err := d.decode(ctx)
	// Clear the decoder so the parsed document is not kept alive by the
	// request.
	*d = decoder{}
	if err != nil {
		r.Holds.Release()
		return nil, err
	}
	return r, nil
}

// decoder walks the JSON header in Triton's order: id, parameters, inputs
// (consuming binary blobs in order), leftover bytes, outputs.
type decoder struct {
	model string
	body  []byte
	off   int // next unread byte of the binary section
	max   int64
	// regions resolves the tensors in shared memory (nil: none can be).
	regions *shm.Manager
	r       *InferRequest
	doc     tritonjson.Document
}

func (d *decoder) decode(ctx context.Context) error {
	root := d.doc.Root()
	req := d.r.Request
	if v, ok := root.Find("id"); ok {
		id, err := v.CString()
		if err != nil {
			return wrap("Unable to parse 'id'", err)
		}
		req.ID = id
	}
	if err := d.parameters(ctx, root); err != nil {
		return err
	}
	if err := d.inputs(ctx, root); err != nil {
		return err
	}
	if d.off != len(d.body) {
		return invalidArg("unexpected additional input data for model '" + d.model + "'")
	}
	return d.outputs(ctx, root)
}

// checkEvery is how many members, inputs, outputs or data elements a
// decoder handles between two looks at its context: often enough that a
// client that went away stops a large body within milliseconds, rarely
// enough to cost nothing.
const checkEvery = 4096

// alive reports a done ctx as CodeCancelled, looking only at every
// checkEvery-th step i of a loop.
func alive(ctx context.Context, i int) error {
	if i%checkEvery != checkEvery-1 {
		return nil
	}
	return cancelled(ctx)
}

// cancelled is the error for a done ctx: the request's client went away
// (or its deadline passed) while its body was decoded.
func cancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return core.Errorf(core.CodeCancelled, "request cancelled while decoding its body: %v", err)
	}
	return nil
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
// src/http_server.cc), member by member in document order:
// binary_data_output here, every other key by v2's HTTP rules.
func (d *decoder) parameters(ctx context.Context, root tritonjson.Value) error {
	params, ok := root.Find("parameters")
	if !ok {
		return nil
	}
	if !params.IsObject() {
		return internal("failed to get request params.: attempt to get members for non-object")
	}
	pr := protocol.ParamReader{Rules: protocol.HTTPRules, Request: d.r.Request}
	// Triton lists member names as C strings and looks each one up again,
	// so a name with a NUL finds the member of its prefix (the first
	// member of that name, for every occurrence). The index makes those
	// lookups cost constant time: a scan per member would be quadratic in
	// a client's member count.
	index := params.IndexMembers()
	if n := index.Names(); n > presizeParams && d.r.Request.Parameters == nil {
		// One entry at most per distinct name: sized at once rather than
		// grown through rehashes, which cost a third of the memory and
		// time of a request of 100,000 parameters. Left nil, as v2 leaves
		// it, when no member was a model parameter.
		d.r.Request.Parameters = make(map[string]any, n)
		defer func() {
			if len(d.r.Request.Parameters) == 0 {
				d.r.Request.Parameters = nil
			}
		}()
	}
	i := 0
	for key := range params.Members() {
		if err := alive(ctx, i); err != nil {
			return err
		}
		i++
		name := cstring(key)
		v, ok := index.Find(name)
		if name == "binary_data_output" {
			if !ok {
				return wrap("Unable to parse 'binary_data_output'", internal(tritonjson.MsgMissingMember(name)))
			}
			b, err := v.Bool()
			if err != nil {
				return wrap("Unable to parse 'binary_data_output'", err)
			}
			d.r.DefaultKind = OutputJSON
			if b {
				d.r.DefaultKind = OutputBinary
			}
			continue
		}
		if !ok {
			return pr.Missing(name)
		}
		if err := pr.Read(name, requestParam(v)); err != nil {
			return err
		}
	}
	return nil
}

// presizeParams is the most distinct parameter names left to v2 to store
// in a map it grows.
const presizeParams = 64

// requestParam is JSONParam with a string cut at a NUL, as Triton passes
// an infer request's string parameters on as C strings.
func requestParam(v tritonjson.Value) protocol.Param {
	if v.IsString() {
		s, _ := v.CString()
		return protocol.Param{Kind: protocol.ParamString, String: s}
	}
	return JSONParam(v)
}

// JSONParam converts a JSON request parameter value for v2's reader: a
// string whole, an integer as an int64 when it fits and a uint64
// otherwise, any other number as a double, and null, an array or an
// object as a parameter with nothing set (which every rule refuses).
func JSONParam(v tritonjson.Value) protocol.Param {
	switch v.Kind() {
	case tritonjson.KindString:
		s, _ := v.Str()
		return protocol.Param{Kind: protocol.ParamString, String: s}
	case tritonjson.KindBool:
		b, _ := v.Bool()
		return protocol.Param{Kind: protocol.ParamBool, Bool: b}
	case tritonjson.KindNumber:
		if i, err := v.Int64(); err == nil {
			return protocol.Param{Kind: protocol.ParamInt64, Int64: i}
		}
		if u, err := v.Uint64(); err == nil {
			return protocol.Param{Kind: protocol.ParamUint64, Uint64: u}
		}
		f, _ := v.Float64()
		return protocol.Param{Kind: protocol.ParamDouble, Double: f}
	}
	return protocol.Param{}
}

// inputs decodes the "inputs" array in order.
func (d *decoder) inputs(ctx context.Context, root tritonjson.Value) error {
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
	req := d.r.Request
	var names protocol.Names
	for i, in := range arr.Elements() {
		if err := alive(ctx, i); err != nil {
			return err
		}
		t := &tensors[i]
		if err := d.input(ctx, in, t, &shapes, &names); err != nil {
			return err
		}
		ptrs = append(ptrs, t)
	}
	req.Inputs = ptrs
	return nil
}

// input decodes one input object into t. names holds the input names decoded so
// far (for the duplicate-name check).
func (d *decoder) input(ctx context.Context, in tritonjson.Value, t *core.Tensor, shapes *[]int64, names *protocol.Names) error {
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
		return protocol.DuplicateInput(d.r.Request.ID, t.Name)
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
		// In place, held until the call ends, or copied out
		// (shm.Manager.InputTensor). The core checks the size against the
		// shape, as Triton's does.
		ref, err := parseSharedMemory(params)
		if err != nil {
			return err
		}
		held, err := d.regions.InputTensor(t, ref.Region, ref.Offset, ref.ByteSize)
		if held != nil {
			d.r.Holds.AddInput(held)
		}
		return err
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
	t.Data, err = d.jsonTensor(ctx, t.Name, t.DataType, count, data)
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
		return invalidArg(core.RequestPrefix(d.r.Request.ID) + "input byte size mismatch for input '" + t.Name +
			"' for model '" + d.model + "'. Expected " + strconv.FormatInt(want, 10) + ", got " + strconv.Itoa(len(t.Data)))
	}
	return nil
}

func byteSizeOverflowError(name string, count int64, size int) error {
	return invalidArg("byte size overflow for input '" + name + "': element count " + strconv.FormatInt(count, 10) +
		" times element size " + strconv.Itoa(size) + " exceeds maximum size of " + strconv.FormatInt(math.MaxInt64, 10))
}

// parseSharedMemory reads shared_memory_region / _offset / _byte_size.
func parseSharedMemory(params tritonjson.Value) (sharedMemoryRef, error) {
	var ref sharedMemoryRef
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
func (d *decoder) outputs(ctx context.Context, root tritonjson.Value) error {
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
	req := d.r.Request
	req.Outputs = make([]core.RequestedOutput, 0, n)
	kinds := make([]OutputKind, 0, n)
	var names protocol.Names
	for i, o := range arr.Elements() {
		if err := alive(ctx, i); err != nil {
			return err
		}
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
		out := core.RequestedOutput{Name: cstring(nb)}
		if names.Add(out.Name) {
			return protocol.DuplicateOutput(out.Name)
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
			span, err := d.regions.Acquire(ref.Region, ref.Offset, ref.ByteSize)
			if err != nil {
				return err
			}
			d.r.Holds.Add(span)
			if d.r.spans == nil {
				d.r.spans = make([]*shm.Span, n)
			}
			// A guarded region takes the output in place where the
			// backend can write it there.
			out.Into, _ = span.Data()
			if span.Kind() == shm.CUDA {
				out.IntoDevice = span // a GPU backend writes it there
			}
			d.r.spans[len(req.Outputs)] = span
			req.Outputs = append(req.Outputs, out)
			kinds = append(kinds, OutputSharedMemory)
			continue
		}
		kind := OutputJSON
		if v, ok := params.Find("binary_data"); ok {
			b, err := v.Bool()
			if err != nil {
				return wrap("Unable to parse 'binary_data'", err)
			}
			if b {
				kind = OutputBinary
			}
		}
		req.Outputs = append(req.Outputs, out)
		kinds = append(kinds, kind)
	}
	d.r.Kinds = kinds
	return nil
}
