package tokenizer

// Pad pads every encoding of a batch, in place, to one length, as
// huggingface/tokenizers utils/padding.rs pad_encodings does: p.Fixed when
// it is over 0, else the batch's longest, rounded up to a multiple of
// p.PadToMultipleOf when that is over 0. Encodings already that long are
// left alone (padding never truncates). Pad positions get p.PadID,
// p.PadTypeID, p.PadToken, attention mask 0, offsets [0, 0] and Special
// true; they go before the tokens when p.Direction is "Left", else after.
func Pad(encs []Encoding, p Padding) {
	if len(encs) == 0 {
		return
	}
	n := p.Fixed
	if n <= 0 {
		for i := range encs {
			n = max(n, encs[i].Len())
		}
	}
	if m := p.PadToMultipleOf; m > 0 && n%m != 0 {
		n += m - n%m
	}
	for i := range encs {
		encs[i].pad(n, p)
	}
}

func (e *Encoding) pad(n int, p Padding) {
	k := n - e.Len()
	if k <= 0 {
		return
	}
	left := p.Direction == "Left"
	e.IDs = padSlice(e.IDs, k, p.PadID, left)
	e.TypeIDs = padSlice(e.TypeIDs, k, p.PadTypeID, left)
	e.AttentionMask = padSlice(e.AttentionMask, k, 0, left)
	e.Tokens = padSlice(e.Tokens, k, p.PadToken, left)
	e.Offsets = padSlice(e.Offsets, k, [2]int{}, left)
	e.Special = padSlice(e.Special, k, true, left)
}

func padSlice[T any](s []T, k int, v T, left bool) []T {
	out := make([]T, 0, len(s)+k)
	if !left {
		out = append(out, s...)
	}
	for range k {
		out = append(out, v)
	}
	if left {
		out = append(out, s...)
	}
	return out
}

// EncodeBatch encodes each text as Encode does, then pads the batch as the
// file's padding section says (nothing when it has none), as the Rust
// core's encode_batch does.
func (t *Tokenizer) EncodeBatch(texts []string, addSpecial bool) ([]Encoding, error) {
	out := make([]Encoding, len(texts))
	for i, s := range texts {
		e, err := t.Encode(s, addSpecial)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	if t.pad != nil {
		Pad(out, *t.pad)
	}
	return out, nil
}

// EncodePairBatch is EncodeBatch for pairs (query, document).
func (t *Tokenizer) EncodePairBatch(pairs [][2]string, addSpecial bool) ([]Encoding, error) {
	out := make([]Encoding, len(pairs))
	for i, pr := range pairs {
		e, err := t.EncodePair(pr[0], pr[1], addSpecial)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	if t.pad != nil {
		Pad(out, *t.pad)
	}
	return out, nil
}
