package python

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/inferd/inferd/core"
)

// The JSON headers of the frames an instance and its worker exchange
// (frame.go holds the framing; shim/inferd_python_worker.py the other side).

// wireRequest is one request of an execute frame.
type wireRequest struct {
	RID           int64        `json:"rid"`
	ID            string       `json:"id"`
	CorrelationID any          `json:"correlation_id"`
	Flags         uint32       `json:"flags"`
	TimeoutUs     uint64       `json:"timeout_us"`
	Parameters    string       `json:"parameters"`
	Requested     []string     `json:"requested_outputs"`
	Inputs        []tensorDesc `json:"inputs"`
}

// wireResponse is one entry of execute_done, or a send's response.
type wireResponse struct {
	Error      *wireError   `json:"error"`
	Outputs    []tensorDesc `json:"outputs"`
	Parameters string       `json:"parameters"`
}

// wireError is a response's error: a TritonError's code and message.
type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// decode reads a worker frame's JSON header into v.
func decode(f frameIn, v any) error {
	if err := json.Unmarshal(f.header, v); err != nil {
		return core.Errorf(core.CodeInternal, "Python worker sent a malformed message: %v", err)
	}
	return nil
}

// correlationID is the request's sequence id as Python sees it: an int, or
// a str when the client gave a string.
func correlationID(c core.Correlation) any {
	if c.IsString {
		return c.StringID
	}
	return c.ID
}

// parametersJSON renders a request's model parameters as the JSON object
// text request.parameters() returns (triton-inference-server/python_backend
// README.md, "Inference Request Parameters").
func parametersJSON(p map[string]any) (string, error) {
	if len(p) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", core.Errorf(core.CodeInternal, "request parameters: %v", err)
	}
	return string(b), nil
}

// responseParameters reads a response's parameters: bool, int and str.
func responseParameters(text string) (map[string]any, error) {
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case json.Number:
			n, err := v.Int64()
			if err != nil {
				f, _ := v.Float64()
				if f != math.Trunc(f) {
					return nil, fmt.Errorf("parameter '%s' is not an integer", k)
				}
				n = int64(f)
			}
			out[k] = n
		case bool, string:
			out[k] = v
		default:
			return nil, fmt.Errorf("parameter '%s' has type %T", k, v)
		}
	}
	return out, nil
}
