package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestWithTruncation(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "small-wordpiece.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("hello ", 20)
	tests := []struct {
		name string
		tr   *Truncation
		want int
	}{
		{"file's max_length 12", tok.Truncation(), 12},
		{"none", nil, 22},
		{"right 5", &Truncation{MaxLength: 5}, 5},
		{"left 7", &Truncation{MaxLength: 7, Direction: "Left"}, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt, err := tok.WithTruncation(tc.tr)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := tt.Encode(text, true)
			if err != nil {
				t.Fatal(err)
			}
			if enc.Len() != tc.want {
				t.Fatalf("len %d, want %d", enc.Len(), tc.want)
			}
			if enc.IDs[0] != 2 || enc.IDs[enc.Len()-1] != 3 {
				t.Fatalf("ids %v: want [CLS] ... [SEP]", enc.IDs)
			}
		})
	}
	if _, err := tok.WithTruncation(&Truncation{MaxLength: 3, Direction: "Up"}); err == nil {
		t.Fatal("direction Up accepted")
	}
	if enc, _ := tok.Encode(text, true); enc.Len() != 12 {
		t.Fatalf("the original changed: len %d", enc.Len())
	}
}
