package tokenizer

import (
	"errors"
	"fmt"
	"strings"
)

// ErrStreamPrefix is returned by DecodeStream.Step when decoding one more
// id rewrites text already returned (a decoder whose output for earlier
// ids depends on later ones).
var ErrStreamPrefix = errors.New("tokenizer: decode stream: text already returned changed")

// DecodeStream turns ids into text one id at a time, for streamed
// generation, as the Rust core's DecodeStream does (tokenizer/mod.rs
// step_decode_stream): it decodes a short window of recent ids and returns
// what the new id added, holding text back while it ends in an incomplete
// character (U+FFFD). Concatenated, the steps give Decode of all the ids
// when the decoder allows it. A DecodeStream is not safe for concurrent
// use; the Tokenizer it reads is.
type DecodeStream struct {
	tok         *Tokenizer
	skipSpecial bool
	ids         []int64
	prefix      string
	prefixIndex int
}

// NewDecodeStream starts a stream; skipSpecial is as for Decode.
func (t *Tokenizer) NewDecodeStream(skipSpecial bool) *DecodeStream {
	return &DecodeStream{tok: t, skipSpecial: skipSpecial}
}

// Step adds one id and returns the text it completes, or ok false when it
// completes none yet.
func (d *DecodeStream) Step(id int64) (text string, ok bool, err error) {
	if d.prefix == "" && len(d.ids) > 0 {
		if p := d.tok.Decode(d.ids, d.skipSpecial); !strings.HasSuffix(p, "\uFFFD") {
			d.prefix, d.prefixIndex = p, len(d.ids)
		}
	}
	d.ids = append(d.ids, id)
	s := d.tok.Decode(d.ids, d.skipSpecial)
	if len(s) <= len(d.prefix) || strings.HasSuffix(s, "\uFFFD") {
		return "", false, nil
	}
	if !strings.HasPrefix(s, d.prefix) {
		return "", false, fmt.Errorf("%w: id %d: %q does not start with %q", ErrStreamPrefix, id, s, d.prefix)
	}
	text = s[len(d.prefix):]
	next := len(d.ids) - d.prefixIndex
	d.ids = append(d.ids[:0], d.ids[d.prefixIndex:]...)
	d.prefix = d.tok.Decode(d.ids, d.skipSpecial)
	d.prefixIndex = next
	return text, true, nil
}
