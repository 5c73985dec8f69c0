package openai

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/textmodel"
	"github.com/inferd/inferd/repo/tokenizer"
)

// row is one tokenized input: its ids and token type ids, all attended.
type row struct {
	ids, types []int64
}

// encodeOpts say how a call's texts become rows.
type encodeOpts struct {
	param string
	fam   family
	// truncate cuts rows to the model's max length (TEI's truncate,
	// from the side TEI's truncation_direction names: left when set);
	// otherwise a longer row is refused.
	truncate, left bool
}

// tokenizerFor is d's tokenizer as opts want it: truncating to d's max
// length, or not truncating at all (then too long is an error, checked by
// checkLength), whatever the file's truncation section says.
func tokenizerFor(d *textmodel.Model, opts encodeOpts) (*tokenizer.Tokenizer, error) {
	if !opts.truncate || d.MaxLength <= 0 {
		return d.Tokenizer.WithTruncation(nil)
	}
	dir := "Right"
	if opts.left {
		dir = "Left"
	}
	return d.Tokenizer.WithTruncation(&tokenizer.Truncation{MaxLength: d.MaxLength, Strategy: "LongestFirst", Direction: dir})
}

// encodeTexts tokenizes texts (pairs with query when pair is set: a
// cross-encoder's (query, text)) and returns the rows with their token
// count, special tokens included.
func encodeTexts(d *textmodel.Model, texts []string, query string, pair bool, opts encodeOpts) ([]row, int, error) {
	tok, err := tokenizerFor(d, opts)
	if err != nil {
		return nil, 0, err
	}
	rows := make([]row, len(texts))
	total := 0
	if pair {
		if query, err = bound(d, query, -1, opts); err != nil {
			return nil, 0, err
		}
	}
	for i, text := range texts {
		if text, err = bound(d, text, i, opts); err != nil {
			return nil, 0, err
		}
		var enc tokenizer.Encoding
		if pair {
			enc, err = tok.EncodePair(query, text, true)
		} else {
			enc, err = tok.Encode(text, true)
		}
		if err != nil {
			return nil, 0, &Error{Status: 400, Message: fmt.Sprintf("input %d: %v", i, err), Type: invalidRequest, Param: opts.param,
				TEIType: "Tokenizer", TEIStatus: 422}
		}
		if err := checkLength(d, enc.Len(), i, opts); err != nil {
			return nil, 0, err
		}
		rows[i] = row{ids: enc.IDs, types: enc.TypeIDs}
		total += enc.Len()
	}
	return rows, total, nil
}

// maxBytesPerToken bounds a text's bytes per token of the model's max
// length: tokenizing allocates about 100 bytes a token, so a 64 MiB body
// of one-letter words must not be tokenized whole only to be refused (or
// truncated) afterwards. Real text has 3 to 6 bytes a token.
const maxBytesPerToken = 64

// bound keeps text within maxBytesPerToken × the max length: a longer one
// is refused, or, when the call truncates, cut first (at a character
// boundary, on the side truncation removes), which keeps every token the
// truncation keeps unless the kept part averages more than
// maxBytesPerToken bytes a token. i is the input's index (-1: the query).
func bound(d *textmodel.Model, text string, i int, opts encodeOpts) (string, error) {
	limit := d.MaxLength * maxBytesPerToken
	if d.MaxLength <= 0 || len(text) <= limit {
		return text, nil
	}
	if !opts.truncate {
		what := fmt.Sprintf("input %d", i)
		if i < 0 {
			what = "the query"
		}
		if opts.fam == tei {
			return "", invalid(opts.param, "Input validation error: `inputs` must have less than %d tokens; %s has %d bytes, more than that many tokens hold", d.MaxLength, what, len(text))
		}
		return "", invalid(opts.param, "This model's maximum context length is %d tokens; %s has %d bytes, more than that many tokens hold. Shorten the input.", d.MaxLength, what, len(text))
	}
	if opts.left {
		at := len(text) - limit
		for at < len(text) && !utf8.RuneStart(text[at]) {
			at++
		}
		return text[at:], nil
	}
	at := limit
	for at > 0 && !utf8.RuneStart(text[at]) {
		at--
	}
	return text[:at], nil
}

// idRows checks rows of token ids given by the caller (used as they are,
// no special tokens added) and returns them with their token count.
func idRows(d *textmodel.Model, ids [][]int64, opts encodeOpts) ([]row, int, error) {
	vocab := int64(d.Tokenizer.VocabSize())
	rows := make([]row, len(ids))
	total := 0
	for i, r := range ids {
		for _, id := range r {
			if id < 0 || id >= vocab {
				return nil, 0, invalid(opts.param, "`%s[%d]` holds token id %d, outside the model's vocabulary [0, %d)", opts.param, i, id, vocab)
			}
		}
		if opts.truncate && d.MaxLength > 0 && len(r) > d.MaxLength {
			if opts.left {
				r = r[len(r)-d.MaxLength:]
			} else {
				r = r[:d.MaxLength]
			}
		}
		if err := checkLength(d, len(r), i, opts); err != nil {
			return nil, 0, err
		}
		rows[i] = row{ids: r, types: make([]int64, len(r))}
		total += len(r)
	}
	return rows, total, nil
}

// checkLength refuses a row longer than the model takes. TEI answers 422
// Validation with this message (huggingface/text-embeddings-inference
// core/src/tokenization.rs, encode_input: "`inputs` must have less than
// {max_input_length} tokens. Given: {seq_len}"), although its API docs
// list 413; OpenAI answers 400 naming the limit.
func checkLength(d *textmodel.Model, n, i int, opts encodeOpts) error {
	if d.MaxLength <= 0 || n <= d.MaxLength {
		return nil
	}
	if opts.fam == tei {
		return invalid(opts.param, "Input validation error: `inputs` must have less than %d tokens. Given: %d", d.MaxLength, n)
	}
	return invalid(opts.param, "This model's maximum context length is %d tokens, however input %d has %d tokens. Shorten the input.", d.MaxLength, i, n)
}

// chunks splits n rows into runs of at most size (max_batch_size).
func chunks(n, size int) [][2]int {
	var out [][2]int
	for lo := 0; lo < n; lo += size {
		out = append(out, [2]int{lo, min(lo+size, n)})
	}
	return out
}

// tokenRequest is the core request of rows for d: input_ids,
// attention_mask and token_type_ids [n, L], L the longest row (or the
// model's fixed length), shorter rows padded with the tokenizer's pad id
// and mask 0. It returns L.
func tokenRequest(d *textmodel.Model, rows []row) (*core.InferRequest, int) {
	width := 0
	for _, r := range rows {
		width = max(width, len(r.ids))
	}
	width = bucket(width, d.PadMultiple, d.MaxLength)
	if d.SeqLen > 0 {
		width = int(d.SeqLen)
	}
	pad := d.PadID
	dt, size := core.TypeInt64, 8
	if d.IDType == modelconfig.DataType_TYPE_INT32 {
		dt, size = core.TypeInt32, 4
	}
	shape := []int64{int64(len(rows)), int64(width)}
	n := len(rows) * width * size
	ids, mask, types := make([]byte, n), make([]byte, n), make([]byte, n)
	put := func(b []byte, at int, v int64) {
		if size == 8 {
			binary.LittleEndian.PutUint64(b[at:], uint64(v))
		} else {
			binary.LittleEndian.PutUint32(b[at:], uint32(v))
		}
	}
	for i, r := range rows {
		for j := range width {
			at := (i*width + j) * size
			if j < len(r.ids) {
				put(ids, at, r.ids[j])
				put(mask, at, 1)
				put(types, at, r.types[j])
			} else {
				put(ids, at, pad)
			}
		}
	}
	req := &core.InferRequest{Inputs: []*core.Tensor{{Name: d.InputIDs, DataType: dt, Shape: shape, Data: ids}},
		Outputs: []core.RequestedOutput{{Name: d.Output}}}
	if d.AttentionMask != "" {
		req.Inputs = append(req.Inputs, &core.Tensor{Name: d.AttentionMask, DataType: dt, Shape: shape, Data: mask})
	}
	if d.TokenTypeIDs != "" {
		req.Inputs = append(req.Inputs, &core.Tensor{Name: d.TokenTypeIDs, DataType: dt, Shape: shape, Data: types})
	}
	return req, width
}

// textRequest is the core request of an embedding-text model: its BYTES
// input [n, 1].
func textRequest(d *textmodel.Model, texts []string) *core.InferRequest {
	var data []byte
	for _, t := range texts {
		data = core.AppendBytesElement(data, []byte(t))
	}
	return &core.InferRequest{
		Inputs:  []*core.Tensor{{Name: d.TextInput, DataType: core.TypeBytes, Shape: []int64{int64(len(texts)), 1}, Data: data}},
		Outputs: []core.RequestedOutput{{Name: d.Output}},
	}
}

var errNoOutput = errors.New("the model's response lacks its output")

// output finds name among resp's outputs and checks it is FP32 of rank
// rank with n rows.
func output(resp *core.InferResponse, name string, n, rank int) (*core.Tensor, error) {
	for _, t := range resp.Outputs {
		if t.Name != name {
			continue
		}
		if err := t.OnHost(); err != nil {
			return nil, err
		}
		if t.DataType != core.TypeFP32 || len(t.Shape) != rank || t.Shape[0] != int64(n) || int64(len(t.Data)) != core.ElementCount(t.Shape)*4 {
			return nil, fmt.Errorf("output '%s' is %s %v, expected FP32 of rank %d with %d rows", name, t.DataType, t.Shape, rank, n)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: '%s'", errNoOutput, name)
}

// bucket rounds a request's width up to a multiple of multiple (1: none),
// never past limit (the model's max length; 0: none) unless n is. Requests
// of nearby lengths then share a shape, which the dynamic batcher needs to
// batch them: it batches equal shapes only, as Triton's does
// (core/dynamic/form.go, compatible).
func bucket(n, multiple, limit int) int {
	if multiple <= 1 {
		return n
	}
	w := (n + multiple - 1) / multiple * multiple
	if limit > 0 && w > limit {
		w = max(limit, n)
	}
	return w
}
