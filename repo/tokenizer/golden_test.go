package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// goldenCase is one record of testdata/golden.json, written by
// testdata/golden.mjs from Hugging Face's Rust core.
type goldenCase struct {
	A          string  `json:"a"`
	B          *string `json:"b"`
	Special    bool    `json:"special"`
	Truncation *struct {
		MaxLength *int   `json:"max_length"`
		Strategy  string `json:"strategy"`
		Direction string `json:"direction"`
	} `json:"truncation"`
	Error       string   `json:"error"`
	IDs         []int64  `json:"ids"`
	TypeIDs     []int64  `json:"type_ids"`
	Tokens      []string `json:"tokens"`
	SpecialMask []int    `json:"special_mask"`
	Offsets     [][2]int `json:"offsets"`
	Decoded     *string  `json:"decoded"`
	DecodedSkip *string  `json:"decoded_skip"`
	DecodedOdd  *string  `json:"decoded_odd"`
}

func loadGolden(t testing.TB) map[string][]goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string][]goldenCase
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// withTruncation returns a copy of tok whose truncation is overridden as
// the case asks (golden.mjs calls setTruncation the same way).
func withTruncation(tok *Tokenizer, c goldenCase) *Tokenizer {
	if c.Truncation == nil {
		return tok
	}
	cp := *tok
	tr := Truncation{Strategy: "LongestFirst", Direction: "Right"}
	if tok.trunc != nil {
		tr = *tok.trunc
	}
	if c.Truncation.MaxLength != nil {
		tr.MaxLength = *c.Truncation.MaxLength
	}
	if c.Truncation.Strategy != "" {
		tr.Strategy = c.Truncation.Strategy
	}
	if c.Truncation.Direction != "" {
		tr.Direction = c.Truncation.Direction
	}
	cp.trunc = &tr
	return &cp
}

func TestGolden(t *testing.T) {
	for file, cases := range loadGolden(t) {
		tok, err := Load(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			tk := withTruncation(tok, c)
			var enc Encoding
			if c.B != nil {
				enc, err = tk.EncodePair(c.A, *c.B, c.Special)
			} else {
				enc, err = tk.Encode(c.A, c.Special)
			}
			if c.Error != "" {
				if err == nil {
					t.Errorf("%s #%d %q: no error, want %s", file, i, c.A, c.Error)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s #%d %q: %v", file, i, c.A, err)
				continue
			}
			mask := make([]int, len(enc.Special))
			for k, s := range enc.Special {
				if s {
					mask[k] = 1
				}
			}
			got := goldenCase{IDs: enc.IDs, TypeIDs: enc.TypeIDs, Tokens: enc.Tokens, SpecialMask: mask, Offsets: enc.Offsets}
			want := goldenCase{IDs: c.IDs, TypeIDs: c.TypeIDs, Tokens: c.Tokens, SpecialMask: c.SpecialMask, Offsets: c.Offsets}
			if !reflect.DeepEqual(normEmpty(got), normEmpty(want)) {
				t.Errorf("%s #%d %q / %v:\n got %+v\nwant %+v", file, i, c.A, c.B, got, want)
			}
			if c.Decoded != nil {
				if got := tk.Decode(enc.IDs, false); got != *c.Decoded {
					t.Errorf("%s #%d %q: Decode = %q, want %q", file, i, c.A, got, *c.Decoded)
				}
				if got := tk.Decode(enc.IDs, true); got != *c.DecodedSkip {
					t.Errorf("%s #%d %q: Decode(skip special) = %q, want %q", file, i, c.A, got, *c.DecodedSkip)
				}
				var odd []int64
				for k := 1; k < len(enc.IDs); k += 2 {
					odd = append(odd, enc.IDs[k])
				}
				if got := tk.Decode(odd, false); got != *c.DecodedOdd {
					t.Errorf("%s #%d %q: Decode(every other id) = %q, want %q", file, i, c.A, got, *c.DecodedOdd)
				}
			}
			for k, m := range enc.AttentionMask {
				if m != 1 {
					t.Errorf("%s #%d: attention mask[%d] = %d", file, i, k, m)
				}
			}
		}
	}
}

// normEmpty makes nil and empty slices compare equal.
func normEmpty(g goldenCase) goldenCase {
	if len(g.IDs) == 0 {
		return goldenCase{}
	}
	return g
}
