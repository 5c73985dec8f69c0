package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// batchCase is one record of testdata/golden_batch.json: a batch encoded
// by the Rust core's encodeBatch, padded by the file's padding section or
// by the case's (options of the npm binding's setPadding; null: none).
type batchCase struct {
	File     string          `json:"file"`
	Inputs   []string        `json:"inputs"`
	Special  *bool           `json:"special"`
	Padding  json.RawMessage `json:"padding"`
	Expected []struct {
		IDs           []int64  `json:"ids"`
		TypeIDs       []int64  `json:"type_ids"`
		Tokens        []string `json:"tokens"`
		SpecialMask   []int    `json:"special_mask"`
		AttentionMask []int64  `json:"attention_mask"`
	} `json:"encodings"`
}

// bindingPadding reads the binding's PaddingOptions, with its defaults.
func bindingPadding(t *testing.T, raw json.RawMessage) *Padding {
	var o struct {
		MaxLength       int     `json:"maxLength"`
		Direction       string  `json:"direction"`
		PadToMultipleOf int     `json:"padToMultipleOf"`
		PadID           int64   `json:"padId"`
		PadTypeID       int64   `json:"padTypeId"`
		PadToken        *string `json:"padToken"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	p := &Padding{Fixed: o.MaxLength, Direction: "Right", PadToMultipleOf: o.PadToMultipleOf, PadID: o.PadID, PadTypeID: o.PadTypeID, PadToken: "[PAD]"}
	if strings.EqualFold(o.Direction, "left") {
		p.Direction = "Left"
	}
	if o.PadToken != nil {
		p.PadToken = *o.PadToken
	}
	return p
}

func TestGoldenBatch(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden_batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []batchCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		tok, err := Load(filepath.Join("testdata", c.File))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(c.Padding) == 0:
		case string(c.Padding) == "null":
			tok.pad = nil
		default:
			tok.pad = bindingPadding(t, c.Padding)
		}
		encs, err := tok.EncodeBatch(c.Inputs, c.Special == nil || *c.Special)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(encs) != len(c.Expected) {
			t.Fatalf("case %d: %d encodings, want %d", i, len(encs), len(c.Expected))
		}
		for k, e := range encs {
			want := c.Expected[k]
			mask := make([]int, len(e.Special))
			for j, s := range e.Special {
				if s {
					mask[j] = 1
				}
			}
			if !reflect.DeepEqual(e.IDs, want.IDs) || !reflect.DeepEqual(e.TypeIDs, want.TypeIDs) ||
				!reflect.DeepEqual(e.Tokens, want.Tokens) || !reflect.DeepEqual(mask, want.SpecialMask) ||
				!reflect.DeepEqual(e.AttentionMask, want.AttentionMask) {
				t.Errorf("case %d (%s) #%d:\n got %v %v %q %v %v\nwant %+v", i, c.File, k, e.IDs, e.TypeIDs, e.Tokens, mask, e.AttentionMask, want)
			}
			if len(e.Offsets) != e.Len() {
				t.Errorf("case %d #%d: %d offsets for %d tokens", i, k, len(e.Offsets), e.Len())
			}
		}
	}
}

func TestPadPairsAndDirections(t *testing.T) {
	tok := loadSmall(t)
	encs, err := tok.EncodePairBatch([][2]string{{"hello", "world"}, {"a", "b a b"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	// small-wordpiece.json pads to Fixed 16, on the right.
	for i, e := range encs {
		if e.Len() != 16 || e.IDs[15] != 0 || e.AttentionMask[15] != 0 || !e.Special[15] || e.Offsets[15] != [2]int{} {
			t.Errorf("pair %d: %v %v", i, e.IDs, e.AttentionMask)
		}
	}
	left := []Encoding{{IDs: []int64{7}, TypeIDs: []int64{0}, AttentionMask: []int64{1}, Tokens: []string{"x"}, Offsets: [][2]int{{0, 1}}, Special: []bool{false}}}
	Pad(left, Padding{Fixed: 3, Direction: "Left", PadID: 9, PadTypeID: 2, PadToken: "<pad>"})
	want := Encoding{IDs: []int64{9, 9, 7}, TypeIDs: []int64{2, 2, 0}, AttentionMask: []int64{0, 0, 1}, Tokens: []string{"<pad>", "<pad>", "x"},
		Offsets: [][2]int{{}, {}, {0, 1}}, Special: []bool{true, true, false}}
	if !reflect.DeepEqual(left[0], want) {
		t.Errorf("left padding: got %+v, want %+v", left[0], want)
	}
	Pad(nil, Padding{Fixed: 3}) // no batch: nothing to do, no panic
}

func TestTokenToID(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "small-unigram-xlmr.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok string
		id  int64
		ok  bool
	}{{"<pad>", 1, true}, {"<mask>", int64(tok.VocabSize() - 1), true}, {"▁the", -1, true}, {"no such piece", 0, false}} {
		id, ok := tok.TokenToID(c.tok)
		if ok != c.ok || c.id >= 0 && id != c.id {
			t.Errorf("TokenToID(%q) = %d, %v; want %d, %v", c.tok, id, ok, c.id, c.ok)
		}
		if ok {
			if back, ok := tok.IDToToken(id); !ok || back != c.tok {
				t.Errorf("IDToToken(%d) = %q, %v; want %q", id, back, ok, c.tok)
			}
		}
	}
	if _, ok := tok.IDToToken(1 << 40); ok {
		t.Error("IDToToken of an id out of the vocabulary: ok")
	}
}
