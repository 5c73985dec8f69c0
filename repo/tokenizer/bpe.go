package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// bpe is huggingface/tokenizers models/bpe: each word starts as its
// characters and the pair with the lowest merge rank is merged until no
// ranked pair is left (leftmost first among equal ranks).
type bpe struct {
	vocab        map[string]int64
	byID         map[int64]string
	merges       map[uint64]merge // by pairKey of the two ids
	unk          string           // "" when the file has no unk_token
	unkID        int64
	byteFallback bool
	ignoreMerges bool
	fuseUnk      bool
	prefix       string // continuing_subword_prefix: before every character but a word's first
	suffix       string // end_of_word_suffix: after a word's last character

	// cache maps a word to its pieces, as models/bpe/model.rs caches up
	// to 10,000 words; once full it only serves what it holds.
	cache  sync.Map // string -> []cachedPiece
	cached atomic.Int64
}

const (
	bpeCacheWords   = 10000
	bpeCacheMaxWord = 256 // bytes; longer words are not cached
)

// cachedPiece is a token of a cached word, with byte offsets in the word.
type cachedPiece struct {
	id         int64
	text       string
	start, end int32
}

// pairKey packs two ids (checked at load to fit in 32 bits, as the Rust
// core's u32 ids do) into a map key.
func pairKey(l, r int64) uint64 { return uint64(l)<<32 | uint64(r) }

type merge struct {
	rank int
	id   int64
}

func parseBPE(raw json.RawMessage) (*bpe, error) {
	var m struct {
		Vocab        map[string]int64  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		Unk          *string           `json:"unk_token"`
		Prefix       *string           `json:"continuing_subword_prefix"`
		Suffix       *string           `json:"end_of_word_suffix"`
		Dropout      *float64          `json:"dropout"`
		ByteFallback bool              `json:"byte_fallback"`
		IgnoreMerges bool              `json:"ignore_merges"`
		FuseUnk      bool              `json:"fuse_unk"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing BPE model: %w", err)
	}
	var prefix, suffix string
	if m.Prefix != nil {
		prefix = *m.Prefix
	}
	if m.Suffix != nil {
		suffix = *m.Suffix
	}
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("%w: BPE dropout %v", ErrUnsupported, *m.Dropout)
	case m.ByteFallback && (prefix != "" || suffix != ""):
		// The Rust core spells the prefix and suffix as bytes too, with
		// offsets past the character: not followed here.
		return nil, fmt.Errorf("%w: BPE byte_fallback with continuing_subword_prefix or end_of_word_suffix", ErrUnsupported)
	}
	b := &bpe{vocab: m.Vocab, byID: make(map[int64]string, len(m.Vocab)), merges: make(map[uint64]merge, len(m.Merges)),
		byteFallback: m.ByteFallback, ignoreMerges: m.IgnoreMerges, fuseUnk: m.FuseUnk, prefix: prefix, suffix: suffix}
	for s, id := range m.Vocab {
		if id < 0 || id > math.MaxUint32 {
			return nil, fmt.Errorf("tokenizer: BPE id %d of %q outside 0..2^32-1", id, s)
		}
		b.byID[id] = s
	}
	if m.Unk != nil {
		id, ok := m.Vocab[*m.Unk]
		if !ok {
			return nil, fmt.Errorf("tokenizer: BPE unk_token %q is not in the vocabulary", *m.Unk)
		}
		b.unk, b.unkID = *m.Unk, id
	}
	for rank, raw := range m.Merges {
		// A merge is "a b" (older files) or ["a", "b"].
		var pair [2]string
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			l, r, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("tokenizer: BPE merge %d %q has no space", rank, s)
			}
			pair = [2]string{l, r}
		} else if err := json.Unmarshal(raw, &pair); err != nil {
			return nil, fmt.Errorf("tokenizer: BPE merge %d: %w", rank, err)
		}
		l, okl := m.Vocab[pair[0]]
		r, okr := m.Vocab[pair[1]]
		// The right part loses the continuing prefix in the merged token
		// (models/bpe/model.rs from_merges).
		right, cut := strings.CutPrefix(pair[1], prefix)
		id, ok := m.Vocab[pair[0]+right]
		if !okl || !okr || !ok || !cut {
			return nil, fmt.Errorf("tokenizer: BPE merge %d %q: token out of the vocabulary", rank, pair)
		}
		if _, dup := b.merges[pairKey(l, r)]; !dup {
			b.merges[pairKey(l, r)] = merge{rank: rank, id: id}
		}
	}
	return b, nil
}

func (b *bpe) vocabulary() map[string]int64 { return b.vocab }

func (b *bpe) idToToken(id int64) (string, bool) {
	s, ok := b.byID[id]
	return s, ok
}

// symbol is a piece of a word being merged: its id and its byte range in
// the word's normalized text.
type symbol struct {
	id         int64
	start, end int
}

func (b *bpe) tokenize(out []token, n *normalized, from, to int, buf []byte) ([]token, []byte) {
	word := n.s[from:to]
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return append(out, token{id: id, text: word, start: n.align[from].start, end: n.align[to-1].end}), buf
		}
	}
	if len(word) <= bpeCacheMaxWord {
		if v, ok := b.cache.Load(word); ok {
			for _, p := range v.([]cachedPiece) {
				out = append(out, token{id: p.id, text: p.text, start: n.align[from+int(p.start)].start, end: n.align[from+int(p.end)-1].end})
			}
			return out, buf
		}
	}
	syms := make([]symbol, 0, len(word))
	for i, r := range word {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(word[i:])
		}
		var id int64
		var ok bool
		if b.prefix == "" && b.suffix == "" {
			id, ok = b.vocab[word[i:i+size]]
		} else {
			buf = buf[:0]
			if i > 0 {
				buf = append(buf, b.prefix...)
			}
			buf = append(buf, word[i:i+size]...)
			if i+size == len(word) {
				buf = append(buf, b.suffix...)
			}
			id, ok = b.vocab[string(buf)]
		}
		if ok {
			syms = append(syms, symbol{id, i, i + size})
			continue
		}
		if b.byteFallback && b.appendBytes(&syms, word, i, size) {
			continue
		}
		if b.unk != "" {
			if last := len(syms) - 1; b.fuseUnk && last >= 0 && syms[last].id == b.unkID {
				syms[last].end = i + size
				continue
			}
			syms = append(syms, symbol{b.unkID, i, i + size})
		}
	}
	syms = b.mergeAll(syms)
	mark := len(out)
	for _, s := range syms {
		if s.end == s.start {
			continue // merged into the symbol before it
		}
		out = append(out, token{id: s.id, text: b.byID[s.id], start: n.align[from+s.start].start, end: n.align[from+s.end-1].end})
	}
	if len(word) <= bpeCacheMaxWord && b.cached.Load() < bpeCacheWords {
		b.store(word, syms, out[mark:])
	}
	return out, buf
}

// store caches the pieces of word: syms (merged-away ones empty) and the
// tokens made of them.
func (b *bpe) store(word string, syms []symbol, toks []token) {
	ps := make([]cachedPiece, 0, len(toks))
	for _, s := range syms {
		if s.end > s.start {
			ps = append(ps, cachedPiece{id: s.id, text: b.byID[s.id], start: int32(s.start), end: int32(s.end)})
		}
	}
	if _, loaded := b.cache.LoadOrStore(strings.Clone(word), ps); !loaded {
		b.cached.Add(1)
	}
}

// appendBytes adds <0xXX> tokens for each byte of word[i:i+size], if the
// vocabulary has them all (models/bpe/model.rs byte_fallback).
func (b *bpe) appendBytes(syms *[]symbol, word string, i, size int) bool {
	ids := make([]int64, 0, size)
	for k := 0; k < size; k++ {
		id, ok := b.vocab[fmt.Sprintf("<0x%02X>", word[i+k])]
		if !ok {
			return false
		}
		ids = append(ids, id)
	}
	for k, id := range ids {
		*syms = append(*syms, symbol{id, i + k, i + k + 1})
	}
	return true
}

// mergeAll applies merges lowest rank first, leftmost first among equal
// ranks, with a heap of candidate pairs (as models/bpe/word.rs merge_all),
// so a long word costs O(n log n), not O(n²). Merged-away symbols are left
// with an empty range.
func (b *bpe) mergeAll(syms []symbol) []symbol {
	if len(syms) < 2 {
		return syms
	}
	next := make([]int, len(syms))
	prev := make([]int, len(syms))
	for i := range syms {
		next[i], prev[i] = i+1, i-1
	}
	h := make(pairHeap, 0, len(syms))
	push := func(i int) {
		if i < 0 || next[i] >= len(syms) {
			return
		}
		if m, ok := b.merges[pairKey(syms[i].id, syms[next[i]].id)]; ok {
			h.push(candidate{m.rank, i, m.id, syms[next[i]].start})
		}
	}
	for i := range syms {
		push(i)
	}
	for len(h) > 0 {
		c := h.pop()
		j := next[c.pos]
		// Stale when either symbol changed since the pair was pushed.
		if syms[c.pos].end == syms[c.pos].start || j >= len(syms) || syms[j].start != c.right {
			continue
		}
		if m, ok := b.merges[pairKey(syms[c.pos].id, syms[j].id)]; !ok || m.rank != c.rank {
			continue
		}
		syms[c.pos] = symbol{c.id, syms[c.pos].start, syms[j].end}
		syms[j].end = syms[j].start
		next[c.pos] = next[j]
		if next[j] < len(syms) {
			prev[next[j]] = c.pos
		}
		push(prev[c.pos])
		push(c.pos)
	}
	return syms
}

type candidate struct {
	rank, pos int
	id        int64
	right     int // start of the right symbol when pushed
}

// pairHeap is a binary min-heap of candidates by (rank, pos), typed to
// spare container/heap's interface conversions.
type pairHeap []candidate

func (h pairHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].pos < h[j].pos
}

func (h *pairHeap) push(c candidate) {
	*h = append(*h, c)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *pairHeap) pop() candidate {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(q) && q.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(q) && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}
