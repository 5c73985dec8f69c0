package protocol

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/inferd/inferd/core"
)

// HeaderForwarder is a compiled --http-header-forward-pattern or
// --grpc-header-forward-pattern (triton-inference-server/server
// docs/protocol/extension_parameters.md): the request headers (HTTP) or
// metadata keys (gRPC) it matches become string request parameters. A nil *HeaderForwarder forwards nothing.
//
// Names are lower-case. gRPC metadata keys always are; Go's net/http
// hands HTTP header names over canonicalised ("my_key" becomes "My_key"),
// not as the client wrote them, so HTTP names are lower-cased before they
// are matched and forwarded. Where Triton forwards "My-Key" as sent,
// inferd forwards "my-key"; HTTP/2 clients send lower case anyway. The
// reserved-name check then also refuses "Sequence_ID", which Triton,
// comparing case-sensitively, would forward.
type HeaderForwarder struct {
	re *regexp.Regexp
	// never holds lower-case names that are never forwarded whatever the
	// pattern says: the headers of restricted APIs.
	never map[string]bool
}

// NewHeaderForwarder compiles pattern as Triton does: RE2 syntax made
// case-insensitive by a "(?i)" prefix (which a pattern may undo with
// "(?-i)"), matching anywhere in a name. never lists names (any case)
// that are never forwarded. An empty pattern forwards nothing (nil).
func NewHeaderForwarder(pattern string, never ...string) (*HeaderForwarder, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile("(?i)" + pattern)
	if err != nil {
		return nil, fmt.Errorf("header forward pattern %q: %w", pattern, err)
	}
	f := &HeaderForwarder{re: re, never: map[string]bool{}}
	for _, n := range never {
		f.never[strings.ToLower(n)] = true
	}
	return f, nil
}

// reservedParams are the request parameters a header may not set
// (Triton's reserved parameter keys; any "triton_" name is reserved too).
var reservedParams = []string{"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers", "binary_data_output"}

// transportKey reports the gRPC keys that are no application's metadata:
// HTTP/2 pseudo-headers and grpc-go's own "grpc-" keys.
func transportKey(name []byte) bool {
	return bytes.HasPrefix(name, []byte(":")) || bytes.HasPrefix(name, []byte("grpc-"))
}

// ForwardedHeaders are the matching headers of one request (or one gRPC
// stream, whose every request gets them), ready to apply.
type ForwardedHeaders struct {
	names, values []string
	err           error
}

// Select picks the headers to forward from h (an http.Header or a gRPC
// metadata.MD): every value of every matching name, names in sorted order
// and each name's values in the order received, so that the last one
// wins. A matching reserved name (the first in sorted order) makes Apply
// fail with Triton's error. Names are lowered into a stack buffer, so a
// header that does not match allocates nothing.
func (f *HeaderForwarder) Select(h map[string][]string) ForwardedHeaders {
	var out ForwardedHeaders
	if f == nil {
		return out
	}
	var buf [64]byte
	var matched []string
	reserved := ""
	for key := range h {
		name := lower(buf[:0], key)
		if f.never[string(name)] || transportKey(name) || !f.re.Match(name) {
			continue
		}
		n := string(name)
		if slices.Contains(reservedParams, n) || strings.HasPrefix(n, "triton_") {
			if reserved == "" || n < reserved {
				reserved = n
			}
			continue
		}
		matched = append(matched, key)
	}
	if reserved != "" {
		out.err = core.Errorf(core.CodeInvalidArg, "Header '%s' is reserved for Triton usage and cannot be forwarded.", reserved)
		return out
	}
	// Two keys may lower to one name only in a hand-made map; sorting
	// the keys keeps even that deterministic.
	slices.Sort(matched)
	for _, key := range matched {
		name := string(lower(buf[:0], key))
		for _, v := range h[key] {
			out.names, out.values = append(out.names, name), append(out.values, v)
		}
	}
	return out
}

// lower appends s in lower case (ASCII; header names are ASCII tokens,
// anything else is left as it is) to dst.
func lower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// Apply adds the headers to req's parameters as strings, over any
// parameter of the same name the request carried (the headers come after
// the body, as in Triton). The error is the reserved-name one of Select.
func (fh *ForwardedHeaders) Apply(req *core.InferRequest) error {
	if fh.err != nil {
		return fh.err
	}
	if len(fh.names) == 0 {
		return nil
	}
	if req.Parameters == nil {
		req.Parameters = make(map[string]any, len(fh.names))
	}
	for i, n := range fh.names {
		req.Parameters[n] = fh.values[i]
	}
	return nil
}
