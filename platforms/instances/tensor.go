package instances

import (
	"slices"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// rowShape is one instance's shape for input in: its dims when all are
// fixed (a row may then be nested or flat), else the nesting of the JSON
// arrays, which must agree between instances.
func rowShape(in *modelconfig.ModelInput, rows []tritonjson.Value) ([]int64, *Error) {
	dims := in.GetDims()
	if !slices.ContainsFunc(dims, func(d int64) bool { return d < 0 }) {
		return slices.Clone(dims), nil
	}
	var shape []int64
	for i, row := range rows {
		s := jsonShape(row)
		if len(s) == 0 && len(dims) == 1 {
			s = []int64{1} // a scalar for a one-dimensional input
		}
		if i == 0 {
			shape = s
		} else if !slices.Equal(shape, s) {
			return nil, &Error{Kind: ShapeMismatch, Input: in.GetName(), Instance: i, Shape: s, First: shape}
		}
	}
	return shape, nil
}

// jsonShape follows the first element of nested arrays; ragged arrays are
// caught later by the element count check.
func jsonShape(v tritonjson.Value) []int64 {
	var shape []int64
	for v.IsArray() {
		shape = append(shape, int64(v.Len()))
		if v.Len() == 0 {
			break
		}
		v, _ = v.Index(0)
	}
	return shape
}

// checkCounts makes sure every row holds as many values as its shape, so a
// client mistake is a 400 here rather than the data conversion's 500.
func checkCounts(name string, shape []int64, rows []tritonjson.Value) *Error {
	want := int64(1)
	for _, d := range shape {
		want *= d
	}
	for i, row := range rows {
		if n := tokens(row); n != want {
			return &Error{Kind: CountMismatch, Input: name, Instance: i, Count: n, Want: want, Shape: shape}
		}
	}
	return nil
}

// tokens counts the JSON tokens of v but brackets and braces: the
// values of nested arrays, and an object's names and values.
func tokens(v tritonjson.Value) int64 {
	switch v.Kind() {
	case tritonjson.KindArray:
		var n int64
		w := v.ArrayWalk()
		for e, ok := w.Next(); ok; e, ok = w.Next() {
			if e.IsObject() {
				n += tokens(e)
			} else if !e.IsArray() {
				n++
			}
		}
		return n
	case tritonjson.KindObject:
		var n int64
		for _, m := range v.Members() {
			n += 1 + tokens(m)
		}
		return n
	}
	return 1
}

// tensorData converts an input's rows, count elements of dt in all, to
// the tensor's bytes: little endian, BYTES as 4-byte lengths and bytes.
// Elements convert, and fail, as a v2 request's "data" (platforms/codec),
// within --http-max-input-size maxInput.
func tensorData(name string, dt core.DataType, count int64, rows []tritonjson.Value, maxInput int64) ([]byte, error) {
	if count == 0 {
		return []byte{}, nil // a v2 body's data is not read either
	}
	var data []byte
	if size := int64(dt.ByteSize()); size > 0 {
		if maxInput > 0 && count > maxInput/size {
			return nil, jsonInputTooLarge(name, count*size, maxInput)
		}
		data = make([]byte, 0, count*size)
	}
	for _, row := range rows {
		var err error
		if data, err = appendRow(data, name, dt, row, 0); err != nil {
			return nil, err
		}
	}
	if maxInput > 0 && int64(len(data)) > maxInput {
		return nil, jsonInputTooLarge(name, int64(len(data)), maxInput) // BYTES
	}
	return data, nil
}

// appendRow appends one row's elements: each innermost array, or a scalar,
// converted by codec.GenerateTensorData. depth is the number of arrays
// around row within its row: with the "data" array of a v2 body around
// them, codec.MaxDataNesting arrays are too many, checked in document
// order as a v2 body's are.
func appendRow(b []byte, name string, dt core.DataType, row tritonjson.Value, depth int) ([]byte, error) {
	if depth+1 >= codec.MaxDataNesting || (row.Len() > 0 && row.IsArray() && depth+2 >= codec.MaxDataNesting) {
		return nil, errNestingTooDeep()
	}
	if nested(row) {
		for _, e := range row.Elements() {
			var err error
			if b, err = appendRow(b, name, dt, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	data, _, err := codec.GenerateTensorData(name, dt, row)
	return append(b, data...), err
}

// errNestingTooDeep is a v2 body's failure for "data" nested too deeply
// (platforms/codec).
func errNestingTooDeep() error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (" + strconv.Itoa(codec.MaxDataNesting) + ")"}
}

// nested reports whether v is an array holding an array.
func nested(v tritonjson.Value) bool {
	for _, e := range v.Elements() {
		if e.IsArray() {
			return true
		}
	}
	return false
}

// jsonInputTooLarge is the base route's --http-max-input-size failure for
// a JSON input of n bytes (triton-inference-server/server
// src/http_server.cc).
func jsonInputTooLarge(name string, n, limit int64) error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "JSON input '" + name + "' has a byte_size (" + strconv.FormatInt(n, 10) +
		" bytes) that exceeds the maximum allowed value of " + strconv.FormatInt(limit, 10) +
		" bytes. Use --http-max-input-size to increase the limit."}
}
