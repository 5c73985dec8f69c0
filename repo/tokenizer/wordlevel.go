package tokenizer

import (
	"encoding/json"
	"fmt"
)

// wordLevel is huggingface/tokenizers models/wordlevel: each word is one
// token, its id or unk_token's.
type wordLevel struct {
	vocab map[string]int64
	byID  map[int64]string
	unk   string
	unkID int64
}

func parseWordLevel(raw json.RawMessage) (*wordLevel, error) {
	var m struct {
		Vocab map[string]int64 `json:"vocab"`
		Unk   *string          `json:"unk_token"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing WordLevel model: %w", err)
	}
	w := &wordLevel{vocab: m.Vocab, byID: make(map[int64]string, len(m.Vocab)), unk: "<unk>"}
	if m.Unk != nil {
		w.unk = *m.Unk
	}
	for s, id := range m.Vocab {
		w.byID[id] = s
	}
	// The Rust core fails a text with an unknown word when unk_token is
	// not in the vocabulary; a server is better told at load time.
	id, ok := w.vocab[w.unk]
	if !ok {
		return nil, fmt.Errorf("%w: WordLevel unk_token %q not in the vocabulary", ErrUnsupported, w.unk)
	}
	w.unkID = id
	return w, nil
}

func (w *wordLevel) vocabulary() map[string]int64 { return w.vocab }

func (w *wordLevel) idToToken(id int64) (string, bool) {
	s, ok := w.byID[id]
	return s, ok
}

func (w *wordLevel) tokenize(out []token, n *normalized, from, to int, buf []byte) ([]token, []byte) {
	t := token{id: w.unkID, text: w.unk, start: n.align[from].start, end: n.align[to-1].end}
	if id, ok := w.vocab[n.s[from:to]]; ok {
		t.id, t.text = id, w.byID[id]
	}
	return append(out, t), buf
}
