package openai

import (
	"encoding/json"
	"unicode"
)

// MaxItems bounds the inputs of one call: OpenAI's embeddings limit ("an
// array of at most 2048 items"), applied to every route's list.
const MaxItems = 2048

// inputs is an embeddings call's input: texts, or rows of token ids
// (OpenAI's and TEI's `str | [str] | [int] | [[int]]`).
type inputs struct {
	texts []string
	ids   [][]int64
}

func (in inputs) len() int { return max(len(in.texts), len(in.ids)) }

// parseInputs reads raw, the field param of the body. Errors name param
// and the limit they break.
func parseInputs(raw json.RawMessage, param string) (inputs, error) {
	kind := firstByte(raw)
	switch kind {
	case 0, 'n':
		return inputs{}, empty(param, "`%s` cannot be empty", param)
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return inputs{}, invalid(param, "`%s`: %v", param, err)
		}
		if s == "" {
			return inputs{}, empty(param, "`%s` cannot be an empty string", param)
		}
		return inputs{texts: []string{s}}, nil
	case '[':
	default:
		return inputs{}, invalid(param, "`%s` must be a string, an array of strings, an array of token ids or an array of arrays of token ids", param)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return inputs{}, invalid(param, "`%s`: %v", param, err)
	}
	if len(items) == 0 {
		return inputs{}, empty(param, "`%s` cannot be empty", param)
	}
	if len(items) > MaxItems {
		return inputs{}, invalid(param, "`%s` has %d items; at most %d are allowed", param, len(items), MaxItems)
	}
	var in inputs
	var err error
	switch b := firstByte(items[0]); {
	case b == '"':
		err = json.Unmarshal(raw, &in.texts)
		for i, s := range in.texts {
			if err == nil && s == "" {
				return inputs{}, empty(param, "`%s[%d]` cannot be an empty string", param, i)
			}
		}
	case b == '-' || b >= '0' && b <= '9':
		var row []int64
		err = json.Unmarshal(raw, &row)
		in.ids = [][]int64{row}
	case b == '[':
		err = json.Unmarshal(raw, &in.ids)
		for i, row := range in.ids {
			if err == nil && len(row) == 0 {
				return inputs{}, empty(param, "`%s[%d]` cannot be empty", param, i)
			}
		}
	default:
		return inputs{}, invalid(param, "`%s` must hold strings, token ids or arrays of token ids", param)
	}
	if err != nil {
		return inputs{}, invalid(param, "`%s` mixes types or holds a value of the wrong type: %v", param, err)
	}
	return in, nil
}

// firstByte is raw's first non-space byte, 0 when none.
func firstByte(raw json.RawMessage) byte {
	for _, b := range raw {
		if !unicode.IsSpace(rune(b)) {
			return b
		}
	}
	return 0
}
