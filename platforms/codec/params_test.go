package codec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// paramsByScan applies a body's request parameters looking each listed
// name up with a scan of the object, as Triton does (RapidJSON's
// FindMember): the reference for the decoder's indexed lookups. ok is
// false when the body has no parameters object to compare on.
func paramsByScan(body []byte) (r *Envelope, err error, ok bool) {
	doc, perr := tritonjson.ParseJSON(body)
	if perr != nil {
		return nil, nil, false
	}
	params, found := doc.Root().Find("parameters")
	if !found || !params.IsObject() {
		return nil, nil, false
	}
	r = newEnvelope("m")
	pr := protocol.ParamReader{Rules: protocol.HTTPRules, Request: r.Request}
	for key := range params.Members() {
		name := cstring(key)
		if name == "binary_data_output" {
			b, err := params.MemberBool(name)
			if err != nil {
				return r, wrap("Unable to parse 'binary_data_output'", err), true
			}
			r.DefaultKind = OutputJSON
			if b {
				r.DefaultKind = OutputBinary
			}
			continue
		}
		v, found := params.Find(name)
		if !found {
			return r, pr.Missing(name), true
		}
		if err := pr.Read(name, requestParam(v)); err != nil {
			return r, err, true
		}
	}
	return r, nil, true
}

// paramsByIndex is what the decoder makes of a body's parameters.
func paramsByIndex(ctx context.Context, body []byte) (*Envelope, error) {
	r := newEnvelope("m")
	r.dec = decoder{model: "m", r: r}
	if err := r.dec.doc.Parse(body); err != nil {
		return nil, err
	}
	return r, r.dec.parameters(ctx, r.dec.doc.Root())
}

// checkParamsMatchScan asserts the decoder reads body's parameters exactly
// as paramsByScan: the same error, or the same request.
func checkParamsMatchScan(t *testing.T, body []byte) {
	t.Helper()
	want, wantErr, ok := paramsByScan(body)
	if !ok {
		return
	}
	got, gotErr := paramsByIndex(context.Background(), body)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v, a scan per member gives %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	g, w := got.Request, want.Request
	if got.DefaultKind != want.DefaultKind || g.Correlation != w.Correlation || g.Priority != w.Priority ||
		g.TimeoutMicros != w.TimeoutMicros || fmt.Sprint(g.Parameters) != fmt.Sprint(w.Parameters) {
		t.Fatalf("decoded %v %+v %d %d %v\nscan    %v %+v %d %d %v", got.DefaultKind, g.Correlation, g.Priority, g.TimeoutMicros, g.Parameters,
			want.DefaultKind, w.Correlation, w.Priority, w.TimeoutMicros, w.Parameters)
	}
}

// manyParams is a parameters object's members "p<i>":i for i < n, then
// tail (members, comma-led when n > 0).
func manyParams(n int, tail string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	return b.String() + tail
}

// nulNames is n members "<prefix>\u0000<i>":"v<i>", comma-separated: names
// Triton cuts to prefix, each of which finds the first member named so.
func nulNames(prefix string, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = `"` + prefix + `\u0000` + strconv.Itoa(i) + `":"v` + strconv.Itoa(i) + `"`
	}
	return strings.Join(s, ",")
}

// TestParametersIndexedAsScanned: with many members (so the decoder's
// lookups go through an index) a name cut at a NUL still finds the first
// member of its prefix, before or after it, and every error is the one a
// scan per member gives.
func TestParametersIndexedAsScanned(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		check        func(*Envelope) bool
	}{
		{"distinct names", manyParams(3000, ""), func(r *Envelope) bool { return len(r.Request.Parameters) == 3000 }},
		{"NUL names find a later member", nulNames("x", 2000) + `,"x":"last"`,
			func(r *Envelope) bool {
				return r.Request.Parameters["x"] == "last" && len(r.Request.Parameters) == 1
			}},
		{"NUL names find an earlier member", `"priority":4,` + nulNames("priority", 50) + `,"priority":"not this"`,
			func(r *Envelope) bool { return r.Request.Priority == 4 }},
		{"first duplicate wins", manyParams(40, `,"p3":"again","sequence_id":"s","sequence_id":9`),
			func(r *Envelope) bool {
				return r.Request.Parameters["p3"] == int64(3) && r.Request.Correlation.StringID == "s"
			}},
		{"binary_data_output behind a NUL", manyParams(40, `,"binary_data_output\u0000x":false,"binary_data_output":true`),
			func(r *Envelope) bool { return r.DefaultKind == OutputBinary }},
		{"NUL name without its prefix", manyParams(40, `,"k\u0000x":1`), nil},
		{"binary_data_output missing behind a NUL", manyParams(40, `,"binary_data_output\u0000":true`), nil},
		{"scheduling key missing behind a NUL", manyParams(40, `,"timeout\u0000":1`), nil},
		{"many names, none a model parameter", `"priority":4,` + nulNames("priority", 100) + `,"binary_data_output":true`,
			func(r *Envelope) bool { return r.Request.Priority == 4 && r.Request.Parameters == nil }},
		{"escaped names", manyParams(40, `,"\u0070\u0031":"escaped p1","q\u0000":1,"q":2`),
			func(r *Envelope) bool {
				return r.Request.Parameters["p1"] == int64(1) && r.Request.Parameters["q"] == int64(2)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"parameters":{` + tc.params + `},"inputs":[]}`)
			checkParamsMatchScan(t, body)
			env, err := DecodeRequest(context.Background(), "m", body, -1, testMax, nil)
			if tc.check == nil {
				if err == nil {
					t.Fatal("decoded")
				}
				return
			}
			if err != nil || !tc.check(env) {
				t.Fatalf("%v: %+v %v", err, env, env.Request.Parameters)
			}
		})
	}
}

// countingContext is a context that reports itself done from its after-th
// look on, counting the looks.
type countingContext struct {
	context.Context
	after int64
	looks atomic.Int64
}

func (c *countingContext) Err() error {
	if c.looks.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

// TestDecodeGivesUpWhenCancelled: a large body's decoding looks at its
// context every few thousand steps (parameters, inputs, outputs, data
// elements) and stops with CodeCancelled once the client has gone; a
// small body is decoded without a look.
func TestDecodeGivesUpWhenCancelled(t *testing.T) {
	const n = 20000
	inputs := make([]string, n)
	outputs := make([]string, n)
	for i := range inputs {
		inputs[i] = `{"name":"I` + strconv.Itoa(i) + `","datatype":"INT32","shape":[1],"data":[1]}`
		outputs[i] = `{"name":"O` + strconv.Itoa(i) + `"}`
	}
	data := strings.Repeat("1,", n) + "1"
	strs := strings.Repeat(`"a",`, n) + `"a"`
	for _, tc := range []struct{ name, body string }{
		{"parameters", `{"parameters":{` + manyParams(n, "") + `},"inputs":[]}`},
		{"inputs", `{"inputs":[` + strings.Join(inputs, ",") + `]}`},
		{"outputs", `{"inputs":[],"outputs":[` + strings.Join(outputs, ",") + `]}`},
		{"data", `{"inputs":[{"name":"I","datatype":"INT32","shape":[` + strconv.Itoa(n+1) + `],"data":[` + data + `]}]}`},
		{"BYTES data", `{"inputs":[{"name":"I","datatype":"BYTES","shape":[` + strconv.Itoa(n+1) + `],"data":[` + strs + `]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			live := &countingContext{Context: context.Background(), after: 1 << 62}
			if _, err := DecodeRequest(live, "m", body, -1, testMax, nil); err != nil {
				t.Fatal(err)
			}
			// One look every checkEvery steps, and not many more.
			if looks := live.looks.Load(); looks < n/checkEvery || looks > 2*n/checkEvery+2 {
				t.Fatalf("%d looks at the context over %d steps", looks, n)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := DecodeRequest(ctx, "m", body, -1, testMax, nil)
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeCancelled {
				t.Fatalf("cancelled decode: %v", err)
			}
			late := &countingContext{Context: context.Background(), after: 1}
			if _, err := DecodeRequest(late, "m", body, -1, testMax, nil); core.CodeOf(err) != core.CodeCancelled {
				t.Fatalf("decode cancelled midway: %v", err)
			}
			if looks := late.looks.Load(); looks != 2 {
				t.Fatalf("%d looks at the context after it was done, want the one that stopped it", looks-1)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DecodeRequest(ctx, "m", []byte(`{"parameters":{"priority":1},"inputs":[]}`), -1, testMax, nil); err != nil {
		t.Fatalf("small body: %v", err)
	}
}

// TestDecodeParameters covers the request-level "parameters" object.
func TestDecodeParameters(t *testing.T) {
	env, err := decodeJSON(`{"id":"a\u0000b","parameters":{"sequence_id":7,"sequence_start":true,"sequence_end":false,"priority":3,"timeout":1500,"binary_data_output":true,
		"s":"v\u0000w","i":-5,"big":18446744073709551615,"f":2.5,"b":false,"headers":"h"},"inputs":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	req := env.Request
	if req.ID != "a" || req.Priority != 3 || req.TimeoutMicros != 1500 || env.DefaultKind != OutputBinary {
		t.Fatalf("%+v", req)
	}
	if req.Correlation != (core.Correlation{ID: 7, Flags: core.FlagSequenceStart}) {
		t.Fatalf("%+v", req.Correlation)
	}
	want := map[string]any{"s": "v", "i": int64(-5), "big": float64(18446744073709551615), "f": 2.5, "b": false, "headers": "h"}
	if fmt.Sprint(req.Parameters) != fmt.Sprint(want) {
		t.Fatalf("parameters %v, want %v", req.Parameters, want)
	}
	for k, v := range want {
		if fmt.Sprintf("%T", req.Parameters[k]) != fmt.Sprintf("%T", v) {
			t.Fatalf("%s: %T", k, req.Parameters[k])
		}
	}
	env, err = decodeJSON(`{"parameters":{"sequence_id":"abc","sequence_end":true,"binary_data_output":false},"inputs":[]}`)
	if err != nil || env.Request.Correlation != (core.Correlation{StringID: "abc", IsString: true, Flags: core.FlagSequenceEnd}) || env.DefaultKind != OutputJSON || env.Request.Parameters != nil {
		t.Fatalf("%v %+v", err, env)
	}
	// The first of duplicate members wins, for every occurrence, and a
	// name cut at a NUL reads the member of its prefix.
	env, err = decodeJSON(`{"parameters":{"priority":1,"priority":"x","priority\u0000y":"z"},"inputs":[]}`)
	if err != nil || env.Request.Priority != 1 {
		t.Fatal(err)
	}
	env, err = decodeJSON(`{"parameters":{"sequence_id":18446744073709551615},"inputs":[]}`)
	if err != nil || env.Request.Correlation != (core.Correlation{ID: math.MaxUint64}) {
		t.Fatalf("%v %+v", err, env)
	}
}

// TestJSONParam: how a JSON parameter value reaches the protocol's reader.
func TestJSONParam(t *testing.T) {
	for _, tc := range []struct {
		json string
		want protocol.Param
	}{
		{`"a\u0000b"`, protocol.Param{Kind: protocol.ParamString, String: "a\x00b"}},
		{`true`, protocol.Param{Kind: protocol.ParamBool, Bool: true}},
		{`-9223372036854775808`, protocol.Param{Kind: protocol.ParamInt64, Int64: math.MinInt64}},
		{`-0`, protocol.Param{Kind: protocol.ParamInt64}},
		{`9223372036854775808`, protocol.Param{Kind: protocol.ParamUint64, Uint64: 1 << 63}},
		{`18446744073709551616`, protocol.Param{Kind: protocol.ParamDouble, Double: 1 << 64}},
		{`1.0`, protocol.Param{Kind: protocol.ParamDouble, Double: 1}},
		{`-Infinity`, protocol.Param{Kind: protocol.ParamDouble, Double: math.Inf(-1)}},
		{`null`, protocol.Param{}},
		{`[1]`, protocol.Param{}},
		{`{}`, protocol.Param{}},
	} {
		doc, err := tritonjson.ParseJSON([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		if got := JSONParam(doc.Root()); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.json, got, tc.want)
		}
	}
	// An infer request's string parameters end at a NUL.
	doc, _ := tritonjson.ParseJSON([]byte(`"a\u0000b"`))
	if got := requestParam(doc.Root()); got.String != "a" {
		t.Errorf("infer string parameter %q", got.String)
	}
}
