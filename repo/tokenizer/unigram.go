package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
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
		vocab: make(map[string]int64, len(m.Vocab)), trie: newPieceTrie(len(m.Vocab)),
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
	for p, id := range u.vocab {
		u.trie.add(p, id)
	}
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
	best := make([]node, len(word)+1)
	for i := 1; i < len(best); i++ {
		best[i].start = -1
	}
	unkScore := u.minScore - unigramUnkPenalty
	for at := 0; at < len(word); {
		_, mblen := utf8.DecodeRuneInString(word[at:])
		base := best[at].score
		single := false
		u.trie.prefixes(word, at, func(end int, id int64) {
			cand := base + u.scores[id]
			if t := &best[end]; t.start < 0 || cand > t.score {
				*t = node{cand, at, id}
			}
			if end-at == mblen {
				single = true
			}
		})
		if !single {
			if t := &best[at+mblen]; t.start < 0 || unkScore+base > t.score {
				*t = node{unkScore + base, at, u.unkID}
			}
		}
		at += mblen
	}
	// Walk back, fusing runs of unk; then emit in order.
	mark := len(out)
	for end := len(word); end > 0; {
		nd := best[end]
		start := nd.start
		if nd.id == u.unkID {
			for start > 0 && best[start].id == u.unkID {
				start = best[start].start
			}
		}
		out = u.appendPiece(out, n, from, start, end)
		end = start
	}
	reverse(out[mark:])
	return out, buf
}

// appendPiece adds word[start:end] (tokens in reverse order: the caller
// reverses them), as model.rs tokenize maps a piece to ids.
func (u *unigram) appendPiece(out []token, n *normalized, from, start, end int) []token {
	s := n.s[from+start : from+end]
	off := [2]int{n.align[from+start].start, n.align[from+end-1].end}
	if id, ok := u.vocab[s]; ok {
		return append(out, token{id: id, text: u.pieces[id], start: off[0], end: off[1]})
	}
	if u.byteFall {
		ok := true
		for i := 0; i < len(s); i++ {
			ok = ok && u.byteIDs[s[i]] >= 0
		}
		if ok {
			for i := len(s) - 1; i >= 0; i-- {
				id := u.byteIDs[s[i]]
				out = append(out, token{id: id, text: u.pieces[id], start: off[0], end: off[1]})
			}
			return out
		}
	}
	return append(out, token{id: u.unkID, text: s, start: off[0], end: off[1]})
}

func reverse(ts []token) {
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
}

// pieceTrie is a byte trie of the vocabulary: one map from (node, byte) to
// child node, which keeps a 250k-piece vocabulary compact.
type pieceTrie struct {
	edges map[uint64]int32
	ids   []int64 // per node: the piece ending there, or -1
}

func newPieceTrie(n int) pieceTrie {
	return pieceTrie{edges: make(map[uint64]int32, 4*n), ids: append(make([]int64, 0, 4*n), -1)}
}

func (t *pieceTrie) add(piece string, id int64) {
	cur := int32(0)
	for i := 0; i < len(piece); i++ {
		k := uint64(cur)<<8 | uint64(piece[i])
		next, ok := t.edges[k]
		if !ok {
			next = int32(len(t.ids))
			t.ids = append(t.ids, -1)
			t.edges[k] = next
		}
		cur = next
	}
	if len(piece) > 0 {
		t.ids[cur] = id
	}
}

// prefixes calls fn(end, id) for each piece that s[at:end] is, shortest
// first.
func (t *pieceTrie) prefixes(s string, at int, fn func(end int, id int64)) {
	cur := int32(0)
	for i := at; i < len(s); i++ {
		next, ok := t.edges[uint64(cur)<<8|uint64(s[i])]
		if !ok {
			return
		}
		cur = next
		if id := t.ids[cur]; id >= 0 {
			fn(i+1, id)
		}
	}
}
