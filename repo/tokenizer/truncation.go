package tokenizer

// WithTruncation returns a tokenizer that encodes as t does but truncates
// as tr says instead of the file's truncation section; nil never
// truncates. A server picks per request: Text Embeddings Inference encodes
// with no truncation unless the request asks for it, then with its own
// max_length (huggingface/text-embeddings-inference
// core/src/tokenization.rs, encode_input). t is unchanged.
func (t *Tokenizer) WithTruncation(tr *Truncation) (*Tokenizer, error) {
	c := *t
	if tr == nil {
		c.trunc = nil
		return &c, nil
	}
	cp := *tr
	checked, err := checkTruncation(&cp)
	if err != nil {
		return nil, err
	}
	c.trunc = checked
	return &c, nil
}
