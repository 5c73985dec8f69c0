package openai

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestParseInputs(t *testing.T) {
	tests := []struct {
		raw   string
		texts []string
		ids   [][]int64
		fail  bool
	}{
		{raw: `"a b"`, texts: []string{"a b"}},
		{raw: ` ["a", "b"]`, texts: []string{"a", "b"}},
		{raw: `[1, 2, 3]`, ids: [][]int64{{1, 2, 3}}},
		{raw: `[[1], [2, 3]]`, ids: [][]int64{{1}, {2, 3}}},
		{raw: `[-1]`, ids: [][]int64{{-1}}}, // refused later, against the vocabulary
		{raw: ``, fail: true},
		{raw: `null`, fail: true},
		{raw: `[]`, fail: true},
		{raw: `""`, fail: true},
		{raw: `[[]]`, fail: true},
		{raw: `[1.5]`, fail: true},
		{raw: `[true]`, fail: true},
		{raw: `{"a": 1}`, fail: true},
		{raw: `["a", 1]`, fail: true},
		{raw: `[[1], "a"]`, fail: true},
		{raw: `[99999999999999999999]`, fail: true},
	}
	for _, tc := range tests {
		in, err := parseInputs(json.RawMessage(tc.raw), "input")
		if tc.fail {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != "input" {
				t.Errorf("%s: %+v, %v; want a 400 about input", tc.raw, in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(in.texts, tc.texts) || len(in.ids) != len(tc.ids) {
			t.Errorf("%s: %+v, %v", tc.raw, in, err)
			continue
		}
		for i := range in.ids {
			if !slices.Equal(in.ids[i], tc.ids[i]) {
				t.Errorf("%s: row %d %v, want %v", tc.raw, i, in.ids[i], tc.ids[i])
			}
		}
	}
}

// FuzzParseInputs: any body field is a clear error or inputs that hold
// something, never a panic; the item bound holds.
func FuzzParseInputs(f *testing.F) {
	for _, s := range []string{`"a"`, `["a","b"]`, `[1,2]`, `[[1],[2,3]]`, `[]`, `[[]]`, `null`, `[1,"a"]`, `{"x":[1]}`, `[[1,2],[3]]`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := parseInputs(raw, "input")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("%q: error %v is not a 400", raw, err)
			}
			return
		}
		if n := in.len(); n == 0 || n > MaxItems || in.texts != nil && in.ids != nil {
			t.Fatalf("%q: %d items (texts %d, ids %d)", raw, n, len(in.texts), len(in.ids))
		}
	})
}
