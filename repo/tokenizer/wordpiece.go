package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// wordPiece is huggingface/tokenizers models/wordpiece: greedy
// longest-match-first over each word, continuation pieces prefixed, and
// the whole word as unk_token when a piece is missing or the word is too
// long.
type wordPiece struct {
	vocab    map[string]int64
	byID     map[int64]string // the vocabulary's own strings, so tokens share them
	unk      string
	unkID    int64
	prefix   string
	maxChars int
}

func parseWordPiece(raw json.RawMessage) (*wordPiece, error) {
	var m struct {
		Vocab    map[string]int64 `json:"vocab"`
		Unk      *string          `json:"unk_token"`
		Prefix   *string          `json:"continuing_subword_prefix"`
		MaxChars *int             `json:"max_input_chars_per_word"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing WordPiece model: %w", err)
	}
	// Defaults as models/wordpiece/mod.rs WordPieceBuilder.
	w := &wordPiece{vocab: m.Vocab, byID: make(map[int64]string, len(m.Vocab)), unk: "[UNK]", prefix: "##", maxChars: 100}
	for s, id := range m.Vocab {
		w.byID[id] = s
	}
	if m.Unk != nil {
		w.unk = *m.Unk
	}
	if m.Prefix != nil {
		w.prefix = *m.Prefix
	}
	if m.MaxChars != nil {
		w.maxChars = *m.MaxChars
	}
	id, ok := w.vocab[w.unk]
	if !ok {
		return nil, fmt.Errorf("tokenizer: WordPiece unk_token %q is not in the vocabulary", w.unk)
	}
	w.unkID = id
	return w, nil
}

// token is one token of a sequence before post-processing; start and end
// are byte offsets into the original input.
type token struct {
	id         int64
	text       string
	start, end int
}

// tokenize appends the pieces of word n.s[from:to] to out.
func (w *wordPiece) tokenize(out []token, n *normalized, from, to int, buf []byte) ([]token, []byte) {
	word := n.s[from:to]
	if utf8.RuneCountInString(word) > w.maxChars {
		return append(out, w.unkToken(n, from, to)), buf
	}
	mark := len(out)
	for start := 0; start < len(word); {
		end := len(word)
		found := false
		for end > start {
			buf = buf[:0]
			if start > 0 {
				buf = append(buf, w.prefix...)
			}
			buf = append(buf, word[start:end]...)
			if id, ok := w.vocab[string(buf)]; ok {
				out = append(out, token{id: id, text: w.byID[id],
					start: n.align[from+start].start, end: n.align[from+end-1].end})
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if !found {
			return append(out[:mark], w.unkToken(n, from, to)), buf
		}
		start = end
	}
	return out, buf
}

func (w *wordPiece) unkToken(n *normalized, from, to int) token {
	return token{id: w.unkID, text: w.unk, start: n.align[from].start, end: n.align[to-1].end}
}

func (w *wordPiece) vocabulary() map[string]int64 { return w.vocab }

func (w *wordPiece) idToToken(id int64) (string, bool) {
	s, ok := w.byID[id]
	return s, ok
}
