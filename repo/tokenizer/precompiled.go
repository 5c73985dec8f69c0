package tokenizer

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// ErrCharsmap marks a Precompiled normalizer whose precompiled_charsmap
// cannot be read.
var ErrCharsmap = errors.New("tokenizer: bad precompiled_charsmap")

// precompiled is the Precompiled normalizer: SentencePiece's compiled
// normalization rules (nmt_nfkc and the like), as XLM-R's tokenizer.json
// carries them. The charsmap is a little-endian u32 trie size, a darts-clone
// double-array trie of that many bytes, then NUL-terminated replacement
// strings the trie's values index (huggingface/spm_precompiled src/lib.rs;
// google/sentencepiece src/normalizer.cc).
type precompiled struct {
	units []uint32
	repl  string
	ascii [utf8.RuneSelf]struct { // lookup of each ASCII character alone
		s  string
		ok bool
	}
}

func parsePrecompiled(b64 string) (*precompiled, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCharsmap, err)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCharsmap, len(data))
	}
	size := int(binary.LittleEndian.Uint32(data))
	if size%4 != 0 || size > len(data)-4 || size == 0 {
		return nil, fmt.Errorf("%w: trie of %d bytes in %d", ErrCharsmap, size, len(data))
	}
	p := &precompiled{units: make([]uint32, size/4), repl: string(data[4+size:])}
	for i := range p.units {
		p.units[i] = binary.LittleEndian.Uint32(data[4+4*i:])
	}
	for c := range p.ascii {
		p.ascii[c].s, p.ascii[c].ok = p.lookup(string(rune(c)))
	}
	return p, nil
}

// Double-array unit fields, as darts-clone lays them out.
func unitLeaf(u uint32) bool     { return u>>8&1 == 1 }
func unitValue(u uint32) int     { return int(u & (1<<31 - 1)) }
func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func unitOffset(u uint32) uint32 { return u >> 10 << (u & (1 << 9) >> 6) }

// lookup returns the replacement of the shortest rule that is a prefix of
// chunk (the first common-prefix result, as spm_precompiled's transform
// takes), and whether there is one.
func (p *precompiled) lookup(chunk string) (string, bool) {
	pos := int(unitOffset(p.units[0]))
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		if c == 0 {
			break
		}
		pos ^= int(c)
		if pos >= len(p.units) {
			return "", false
		}
		u := p.units[pos]
		if unitLabel(u) != uint32(c) {
			return "", false
		}
		pos ^= int(unitOffset(u))
		if unitLeaf(u) {
			if pos >= len(p.units) {
				return "", false
			}
			v := unitValue(p.units[pos])
			if v >= len(p.repl) {
				return "", false
			}
			s := p.repl[v:]
			if end := strings.IndexByte(s, 0); end >= 0 {
				s = s[:end]
			}
			return s, true
		}
	}
	return "", false
}

// normalize follows normalizers/precompiled.rs: a grapheme cluster under 6
// bytes is replaced whole if a rule matches it, else each character is
// looked up on its own; the changes are aligned as NormalizedString's
// transform does.
func (p *precompiled) normalize(text string, base int) normalized {
	var cs []change
	modified := false
	state := -1
	for rest := text; rest != ""; {
		var g string
		if c := rest[0]; c < utf8.RuneSelf && (len(rest) == 1 || rest[1] < utf8.RuneSelf && !(c == '\r' && rest[1] == '\n')) {
			// An ASCII character before another is a grapheme of its own
			// (except CR LF): skip the segmenter.
			if r := p.ascii[c]; r.ok {
				if !modified {
					cs = p.changesSoFar(text, len(text)-len(rest))
				}
				modified = true
				cs = replaceChanges(cs, rest[:1], r.s)
			} else if modified {
				cs = append(cs, change{rune(c), 0})
			}
			rest, state = rest[1:], -1
			continue
		}
		g, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		at := len(text) - len(rest) - len(g)
		if len(g) < 6 {
			if r, ok := p.lookup(g); ok {
				if !modified {
					cs = p.changesSoFar(text, at)
				}
				modified = true
				cs = replaceChanges(cs, g, r)
				continue
			}
		}
		for i := 0; i < len(g); {
			c, size := utf8.DecodeRuneInString(g[i:])
			if r, ok := p.lookup(g[i : i+size]); ok {
				if !modified {
					cs = p.changesSoFar(text, at+i)
				}
				modified = true
				cs = replaceChanges(cs, g[i:i+size], r)
			} else if modified {
				cs = append(cs, change{c, 0})
			}
			i += size
		}
	}
	if !modified {
		return unchanged(text)
	}
	n := identity(text, base)
	return transform(&n, cs, 0)
}

// changesSoFar is the list of changes that keeps text[:at] as it is.
func (p *precompiled) changesSoFar(text string, at int) []change {
	cs := make([]change, 0, len(text))
	for _, c := range text[:at] {
		cs = append(cs, change{c, 0})
	}
	return cs
}

// replaceChanges is precompiled.rs replace: the new characters replace
// the old one for one; extra new ones are insertions, and when there are
// fewer, the last change removes the rest.
func replaceChanges(cs []change, old, repl string) []change {
	diff := utf8.RuneCountInString(repl) - utf8.RuneCountInString(old)
	for _, c := range repl {
		cs = append(cs, change{c, 0})
	}
	switch {
	case diff > 0:
		for i := len(cs) - 1; i >= 0 && i >= len(cs)-diff; i-- {
			cs[i].n = 1
		}
	case diff < 0 && len(cs) > 0:
		cs[len(cs)-1].n += diff
	}
	return cs
}
