package core

import (
	"unsafe"
)

// LatestVersion asks for the highest-numbered READY version.
const LatestVersion int64 = -1

// InferRequest is one inference request as a caller (a frontend, an
// ensemble step, a Python model's BLS call) hands it to the core,
// independent of any protocol; the core validates it into an ExecRequest.
type InferRequest struct {
	ID           string
	ModelName    string
	ModelVersion int64 // LatestVersion for "latest ready"
	Inputs       []*Tensor
	// Outputs lists the requested outputs; nil means every model output.
	Outputs []RequestedOutput
	// Parameters holds request parameters that are passed to the model
	// (string, int64, bool or float64 values).
	Parameters map[string]any
	// Priority and TimeoutMicros are the scheduler parameters (0 = default).
	Priority      uint64
	TimeoutMicros uint64
	// Correlation is the request's sequence id and START/END flags, given
	// to the backend as they are (Python's correlation_id() and flags()).
	Correlation Correlation

	// Raw marks a raw binary request (triton-inference-server/server
	// docs/protocol/extension_binary_data.md, "Raw Binary Request"): the one
	// input's shape is deduced from the model configuration.
	Raw bool

	// Trace follows the request when it is sampled for tracing; nil
	// (almost always) when it is not.
	Trace Trace

	// Queued, when set, is called once the request is in the model's
	// queue, or was refused before it: a caller that runs a stream's
	// requests concurrently hands over a sequence's next request then,
	// so the sequence batcher receives them in the stream's order (as
	// Triton's stream handler enqueues them as it reads them).
	Queued func()
}

// RequestedOutput names one output and how it is to be returned.
type RequestedOutput struct {
	Name string
	// ClassCount > 0 asks for the classification extension's top-K strings.
	ClassCount uint64
	// Into, when not nil, is where the caller wants the output's bytes: a
	// backend that can may write them there, and the response's tensor
	// then holds a prefix of Into as its Data (compare the first bytes'
	// addresses to know). It is a hint: a backend that cannot, an output
	// larger than Into, an execution concatenating several requests into
	// one batch (ONNX Runtime's), or a
	// model whose responses are cached leaves Into alone and returns the
	// output in memory of its own. The caller
	// must keep Into valid, and not touch it, until the request ends.
	Into []byte
	// IntoDevice, when not nil, is where the caller wants the output's
	// bytes in device memory (a client's CUDA region): a backend that
	// reads that device (DeviceReader) may write them there, and the
	// response's tensor then has Device set to it and no Data. The
	// core passes it on only to a version whose instances read that
	// device, for a request that runs alone; otherwise the output comes
	// back in host memory as usual.
	IntoDevice DeviceData
}

// InferResponse is one response to an InferRequest, as the caller
// receives it: the core makes it from a backend's ExecResponse.
type InferResponse struct {
	ID           string
	ModelName    string
	ModelVersion int64
	// Outputs in the order the backend produced them (for ONNX Runtime:
	// ascending byte order of output name), restricted to the requested ones.
	Outputs    []*Tensor
	Parameters map[string]any
}

// destinations are the Into of requested, in the order of names (the
// outputs a one-request batch produces); nil when none has one.
func destinations(requested []RequestedOutput, names []string) [][]byte {
	var into [][]byte
	for _, o := range requested {
		if o.Into == nil {
			continue
		}
		if into == nil {
			into = make([][]byte, len(names))
		}
		for i, n := range names {
			if n == o.Name {
				into[i] = o.Into
			}
		}
	}
	return into
}

// Overlap reports whether a and b share a byte: a destination
// (RequestedOutput.Into) that overlaps an input is left alone, so that an
// output never changes an input of its request.
func Overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// Correlation is a request's sequence id, a number or a string, and its
// sequence flags.
type Correlation struct {
	ID       uint64
	StringID string
	IsString bool
	Flags    uint32 // FlagSequenceStart | FlagSequenceEnd
}

// Missing reports whether the request names no sequence: a zero number or
// an empty string, which Triton's sequence batcher refuses ("non-zero or
// non-empty correlation ID").
func (c Correlation) Missing() bool {
	if c.IsString {
		return c.StringID == ""
	}
	return c.ID == 0
}

// Sequence is the correlation id without the flags: the same for every
// request of one sequence, so a map key for it.
func (c Correlation) Sequence() Correlation {
	c.Flags = 0
	return c
}

// Sequence flags, as TRITONSERVER_REQUEST_FLAG_SEQUENCE_*.
const (
	FlagSequenceStart uint32 = 1
	FlagSequenceEnd   uint32 = 2
)
