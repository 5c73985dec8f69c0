package codec

import (
	"bytes"
	"context"
	"math"
	"strconv"

	"github.com/inferd/inferd/core"
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

// Envelope is an HTTP infer request once decoded: the core request it
// carries, and what the HTTP wire adds to it, how each of its outputs
// travels back in the reply (JSON, binary or shared memory) and the
// shared memory the call holds. Between
// ParseRequestHeader and Decode it also holds the parsed JSON header. The
// core request and the decoder share its one allocation.
type Envelope struct {
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

// newEnvelope is an empty envelope for model, its core request in place.
func newEnvelope(model string) *Envelope {
	r := &Envelope{}
	r.Request = &r.req
	r.req.ModelName, r.req.ModelVersion = model, core.LatestVersion
	return r
}

// OutputKind returns how output name is to be returned; JSON for a nil r.
func (r *Envelope) OutputKind(name string) OutputKind {
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
func (r *Envelope) outputSpan(name string) *shm.Span {
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
func DecodeRequest(ctx context.Context, model string, body []byte, jsonLen int, maxInputSize int64, regions *shm.Manager) (*Envelope, error) {
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
		r := newEnvelope(model)
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
func ParseRequestHeader(model string, header []byte, maxInputSize int64, regions *shm.Manager) (*Envelope, error) {
	if maxInputSize > 0 && int64(len(header)) > maxInputSize {
		return nil, JSONTooLargeError(int64(len(header)), maxInputSize)
	}
	r := newEnvelope(model)
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
func (r *Envelope) BinarySize() int64 {
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
func (r *Envelope) Decode(ctx context.Context, body []byte) (*Envelope, error) {
	d := &r.dec
	d.body = body
	err := d.decode(ctx)
	// Clear the decoder so the parsed document is not kept alive by the
	// request; its node list goes back for the next request's parse
	// (nothing decoded refers to it: names, ids and data are copies).
	d.doc.Release()
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
	r       *Envelope
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
