package tokenizer

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodeStream streams the ids of every golden case one at a time and
// checks that the pieces add up to Decode of them all (for the decoders
// that allow it: Metaspace drops the first token's space, so a stream that
// starts mid-text differs only there), and that text is held back while a
// character is incomplete.
func TestDecodeStream(t *testing.T) {
	streamed, refused := 0, 0
	for file, cases := range loadGolden(t) {
		tok, err := Load(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			for _, skip := range []bool{false, true} {
				d := tok.NewDecodeStream(skip)
				var sb strings.Builder
				failed := false
				for _, id := range c.IDs {
					s, ok, err := d.Step(id)
					if errors.Is(err, ErrStreamPrefix) {
						failed = true
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if !ok && s != "" {
						t.Fatalf("%s #%d: no text but %q", file, i, s)
					}
					if strings.HasSuffix(s, "\uFFFD") {
						t.Errorf("%s #%d: a step ends in U+FFFD: %q", file, i, s)
					}
					sb.WriteString(s)
				}
				want := tok.Decode(c.IDs, skip)
				got := sb.String()
				if failed {
					refused++
					continue
				}
				streamed++
				if got == want {
					continue
				}
				// Held back at the end: text that never completed.
				if !strings.HasPrefix(want, got) || !strings.HasSuffix(want, "\uFFFD") {
					t.Errorf("%s #%d (skip %v): stream %q, Decode %q", file, i, skip, got, want)
				}
			}
		}
	}
	// Refusals come only from decoders that rewrite earlier text.
	t.Logf("%d streams matched Decode, %d refused", streamed, refused)
	if refused > streamed/10 {
		t.Errorf("%d of %d streams refused", refused, streamed+refused)
	}
}

func TestDecodeStreamHoldsBytes(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "small-bpe.json"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tok.Encode("😀 ok", false)
	if err != nil {
		t.Fatal(err)
	}
	d := tok.NewDecodeStream(false)
	var outs []string
	for _, id := range enc.IDs {
		if s, ok, err := d.Step(id); err != nil {
			t.Fatal(err)
		} else if ok {
			outs = append(outs, s)
		}
	}
	// The emoji's four bytes come in several tokens: it is held back
	// until whole, then comes in one piece.
	whole := false
	for _, s := range outs {
		whole = whole || strings.Contains(s, "😀")
		if strings.ContainsRune(s, '\uFFFD') {
			t.Errorf("piece %q has U+FFFD", s)
		}
	}
	if !whole || len(enc.IDs) <= len(outs) {
		t.Errorf("stream pieces %q of %d ids", outs, len(enc.IDs))
	}
	if got := strings.Join(outs, ""); got != tok.Decode(enc.IDs, false) {
		t.Errorf("stream %q, Decode %q", got, tok.Decode(enc.IDs, false))
	}
}
