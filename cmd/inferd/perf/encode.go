package perf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

// reqBody is one infer request, encoded once before the load starts and
// then sent many times. header is shared read-only by every sender.
type reqBody struct {
	data   []byte
	header http.Header
}

type inputJSON struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters *sizeParam      `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

type sizeParam struct {
	BinaryDataSize int `json:"binary_data_size"`
}

type outputJSON struct {
	Name       string `json:"name"`
	Parameters struct {
		BinaryData bool `json:"binary_data"`
	} `json:"parameters"`
}

type requestJSON struct {
	Inputs  []inputJSON  `json:"inputs"`
	Outputs []outputJSON `json:"outputs,omitempty"`
}

// halfType reports datatypes the v2 JSON encoding cannot carry.
func halfType(dt string) bool { return dt == "FP16" || dt == "BF16" }

// encodeRequest builds the infer request for one set of input tensors.
// binary uses the binary tensor extension for every input and output;
// otherwise tensors travel as JSON, except FP16/BF16 outputs, which the
// protocol only returns in binary.
func encodeRequest(inputs []tensorMeta, tensors []tensorData, outputs []tensorMeta, binaryData bool) (reqBody, error) {
	if len(inputs) != len(tensors) {
		return reqBody{}, errors.New("internal error: inputs and tensors differ in number")
	}
	var req requestJSON
	var blobs []byte
	for i, in := range inputs {
		t := tensors[i]
		ij := inputJSON{Name: in.Name, Shape: t.shape, Datatype: in.Datatype}
		if binaryData {
			ij.Parameters = &sizeParam{BinaryDataSize: len(t.raw)}
			blobs = append(blobs, t.raw...)
		} else {
			if halfType(in.Datatype) {
				return reqBody{}, fmt.Errorf("input %s is %s, which JSON tensors cannot carry: drop --protocol-json", in.Name, in.Datatype)
			}
			d, err := appendJSONData(nil, in.Datatype, t.raw)
			if err != nil {
				return reqBody{}, fmt.Errorf("input %s: %w", in.Name, err)
			}
			ij.Data = d
		}
		req.Inputs = append(req.Inputs, ij)
	}
	anyHalf := false
	for _, o := range outputs {
		anyHalf = anyHalf || halfType(o.Datatype)
	}
	// Listing outputs is only needed to get binary ones; a JSON request
	// without "outputs" gets every output as JSON.
	if binaryData || anyHalf {
		for _, o := range outputs {
			oj := outputJSON{Name: o.Name}
			oj.Parameters.BinaryData = binaryData || halfType(o.Datatype)
			req.Outputs = append(req.Outputs, oj)
		}
	}
	head, err := json.Marshal(req)
	if err != nil {
		return reqBody{}, fmt.Errorf("encoding the request: %w", err)
	}
	h := http.Header{}
	if binaryData {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Inference-Header-Content-Length", strconv.Itoa(len(head)))
		return reqBody{data: append(head, blobs...), header: h}, nil
	}
	h.Set("Content-Type", "application/json")
	return reqBody{data: head, header: h}, nil
}

// appendJSONData renders the wire encoding raw of datatype dt as a flat
// JSON array.
func appendJSONData(b []byte, dt string, raw []byte) ([]byte, error) {
	le := binary.LittleEndian
	b = append(b, '[')
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	if dt == "BYTES" {
		for len(raw) > 0 {
			if len(raw) < 4 {
				return nil, errors.New("truncated BYTES element")
			}
			n := le.Uint32(raw)
			raw = raw[4:]
			if uint64(n) > uint64(len(raw)) {
				return nil, errors.New("truncated BYTES element")
			}
			s, _ := json.Marshal(string(raw[:n])) // invalid UTF-8 becomes U+FFFD: JSON cannot say more
			sep()
			b = append(b, s...)
			raw = raw[n:]
		}
		return append(b, ']'), nil
	}
	size := elemSize(dt)
	if size <= 0 || halfType(dt) {
		return nil, fmt.Errorf("datatype %s cannot be sent as JSON", dt)
	}
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("%d bytes are not a whole number of %s elements", len(raw), dt)
	}
	for ; len(raw) > 0; raw = raw[size:] {
		sep()
		switch dt {
		case "BOOL":
			b = strconv.AppendBool(b, raw[0] != 0)
		case "INT8":
			b = strconv.AppendInt(b, int64(int8(raw[0])), 10)
		case "INT16":
			b = strconv.AppendInt(b, int64(int16(le.Uint16(raw))), 10)
		case "INT32":
			b = strconv.AppendInt(b, int64(int32(le.Uint32(raw))), 10)
		case "INT64":
			b = strconv.AppendInt(b, int64(le.Uint64(raw)), 10)
		case "UINT8":
			b = strconv.AppendUint(b, uint64(raw[0]), 10)
		case "UINT16":
			b = strconv.AppendUint(b, uint64(le.Uint16(raw)), 10)
		case "UINT32":
			b = strconv.AppendUint(b, uint64(le.Uint32(raw)), 10)
		case "UINT64":
			b = strconv.AppendUint(b, le.Uint64(raw), 10)
		case "FP32":
			f := math.Float32frombits(le.Uint32(raw))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, errors.New("NaN or Inf cannot be sent as JSON")
			}
			b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
		case "FP64":
			f := math.Float64frombits(le.Uint64(raw))
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, errors.New("NaN or Inf cannot be sent as JSON")
			}
			b = strconv.AppendFloat(b, f, 'g', -1, 64)
		}
	}
	return append(b, ']'), nil
}

// shmParams are the shared-memory extension's tensor parameters
// (triton-inference-server/server docs/protocol/extension_shared_memory.md).
type shmParams struct {
	Region   string `json:"shared_memory_region"`
	ByteSize int64  `json:"shared_memory_byte_size"`
	Offset   int64  `json:"shared_memory_offset,omitempty"`
}

func newShmParams(r shmRef) *shmParams {
	return &shmParams{Region: r.region, ByteSize: r.size, Offset: r.offset}
}

// encodeShmRequest builds an infer request whose inputs are read from, and
// whose outputs are written to, registered system regions: a JSON body
// with no tensor data in it.
func encodeShmRequest(inputs []tensorMeta, tensors []tensorData, in []shmRef, outputs []tensorMeta, out []shmRef) (reqBody, error) {
	type inputShm struct {
		Name       string     `json:"name"`
		Shape      []int64    `json:"shape"`
		Datatype   string     `json:"datatype"`
		Parameters *shmParams `json:"parameters"`
	}
	type outputShm struct {
		Name       string     `json:"name"`
		Parameters *shmParams `json:"parameters"`
	}
	var req struct {
		Inputs  []inputShm  `json:"inputs"`
		Outputs []outputShm `json:"outputs,omitempty"`
	}
	if len(inputs) != len(tensors) || len(inputs) != len(in) || len(outputs) != len(out) {
		return reqBody{}, errors.New("internal error: tensors and regions differ in number")
	}
	for i, meta := range inputs {
		req.Inputs = append(req.Inputs, inputShm{Name: meta.Name, Shape: tensors[i].shape, Datatype: meta.Datatype, Parameters: newShmParams(in[i])})
	}
	for i, meta := range outputs {
		req.Outputs = append(req.Outputs, outputShm{Name: meta.Name, Parameters: newShmParams(out[i])})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return reqBody{}, fmt.Errorf("encoding the request: %w", err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return reqBody{data: body, header: h}, nil
}
