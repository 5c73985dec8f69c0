package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// metaspace is the Metaspace pre-tokenizer (pre_tokenizers/metaspace.rs,
// SentencePiece's layout): spaces become the replacement character ("▁"),
// one is put in front as prepend_scheme says, and with split each word
// starts at a replacement character.
type metaspace struct {
	repl       string
	prepend    string // always, first or never
	splitWords bool
}

func parseMetaspace(raw json.RawMessage) (*metaspace, error) {
	var mj struct {
		Replacement    string  `json:"replacement"`
		PrependScheme  *string `json:"prepend_scheme"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		Split          *bool   `json:"split"`
	}
	if err := json.Unmarshal(raw, &mj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing Metaspace pre_tokenizer: %w", err)
	}
	m := &metaspace{repl: "▁", prepend: "always", splitWords: true}
	if mj.Replacement != "" {
		m.repl = mj.Replacement
	}
	if mj.AddPrefixSpace != nil && !*mj.AddPrefixSpace {
		m.prepend = "never"
	}
	if mj.PrependScheme != nil {
		m.prepend = *mj.PrependScheme
	}
	switch m.prepend {
	case "always", "first", "never":
	default:
		return nil, fmt.Errorf("%w: Metaspace prepend_scheme %q", ErrUnsupported, m.prepend)
	}
	if mj.Split != nil {
		m.splitWords = *mj.Split
	}
	return m, nil
}

func (m *metaspace) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	if from >= to {
		return
	}
	c := to - from + 2*strings.Count(n.s[from:to], " ") + len(m.repl) // spaces grow to the replacement
	b := builder{out: make([]byte, 0, c), align: make([]span, 0, c)}
	first := n.align[from].start
	if m.prepend == "always" || m.prepend == "first" && first == 0 {
		if !strings.HasPrefix(n.s[from:to], m.repl) && n.s[from] != ' ' {
			for _, r := range m.repl {
				b.add(r, n.align[from]) // over the first character, as the Rust core reports
			}
		}
	}
	for i := from; i < to; {
		r, size := utf8.DecodeRuneInString(n.s[i:to])
		if r == ' ' {
			b.out = append(b.out, m.repl...)
		} else {
			b.out = append(b.out, n.s[i:i+size]...)
		}
		for len(b.align) < len(b.out) {
			b.align = append(b.align, n.align[i])
		}
		i += size
	}
	w := &normalized{s: string(b.out), align: b.align}
	if !m.splitWords {
		fn(w, 0, len(w.s))
		return
	}
	// MergedWithNext on the replacement: each word begins with one.
	start := 0
	for i := 0; i < len(w.s); {
		if i > start && strings.HasPrefix(w.s[i:], m.repl) {
			fn(w, start, i)
			start = i
		}
		_, size := utf8.DecodeRuneInString(w.s[i:])
		i += size
	}
	if start < len(w.s) {
		fn(w, start, len(w.s))
	}
}
