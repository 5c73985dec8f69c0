package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/dlclark/regexp2/v2"
)

// sequencePre is the Sequence pre-tokenizer: each pre-tokenizer splits
// the words of the one before.
type sequencePre []preTokenizer

func (s sequencePre) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	if len(s) == 0 {
		fn(n, from, to)
		return
	}
	s[0].split(n, from, to, func(w *normalized, wf, wt int) {
		s[1:].split(w, wf, wt, fn)
	})
}

// splitPre is the Split pre-tokenizer (pre_tokenizers/split.rs): the
// pattern's matches and the text between them become words as behavior
// says. Regex patterns (Llama 3's, Qwen2's) use lookahead, which Go's
// regexp cannot compile; regexp2 can, and is given them as the Rust core
// gives them to Oniguruma.
type splitPre struct {
	re       *regexp2.Regexp
	behavior string
	invert   bool
}

func parseSplit(raw json.RawMessage) (*splitPre, error) {
	var sj struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(raw, &sj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing Split pre_tokenizer: %w", err)
	}
	var expr string
	switch {
	case sj.Pattern.String != nil:
		expr = regexp.QuoteMeta(*sj.Pattern.String)
	case sj.Pattern.Regex != nil:
		expr = *sj.Pattern.Regex
	default:
		return nil, fmt.Errorf("tokenizer: Split pre_tokenizer has no pattern")
	}
	switch sj.Behavior {
	case "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous":
	default:
		return nil, fmt.Errorf("%w: Split behavior %q", ErrUnsupported, sj.Behavior)
	}
	re, err := regexp2.Compile(expr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: Split pattern %q: %w", expr, err)
	}
	return &splitPre{re: re, behavior: sj.Behavior, invert: sj.Invert}, nil
}

type part struct {
	start, end int
	match      bool
}

func (p *splitPre) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	s := n.s[from:to]
	var parts []part
	prev := 0
	// An error is a match timeout, and none is set: the text stays whole.
	idx, _ := p.re.FindAllStringIndex(s, -1)
	for _, m := range idx {
		if m[0] > prev {
			parts = append(parts, part{prev, m[0], p.invert})
		}
		parts = append(parts, part{m[0], m[1], !p.invert})
		prev = m[1]
	}
	if prev < len(s) {
		parts = append(parts, part{prev, len(s), p.invert})
	}
	for _, pt := range p.merge(parts) {
		if pt.end > pt.start && !(p.behavior == "Removed" && pt.match) {
			fn(n, from+pt.start, from+pt.end)
		}
	}
}

// merge applies behavior as normalizer.rs NormalizedString::split does.
func (p *splitPre) merge(parts []part) []part {
	var out []part
	prevMatch := false
	switch p.behavior {
	case "Removed", "Isolated":
		return parts
	case "Contiguous":
		for _, pt := range parts {
			if pt.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = pt.end
			} else {
				out = append(out, part{pt.start, pt.end, false})
			}
			prevMatch = pt.match
		}
	case "MergedWithPrevious":
		for _, pt := range parts {
			if pt.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = pt.end
			} else {
				out = append(out, part{pt.start, pt.end, false})
			}
			prevMatch = pt.match
		}
	case "MergedWithNext":
		for i := len(parts) - 1; i >= 0; i-- {
			pt := parts[i]
			if pt.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = pt.start
			} else {
				out = append(out, part{pt.start, pt.end, false})
			}
			prevMatch = pt.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}
