package python

import (
	"encoding/json"
	"reflect"
	"testing"
)

var executeDoneSeeds = []string{
	`{"op":"execute_done","seq":12,"responses":[{"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,16],"off":0,"len":64}],"parameters":"{}"}]}`,
	`{"op":"execute_done","seq":3,"responses":[null,{"error":{"code":3,"message":"bad input"}},{"outputs":[],"parameters":"{\"a\":1}"}]}`,
	`{"op":"execute_done","seq":4,"error":"Failed to process the request(s) for model 'm_0', message: ValueError: x"}`,
	`{"op":"execute_done","seq":5,"responses":[{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"off":64,"len":10,"arena":true}],"parameters":"{}"}]}`,
	`{"seq":6,"op":"execute_done","responses":null}`,
	`{"op":"execute_done", "seq":7}`,
	`{"op":"execute_done","seq":8,"responses":[{"Outputs":[]}]}`,
	`{"op":"execute_done","seq":9,"responses":[{"outputs":[{"name":"\u00e9","shape":[-1,01]}]}]}`,
	`{"op":"execute_done","seq":10,"responses":[{"error":{"code":1},"error":{"message":"m"}}]}`,
	`{"op":"execute_done","seq":11,"responses":[{"outputs":[{"off":1.5}]}]}`,
	"{\"op\":\"execute_done\",\"seq\":12,\"error\":\"\xff\"}",
	`{"op":"execute_done","seq":13}trailing`,
	`{"op":"execute_done","seq":14,"responses":[{"outputs":[{"name":"y","datatype":"FP32","shape":[65536],"off":128,"len":262144,"arena_in":true,"arena":false}],"parameters":"{}"}]}`,
	`{"op":"execute_done","seq":15,"responses":[{"outputs":[{"name":"y","arena_in":1}]}]}`,
}

// TestDecodeExecuteDone: the hand-read form and encoding/json agree on the
// worker's answers and on forms that leave the fast path.
func TestDecodeExecuteDone(t *testing.T) {
	for _, h := range executeDoneSeeds {
		checkExecuteDone(t, []byte(h))
	}
	var d executeDone
	if err := decodeExecuteDone(frameIn{header: []byte(executeDoneSeeds[0])}, &d); err != nil || len(d.Responses) != 1 ||
		d.Responses[0].Outputs[0].Name != "OUTPUT0" || d.Responses[0].Outputs[0].Len != 64 || d.Responses[0].Outputs[0].Shape[1] != 16 {
		t.Fatalf("%+v, %v", d, err)
	}
	p := doneParser{b: []byte(executeDoneSeeds[0])}
	if !p.done(&executeDone{}) || p.i != len(p.b) {
		t.Fatal("the worker's usual answer left the fast path")
	}
}

func checkExecuteDone(t *testing.T, h []byte) {
	t.Helper()
	var got, want executeDone
	gotErr := decodeExecuteDone(frameIn{header: h}, &got)
	wantErr := json.Unmarshal(h, &want)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json says %v", h, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", h, got, want)
	}
}

// FuzzExecuteDone: for any header, the decoder gives what encoding/json
// gives.
func FuzzExecuteDone(f *testing.F) {
	for _, h := range executeDoneSeeds {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, h []byte) { checkExecuteDone(t, h) })
}

// executeMap is the execute header as a map, as encoding/json would
// write it (the form appendExecute replaces).
func executeMap(seq int64, slot, verbose int, reqs []wireRequest) map[string]any {
	return map[string]any{"op": "execute", "seq": seq, "slot": slot, "verbose": verbose, "requests": reqs}
}

// sameJSON reports whether a and b decode to the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestAppendExecute(t *testing.T) {
	reqs := []wireRequest{
		{RID: 1, ID: "id-1", CorrelationID: uint64(7), Flags: 1, TimeoutUs: 5, Parameters: `{"a":"<b>&\n"}`, Requested: []string{"y"},
			Inputs: []tensorDesc{{Name: "x", Datatype: "FP32", Shape: []int64{1, 16}, Off: 0, Len: 64}, {Name: "big", Datatype: "UINT8", Shape: []int64{}, Off: 128, Len: 70000, Arena: true}}},
		{RID: 2, ID: "\xff\u2028é\x00\"\\", CorrelationID: "seq-a", Requested: []string{}, Inputs: []tensorDesc{}},
	}
	got := appendExecute(nil, 9, 1, 2, reqs)
	want, err := json.Marshal(executeMap(9, 1, 2, reqs))
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, got, want) {
		t.Fatalf("appendExecute:\n%s\nencoding/json:\n%s", got, want)
	}
}

// FuzzAppendExecute: appendExecute and encoding/json write the same
// value, whatever the strings a client put in ids, parameters and names.
func FuzzAppendExecute(f *testing.F) {
	f.Add("id", "{}", "x", "FP32", uint64(0), "", int64(3), 64)
	f.Add("\xff\x01<>&\u2028", `{"k":"v"}`, "é", "BYTES", uint64(1<<63), "corr\x7f", int64(-1), 0)
	f.Fuzz(func(t *testing.T, id, params, name, dtype string, corr uint64, corrString string, dim int64, n int) {
		r := wireRequest{RID: 4, ID: id, CorrelationID: corr, Parameters: params, Requested: []string{name},
			Inputs: []tensorDesc{{Name: name, Datatype: dtype, Shape: []int64{dim, 2}, Off: n, Len: n}}}
		if corrString != "" {
			r.CorrelationID = corrString
		}
		reqs := []wireRequest{r}
		want, err := json.Marshal(executeMap(1, 0, 0, reqs))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendExecute(nil, 1, 0, 0, reqs); !sameJSON(t, got, want) {
			t.Fatalf("appendExecute:\n%q\nencoding/json:\n%q", got, want)
		}
	})
}
