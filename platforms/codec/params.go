package codec

import (
	"context"

	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// The request parameters of an infer request's JSON header.

// parameters applies the request-level "parameters" object (Triton's
// ParseJsonTritonParams in triton-inference-server/server
// src/http_server.cc), member by member in document order:
// binary_data_output here, every other key by the protocol's HTTP rules.
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

// JSONParam converts a JSON request parameter value for the protocol's reader: a
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
