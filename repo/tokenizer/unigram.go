package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// unigramUnkPenalty is what an unknown character costs below the lowest
// score (models/unigram/model.rs K_UNK_PENALTY, from SentencePiece).
const unigramUnkPenalty = 10.0

// unigram is huggingface/tokenizers models/unigram (SentencePiece's
// unigram model, used by the XLM-R family): each word is cut where the sum
// of the pieces' log probabilities is highest (Viterbi), characters with no
// piece become unk (runs of them fused into one token), and byte_fallback
// spells an unknown run as <0xXX> pieces when the vocabulary has them.
type unigram struct {
	pieces   []string
	scores   []float64
	vocab    map[string]int64
	trie     pieceTrie
	minScore float64
	unkID    int64
	byteFall bool
	byteIDs  [256]int64 // -1 where <0xXX> is missing

	// cache maps a word to its tokens (offsets relative to the word), as
	// models/unigram/model.rs caches up to 10,000 words.
	cache  sync.Map
	cached atomic.Int64
	nodes  sync.Pool // *[]node scratch for the lattice
}

func parseUnigram(raw json.RawMessage) (*unigram, error) {
	var m struct {
		Vocab        [][2]json.RawMessage `json:"vocab"`
		UnkID        *int64               `json:"unk_id"`
		ByteFallback bool                 `json:"byte_fallback"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing Unigram model: %w", err)
	}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("tokenizer: Unigram vocabulary is empty")
	}
	// The Rust core fails a whole encoding when an unknown character meets
	// a model without unk_id; a server is better told at load time.
	if m.UnkID == nil {
		return nil, fmt.Errorf("%w: Unigram without unk_id", ErrUnsupported)
	}
	if *m.UnkID < 0 || *m.UnkID >= int64(len(m.Vocab)) {
		return nil, fmt.Errorf("tokenizer: Unigram unk_id %d outside the vocabulary (%d)", *m.UnkID, len(m.Vocab))
	}
	u := &unigram{
		pieces: make([]string, len(m.Vocab)), scores: make([]float64, len(m.Vocab)),
		vocab:    make(map[string]int64, len(m.Vocab)),
		minScore: math.Inf(1), unkID: *m.UnkID, byteFall: m.ByteFallback,
	}
	for i, e := range m.Vocab {
		if err := json.Unmarshal(e[0], &u.pieces[i]); err != nil {
			return nil, fmt.Errorf("tokenizer: Unigram piece %d: %w", i, err)
		}
		if err := json.Unmarshal(e[1], &u.scores[i]); err != nil {
			return nil, fmt.Errorf("tokenizer: Unigram piece %d score: %w", i, err)
		}
		// A repeated piece keeps its last id, as the Rust core's map does.
		u.vocab[u.pieces[i]] = int64(i)
		u.minScore = min(u.minScore, u.scores[i])
	}
	if int64(len(m.Vocab)) > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: Unigram vocabulary of %d pieces", len(m.Vocab))
	}
	u.trie = newPieceTrie(u.vocab)
	for b := range u.byteIDs {
		u.byteIDs[b] = -1
		if id, ok := u.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			u.byteIDs[b] = id
		}
	}
	return u, nil
}

func (u *unigram) vocabulary() map[string]int64 { return u.vocab }

func (u *unigram) idToToken(id int64) (string, bool) {
	if id < 0 || id >= int64(len(u.pieces)) {
		return "", false
	}
	return u.pieces[id], true
}

// node is a lattice position: the best path's score up to it, where its
// last piece starts (-1: unreached) and that piece's id.
type node struct {
	score float64
	start int
	id    int64
}

func (u *unigram) tokenize(out []token, n *normalized, from, to int, buf []byte) ([]token, []byte) {
	word := n.s[from:to]
	if word == "" {
		return out, buf
	}
	if v, ok := u.cache.Load(word); ok {
		for _, p := range v.([]cachedPiece) {
			out = append(out, token{id: p.id, text: p.text, start: n.align[from+int(p.start)].start, end: n.align[from+int(p.end)-1].end})
		}
		return out, buf
	}
	mark := len(out)
	out = u.viterbi(out, word)
	if len(word) <= bpeCacheMaxWord && u.cached.Load() < bpeCacheWords {
		ps := make([]cachedPiece, len(out)-mark)
		for i, t := range out[mark:] {
			ps[i] = cachedPiece{id: t.id, text: t.text, start: int32(t.start), end: int32(t.end)}
		}
		if _, loaded := u.cache.LoadOrStore(strings.Clone(word), ps); !loaded {
			u.cached.Add(1)
		}
	}
	// The pieces hold offsets in word: map them to the original text.
	for i := mark; i < len(out); i++ {
		out[i].start, out[i].end = n.align[from+out[i].start].start, n.align[from+out[i].end-1].end
	}
	return out, buf
}

// viterbi appends the pieces of word with offsets into word: the best
// path through the lattice of vocabulary pieces (model.rs
// encode_optimized), runs of unk fused.
func (u *unigram) viterbi(out []token, word string) []token {
	bp, _ := u.nodes.Get().(*[]node)
	if bp == nil {
		bp = new([]node)
	}
	defer func() {
		if cap(*bp) <= 1<<16 { // a lattice for a very long word is not kept
			u.nodes.Put(bp)
		}
	}()
	if cap(*bp) < len(word)+1 {
		*bp = make([]node, len(word)+1)
	}
	best := (*bp)[:len(word)+1]
	best[0] = node{}
	for i := 1; i < len(best); i++ {
		best[i] = node{start: -1}
	}
	unkScore := u.minScore - unigramUnkPenalty
	for at := 0; at < len(word); {
		_, mblen := utf8.DecodeRuneInString(word[at:])
		base := best[at].score
		single := false
		// The trie walk, inline (a closure would cost a call per piece).
		cur := int32(0)
		for i := at; i < len(word); i++ {
			if cur = u.trie.child(cur, word[i]); cur < 0 {
				break
			}
			id := int64(u.trie.ids[cur])
			if id < 0 {
				continue
			}
			end := i + 1
			if cand := base + u.scores[id]; best[end].start < 0 || cand > best[end].score {
				best[end] = node{cand, at, id}
			}
			single = single || end-at == mblen
		}
		if !single {
			if t := &best[at+mblen]; t.start < 0 || unkScore+base > t.score {
				*t = node{unkScore + base, at, u.unkID}
			}
		}
		at += mblen
	}
	// Walk back, fusing runs of unk; then put the pieces in order.
	mark := len(out)
	for end := len(word); end > 0; {
		nd := best[end]
		start := nd.start
		if nd.id == u.unkID {
			for start > 0 && best[start].id == u.unkID {
				start = best[start].start
			}
			out = u.appendUnknown(out, word, start, end)
		} else {
			out = append(out, token{id: nd.id, text: u.pieces[nd.id], start: start, end: end})
		}
		end = start
	}
	reverse(out[mark:])
	return out
}

// appendUnknown adds word[start:end], a run of unk (tokens in reverse
// order: the caller reverses them), as model.rs tokenize maps it: its id
// if the run is a piece after all, else <0xXX> pieces with byte_fallback,
// else unk_id with the text itself.
func (u *unigram) appendUnknown(out []token, word string, start, end int) []token {
	s := word[start:end]
	if id, ok := u.vocab[s]; ok {
		return append(out, token{id: id, text: u.pieces[id], start: start, end: end})
	}
	if u.byteFall {
		ok := true
		for i := 0; i < len(s); i++ {
			ok = ok && u.byteIDs[s[i]] >= 0
		}
		if ok {
			for i := len(s) - 1; i >= 0; i-- {
				id := u.byteIDs[s[i]]
				out = append(out, token{id: id, text: u.pieces[id], start: start, end: end})
			}
			return out
		}
	}
	return append(out, token{id: u.unkID, text: strings.Clone(s), start: start, end: end})
}

func reverse(ts []token) {
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
}

// pieceTrie is a byte trie of the vocabulary, numbered breadth first so
// that a node's children are consecutive nodes, sorted by their byte: a
// node costs 11 bytes (a 250k-piece vocabulary is about 20 MB, a third of a
// map-based trie).
type pieceTrie struct {
	first []int32  // per node: its first child
	count []uint16 // per node: how many children
	label []byte   // per node: the byte that leads to it
	ids   []int32  // per node: the piece ending there, or -1
}

// newPieceTrie builds the trie of vocab's pieces: sorted, the pieces under
// a node form a range, split by their next byte into its children.
func newPieceTrie(vocab map[string]int64) pieceTrie {
	pieces := make([]string, 0, len(vocab))
	for p := range vocab {
		if p != "" {
			pieces = append(pieces, p)
		}
	}
	sort.Strings(pieces)
	var t pieceTrie
	type piecesAt struct{ lo, hi, depth int32 } // pieces[lo:hi] share their first depth bytes
	ranges := []piecesAt{{0, int32(len(pieces)), 0}}
	t.label = append(t.label, 0)
	for i := 0; i < len(ranges); i++ {
		r := ranges[i]
		id, k := int32(-1), r.lo
		if k < r.hi && len(pieces[k]) == int(r.depth) {
			id = int32(vocab[pieces[k]])
			k++
		}
		t.ids = append(t.ids, id)
		t.first = append(t.first, int32(len(ranges)))
		n := 0
		for k < r.hi {
			c := pieces[k][r.depth]
			j := k + 1
			for j < r.hi && pieces[j][r.depth] == c {
				j++
			}
			ranges = append(ranges, piecesAt{k, j, r.depth + 1})
			t.label = append(t.label, c)
			k = j
			n++
		}
		t.count = append(t.count, uint16(n))
	}
	return t
}

// child returns the child of node cur reached by byte c, or -1.
func (t *pieceTrie) child(cur int32, c byte) int32 {
	lo, hi := t.first[cur], t.first[cur]+int32(t.count[cur])
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		if t.label[m] < c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.first[cur]+int32(t.count[cur]) && t.label[lo] == c {
		return lo
	}
	return -1
}
