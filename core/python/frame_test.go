package python

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

func TestFrameRoundTrip(t *testing.T) {
	arena := make([]byte, 1<<20)
	out := &frameOut{arena: arena}
	small := &core.Tensor{Name: "a", DataType: core.TypeInt32, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 2, 0, 0, 0}}
	large := &core.Tensor{Name: "b", DataType: core.TypeUint8, Shape: []int64{arenaThreshold}, Data: bytes.Repeat([]byte{7}, arenaThreshold)}
	descs := []tensorDesc{out.add(small), out.add(large)}
	if descs[0].Arena || !descs[1].Arena {
		t.Fatalf("placement: %+v", descs)
	}
	var buf bytes.Buffer
	if err := out.write(&buf, map[string]any{"op": "x", "tensors": descs}); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	f.arena = arena
	var h struct{ Tensors []tensorDesc }
	if err := json.Unmarshal(f.header, &h); err != nil {
		t.Fatal(err)
	}
	for i, want := range []*core.Tensor{small, large} {
		got, err := f.tensor(h.Tensors[i])
		if err != nil || !bytes.Equal(got.Data, want.Data) || got.DataType != want.DataType {
			t.Fatalf("tensor %d: %v", i, err)
		}
	}
}

// FuzzFrame feeds arbitrary bytes to the frame reader and the tensor
// decoder: malformed frames and descriptors are errors, never panics or
// reads outside the frame.
func FuzzFrame(f *testing.F) {
	seed := func(header string, blobs []byte) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(4+len(header)+len(blobs)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
		return append(append(b, header...), blobs...)
	}
	f.Add(seed(`{"op":"execute_done","seq":1,"responses":[{"outputs":[{"name":"o","datatype":"FP32","shape":[1],"off":0,"len":4}]}]}`, []byte{0, 0, 128, 63}))
	f.Add(seed(`{"op":"send","responses":[{"outputs":[{"name":"o","datatype":"BYTES","shape":[1],"off":2,"len":40,"arena":true}]}]}`, []byte{1, 2}))
	f.Add(seed(`{"op":"x"}`, nil))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0})
	f.Add(seed(`{"op":"execute_done","responses":[{"outputs":[{"name":"o","datatype":"FP32","shape":[4611686018427387904],"off":0,"len":0}]}]}`, nil))
	arena := make([]byte, 64)
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := readFrame(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		fr.arena = arena
		var h struct {
			Responses []wireResponse `json:"responses"`
		}
		if json.Unmarshal(fr.header, &h) != nil {
			return
		}
		for _, r := range h.Responses {
			for _, d := range r.Outputs {
				tensor, err := fr.tensor(d)
				if err == nil && len(tensor.Data) != d.Len {
					t.Fatalf("tensor of %d bytes for a descriptor of %d", len(tensor.Data), d.Len)
				}
				if err == nil && tensor.DataType != core.TypeBytes && exactBytes(d.Shape, tensor.DataType.ByteSize()).Cmp(big.NewInt(int64(d.Len))) != 0 {
					t.Fatalf("shape %v of %s accepted over %d bytes", d.Shape, d.Datatype, d.Len)
				}
			}
		}
	})
}

func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   routing
		err    bool
	}{
		{`{"op":"execute_done","seq":12,"responses":[]}`, routing{"execute_done", 12}, false},
		{`{"op":"init_done"}`, routing{"init_done", 0}, false},
		{`{"op":"init_done","has_is_ready":true}`, routing{"init_done", 0}, false},
		{`{"op":"send","seq":3}`, routing{"send", 3}, false},
		{`{"rid":1,"op":"send","seq":4}`, routing{"send", 4}, false}, // not leading: decoded in full
		{`{"op": "log", "seq": 5}`, routing{"log", 5}, false},
		{`{"op":"lo\"g","seq":5}`, routing{`lo"g`, 5}, false},
		{`{"op":"x","seq":99999999999999999999}`, routing{}, true},
		{`{"op":"x","seq":`, routing{}, true},
		{`not json`, routing{}, true},
	} {
		got, err := route([]byte(tc.header))
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("route(%s) = %+v, %v; want %+v (error %v)", tc.header, got, err, tc.want, tc.err)
		}
	}
}

// FuzzRoute: whenever a header decodes as JSON, the fast path agrees
// (for headers such as the worker writes: no key repeated, none that only
// JSON's case-folding or escapes make "op" or "seq").
func FuzzRoute(f *testing.F) {
	for _, s := range []string{`{"op":"execute_done","seq":12,"responses":[]}`, `{"op":"init_done"}`,
		`{"op":"send","seq":3,"rid":1}`, `{"op":"x","seq":1,"seq":2}`, `{"op":"x","seq":01}`, "{\"op\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		got, err := route(h)
		var want routing
		if json.Unmarshal(h, &want) == nil && plainKeys(h) && (err != nil || got != want) {
			t.Fatalf("route(%q) = %+v, %v; json says %+v", h, got, err, want)
		}
	})
}

// plainKeys reports whether h's top-level keys are unique and none of them
// is "op" or "seq" but for case or an escape in the raw text.
func plainKeys(h []byte) bool {
	d := json.NewDecoder(bytes.NewReader(h))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		k, _ := tok.(string)
		if seen[strings.ToLower(k)] || (strings.EqualFold(k, "op") || strings.EqualFold(k, "seq")) && k != "op" && k != "seq" {
			return false
		}
		seen[strings.ToLower(k)] = true
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
	}
	return !bytes.Contains(h, []byte(`\u`)) || !bytes.Contains(bytes.ToLower(h), []byte(`\u006f`)) && !bytes.Contains(bytes.ToLower(h), []byte(`\u0073`))
}

// TestFrameTensorSizes: a descriptor's shape must account for its bytes
// exactly, without the product wrapping (2^62 FP32 elements are not 0
// bytes).
func TestFrameTensorSizes(t *testing.T) {
	f := frameIn{blobs: make([]byte, 16)}
	for _, c := range []struct {
		d  tensorDesc
		ok bool
	}{
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{2, 2}, Len: 16}, true},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{1 << 62}, Len: 0}, false},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{1<<62 + 1}, Len: 4}, false},
		{tensorDesc{Name: "a", Datatype: "FP64", Shape: []int64{1<<61 + 1}, Len: 8}, false},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{1 << 32, 1 << 32}, Len: 0}, false},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{3}, Len: 16}, false},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{2}, Off: 12, Len: 8}, false},
		{tensorDesc{Name: "a", Datatype: "FP32", Shape: []int64{2}, Off: math.MaxInt, Len: 8}, false},
		{tensorDesc{Name: "a", Datatype: "NOPE", Shape: []int64{4}, Len: 16}, false},
	} {
		if _, err := f.tensor(c.d); (err == nil) != c.ok {
			t.Errorf("%+v: err %v, want ok %v", c.d, err, c.ok)
		}
	}
}

// exactBytes is a shape's byte size without wrapping (no dims: 0, as
// core.ElementCount counts).
func exactBytes(shape []int64, size int) *big.Int {
	if len(shape) == 0 {
		return new(big.Int)
	}
	n := big.NewInt(int64(size))
	for _, d := range shape {
		if d <= 0 {
			return new(big.Int)
		}
		n.Mul(n, big.NewInt(d))
	}
	return n
}

// TestTensorArenaIn: an output the worker describes as lying in the
// execution's own inputs (arena_in) is read from that part of the input
// half and copied out of it, into the caller's destination where it fits;
// a frame without that part, or bounds outside it, are errors.
func TestTensorArenaIn(t *testing.T) {
	part := make([]byte, 256)
	for i := range part {
		part[i] = byte(i)
	}
	desc := tensorDesc{Name: "y", Datatype: "UINT8", Shape: []int64{16}, Off: 64, Len: 16, ArenaIn: true}
	for _, tc := range []struct {
		name    string
		f       frameIn
		d       tensorDesc
		dst     []byte
		wantErr string
		intoDst bool
	}{
		{name: "copied", f: frameIn{arenaIn: part}, d: desc},
		{name: "into its destination", f: frameIn{arenaIn: part}, d: desc, dst: make([]byte, 32), intoDst: true},
		{name: "no input part", f: frameIn{arena: part}, d: desc, wantErr: "outside the frame"},
		{name: "past the part", f: frameIn{arenaIn: part[:70]}, d: desc, wantErr: "outside the frame"},
		{name: "both halves", f: frameIn{arena: part, arenaIn: part}, d: func() tensorDesc { d := desc; d.Arena = true; return d }(), wantErr: "both halves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f.tensorInto(tc.d, tc.dst)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got.Data, part[64:80]) {
				t.Fatalf("%v, %v", got, err)
			}
			if core.Overlap(got.Data, part) {
				t.Fatal("the output shares the arena's input half")
			}
			if tc.intoDst != (len(tc.dst) > 0 && &got.Data[0] == &tc.dst[0]) {
				t.Fatalf("written into its destination: %v, want %v", !tc.intoDst, tc.intoDst)
			}
		})
	}
}
