package tokenizer

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unicode"
	"unicode/utf8"
)

// model turns one word into tokens.
type model interface {
	vocabulary() map[string]int64
	idToToken(id int64) (string, bool)
	tokenize(out []token, n *normalized, from, to int, buf []byte) ([]token, []byte)
}

type normalizer interface {
	normalize(text string, base int) normalized
}

// preTokenizer calls fn with each word of n.s[from:to], in w (n itself, or
// a new text for pre-tokenizers that rewrite it).
type preTokenizer interface {
	split(n *normalized, from, to int, fn func(w *normalized, from, to int))
}

// Tokenizer encodes text as one tokenizer.json describes. It is immutable
// after Load and safe for concurrent use.
type Tokenizer struct {
	model model
	norm  normalizer   // nil: none
	pre   preTokenizer // nil: none
	post  *postProcessor
	trunc *Truncation
	pad   *Padding
	added []AddedToken
	dec   decoder // nil: none

	addedByID map[int64]string // added tokens' contents by id
	special   map[string]bool  // contents of the special added tokens

	raw, normed *matcher // added tokens matched before / after normalization

	// scratch holds *[]token buffers for a sequence's tokens, which live
	// only until postProcess copies them into the Encoding.
	scratch *sync.Pool
}

// tokenBuf returns a token buffer from the pool.
func (t *Tokenizer) tokenBuf() *[]token {
	if b, ok := t.scratch.Get().(*[]token); ok {
		return b
	}
	b := make([]token, 0, 64)
	return &b
}

// putTokenBuf returns a buffer to the pool, unless a very long text made
// it too big to keep.
func (t *Tokenizer) putTokenBuf(b *[]token) {
	if cap(*b) <= 1<<14 {
		t.scratch.Put(b)
	}
}

// Encoding is one encoded input (or pair). Offsets are UTF-8 byte offsets
// into the text the token came from (the first or the second of a pair);
// tokens the post-processor adds have [0, 0] and Special true.
type Encoding struct {
	IDs           []int64
	TypeIDs       []int64
	AttentionMask []int64
	Tokens        []string
	Offsets       [][2]int
	Special       []bool
}

func newEncoding(n int) Encoding {
	return Encoding{
		IDs:           make([]int64, 0, n),
		TypeIDs:       make([]int64, 0, n),
		AttentionMask: make([]int64, 0, n),
		Tokens:        make([]string, 0, n),
		Offsets:       make([][2]int, 0, n),
		Special:       make([]bool, 0, n),
	}
}

// Len is the number of tokens.
func (e *Encoding) Len() int { return len(e.IDs) }

func (e *Encoding) appendTokens(ts []token, typeID int64) {
	for _, t := range ts {
		e.IDs = append(e.IDs, t.id)
		e.TypeIDs = append(e.TypeIDs, typeID)
		e.AttentionMask = append(e.AttentionMask, 1)
		e.Tokens = append(e.Tokens, t.text)
		e.Offsets = append(e.Offsets, [2]int{t.start, t.end})
		e.Special = append(e.Special, false)
	}
}

func (e *Encoding) appendSpecial(id int64, text string, typeID int64) {
	e.IDs = append(e.IDs, id)
	e.TypeIDs = append(e.TypeIDs, typeID)
	e.AttentionMask = append(e.AttentionMask, 1)
	e.Tokens = append(e.Tokens, text)
	e.Offsets = append(e.Offsets, [2]int{})
	e.Special = append(e.Special, true)
}

// MaxLength is the truncation max_length of tokenizer.json, special
// tokens included, or 0 when the file does not truncate.
func (t *Tokenizer) MaxLength() int {
	if t.trunc == nil {
		return 0
	}
	return t.trunc.MaxLength
}

// Truncation returns the file's truncation section, or nil.
func (t *Tokenizer) Truncation() *Truncation {
	if t.trunc == nil {
		return nil
	}
	c := *t.trunc
	return &c
}

// Padding returns the file's padding section, or nil. Encode never pads.
func (t *Tokenizer) Padding() *Padding {
	if t.pad == nil {
		return nil
	}
	c := *t.pad
	return &c
}

// AddedTokens returns the file's added_tokens.
func (t *Tokenizer) AddedTokens() []AddedToken {
	return append([]AddedToken(nil), t.added...)
}

// VocabSize is the number of ids: one more than the largest id of the
// vocabulary or the added tokens.
func (t *Tokenizer) VocabSize() int {
	max := int64(-1)
	for _, id := range t.model.vocabulary() {
		if id > max {
			max = id
		}
	}
	for _, a := range t.added {
		if a.ID > max {
			max = a.ID
		}
	}
	return int(max + 1)
}

// build assigns the added tokens' ids and sorts them by the pass that
// matches them. As tokenizer/added_vocabulary.rs add_tokens does, an added
// token in the model's vocabulary takes the vocabulary's id and one that is
// not takes the next id after the vocabulary and the added tokens before it;
// the file's id is ignored (the Rust core only warns when they differ).
func (t *Tokenizer) build() {
	var raw, normed []AddedToken
	next := int64(len(t.model.vocabulary()))
	assigned := map[string]int64{}
	for i := range t.added {
		a := &t.added[i]
		if id, ok := assigned[a.Content]; ok {
			a.ID = id
		} else if id, ok := t.model.vocabulary()[a.Content]; ok {
			a.ID = id
		} else {
			a.ID, next = next, next+1
		}
		assigned[a.Content] = a.ID
	}
	t.addedByID, t.special = make(map[int64]string, len(t.added)), make(map[string]bool)
	for _, a := range t.added {
		t.addedByID[a.ID] = a.Content
		if a.Special {
			t.special[a.Content] = true
		}
	}
	for _, a := range t.added {
		if a.Content == "" {
			continue
		}
		if a.Normalized && t.norm != nil {
			if a.Content = t.norm.normalize(a.Content, 0).s; a.Content == "" {
				continue
			}
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.raw, t.normed = newMatcher(raw), newMatcher(normed)
}

// Encode encodes one text; addSpecial applies the post-processor's special
// tokens (and counts them against truncation).
func (t *Tokenizer) Encode(text string, addSpecial bool) (Encoding, error) {
	buf := t.tokenBuf()
	defer t.putTokenBuf(buf)
	*buf = t.encodeSequence((*buf)[:0], text)
	a, _, err := t.truncate(*buf, nil, addSpecial)
	if err != nil {
		return Encoding{}, err
	}
	return t.postProcess(a, nil, addSpecial, [2]string{text}), nil
}

// EncodePair encodes a pair (a query and a document, for a cross-encoder):
// b's tokens get the pair template's type id and offsets into b.
func (t *Tokenizer) EncodePair(a, b string, addSpecial bool) (Encoding, error) {
	bufA, bufB := t.tokenBuf(), t.tokenBuf()
	defer t.putTokenBuf(bufA)
	defer t.putTokenBuf(bufB)
	*bufA = t.encodeSequence((*bufA)[:0], a)
	*bufB = t.encodeSequence((*bufB)[:0], b)
	ta, tb := *bufA, *bufB
	ta, tb, err := t.truncate(ta, tb, addSpecial)
	if err != nil {
		return Encoding{}, err
	}
	return t.postProcess(ta, tb, addSpecial, [2]string{a, b}), nil
}

func (t *Tokenizer) postProcess(a, b []token, addSpecial bool, texts [2]string) Encoding {
	if t.post != nil {
		return t.post.apply(a, b, addSpecial, texts)
	}
	e := newEncoding(len(a) + len(b))
	e.appendTokens(a, 0)
	if b != nil {
		e.appendTokens(b, 1)
	}
	return e
}

// ErrSequenceTooShort is returned when OnlyFirst or OnlySecond truncation
// cannot remove enough tokens from the sequence it may cut.
var ErrSequenceTooShort = errors.New("tokenizer: sequence too short to truncate")

// truncate follows huggingface/tokenizers utils/truncation.rs
// truncate_encodings (overflowing tokens are dropped).
func (t *Tokenizer) truncate(a, b []token, addSpecial bool) ([]token, []token, error) {
	if t.trunc == nil {
		return a, b, nil
	}
	max := t.trunc.MaxLength
	if addSpecial && t.post != nil {
		max -= t.post.added(b != nil)
		if max < 0 {
			max = 0
		}
	}
	total := len(a) + len(b)
	if total <= max {
		return a, b, nil
	}
	left := t.trunc.Direction == "Left"
	switch t.trunc.Strategy {
	case "LongestFirst":
		if b == nil {
			return cut(a, max, left), nil, nil
		}
		n1, n2 := len(a), len(b)
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > max {
			n2 = n1
		} else {
			n2 = maxInt(n1, max-n1)
		}
		if n1+n2 > max {
			n1 = max / 2
			n2 = n1 + max%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		return cut(a, n1, left), cut(b, n2, left), nil
	case "OnlyFirst", "OnlySecond":
		remove := total - max
		target := &a
		if t.trunc.Strategy == "OnlySecond" {
			if b == nil {
				return nil, nil, fmt.Errorf("%w: OnlySecond truncation of a single sequence", ErrSequenceTooShort)
			}
			target = &b
		}
		if len(*target) <= remove {
			return nil, nil, fmt.Errorf("%w: %d tokens over max_length %d", ErrSequenceTooShort, remove, t.trunc.MaxLength)
		}
		*target = cut(*target, len(*target)-remove, left)
		return a, b, nil
	}
	return a, b, nil
}

func cut(ts []token, n int, left bool) []token {
	if len(ts) <= n {
		return ts
	}
	if left {
		return ts[len(ts)-n:]
	}
	return ts[:n]
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// encodeSequence splits out added tokens, normalizes and pre-tokenizes the
// rest and runs the model over each word (tokenizer/mod.rs
// encode_single_sequence).
func (t *Tokenizer) encodeSequence(out []token, text string) []token {
	var buf []byte
	t.raw.split(text, func(from, to int, a *AddedToken) {
		if a != nil {
			out = append(out, token{id: a.ID, text: text[from:to], start: from, end: to})
			return
		}
		var n normalized
		if t.norm != nil {
			n = aligned(t.norm.normalize(text[from:to], from), from)
		} else {
			n = identity(text[from:to], from)
		}
		t.normed.split(n.s, func(nf, nt int, a *AddedToken) {
			if a != nil {
				out = append(out, token{id: a.ID, text: n.s[nf:nt], start: n.align[nf].start, end: n.align[nt-1].end})
				return
			}
			if nf >= nt {
				return
			}
			if t.pre == nil {
				out, buf = t.model.tokenize(out, &n, nf, nt, buf)
				return
			}
			t.pre.split(&n, nf, nt, func(w *normalized, wf, wt int) {
				out, buf = t.model.tokenize(out, w, wf, wt, buf)
			})
		})
	})
	return out
}

// bertPre is BertPreTokenizer: it splits on whitespace (dropped) and
// isolates each punctuation character (pre_tokenizers/bert.rs).
type bertPre struct{}

func (bertPre) split(n *normalized, from, to int, emit func(w *normalized, from, to int)) {
	fn := func(a, b int) { emit(n, a, b) }
	s := n.s
	start := -1
	for i := from; i < to; {
		r, size := utf8.DecodeRuneInString(s[i:to])
		switch {
		case isWhitespace(r):
			if start >= 0 {
				fn(start, i)
				start = -1
			}
		case isBertPunct(r):
			if start >= 0 {
				fn(start, i)
				start = -1
			}
			fn(i, i+size)
		default:
			if start < 0 {
				start = i
			}
		}
		i += size
	}
	if start >= 0 {
		fn(start, to)
	}
}

// matcher finds added tokens leftmost-longest, as the Aho-Corasick
// automaton of tokenizer/added_vocabulary.rs does.
type matcher struct {
	byFirst map[byte][]AddedToken // longest first
}

func newMatcher(ts []AddedToken) *matcher {
	m := &matcher{byFirst: map[byte][]AddedToken{}}
	for _, a := range ts {
		m.byFirst[a.Content[0]] = append(m.byFirst[a.Content[0]], a)
	}
	for _, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].Content) > len(l[j].Content) })
	}
	return m
}

// split calls fn for each part of s in order: a plain text range (a ==
// nil) or an added token's match, widened by lstrip/rstrip.
func (m *matcher) split(s string, fn func(from, to int, a *AddedToken)) {
	prev := 0
	for i := 0; i < len(s); i++ {
		cands := m.byFirst[s[i]]
		if len(cands) == 0 {
			continue
		}
		for k := range cands {
			a := &cands[k]
			end := i + len(a.Content)
			if end > len(s) || s[i:end] != a.Content {
				continue
			}
			if a.SingleWord && (endsWithWord(s[:i]) || startsWithWord(s[end:])) {
				continue
			}
			start := i
			if a.LStrip {
				for start > prev {
					r, size := utf8.DecodeLastRuneInString(s[:start])
					if !unicode.IsSpace(r) {
						break
					}
					start -= size
				}
			}
			if a.RStrip {
				for end < len(s) {
					r, size := utf8.DecodeRuneInString(s[end:])
					if !unicode.IsSpace(r) {
						break
					}
					end += size
				}
			}
			if prev < start {
				fn(prev, start, nil)
			}
			fn(start, end, a)
			prev = end
			i = end - 1
			break
		}
	}
	if prev < len(s) {
		fn(prev, len(s), nil)
	}
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func endsWithWord(s string) bool {
	r, size := utf8.DecodeLastRuneInString(s)
	return size > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, size := utf8.DecodeRuneInString(s)
	return size > 0 && isWordRune(r)
}
