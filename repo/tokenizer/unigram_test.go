package tokenizer

import (
	"math/rand"
	"strings"
	"testing"
)

// TestPieceTrie builds the trie of a random vocabulary (pieces that are
// prefixes of others included) and finds every piece, and no string that
// is not one.
func TestPieceTrie(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alpha := []rune("ab▁é日\x00")
	vocab := map[string]int64{}
	for len(vocab) < 20000 {
		var sb strings.Builder
		for n := 1 + rng.Intn(9); n > 0; n-- {
			sb.WriteRune(alpha[rng.Intn(len(alpha))])
		}
		vocab[sb.String()] = int64(len(vocab))
	}
	tr := newPieceTrie(vocab)
	lookup := func(s string) int64 {
		cur := int32(0)
		for i := 0; i < len(s); i++ {
			if cur = tr.child(cur, s[i]); cur < 0 {
				return -1
			}
		}
		return int64(tr.ids[cur])
	}
	for p, id := range vocab {
		if got := lookup(p); got != id {
			t.Fatalf("%q: id %d, want %d", p, got, id)
		}
	}
	for _, s := range []string{"", "c", "ab▁é日\x00ab▁é日\x00ab", "\xff"} {
		if _, in := vocab[s]; !in && lookup(s) >= 0 {
			t.Errorf("%q found, not a piece", s)
		}
	}
}
