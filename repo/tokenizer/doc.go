// Package tokenizer reads a Hugging Face tokenizer.json (the file that sits
// beside config.pbtxt in a text model's folder, as exported by the
// huggingface/tokenizers library) and encodes text with it in pure Go.
//
// Supported, matching huggingface/tokenizers' Rust core (checked by golden
// tests in testdata generated with its npm binding):
//   - model: WordPiece (continuing_subword_prefix, max_input_chars_per_word,
//     unk_token);
//   - normalizer: BertNormalizer (clean_text, handle_chinese_chars,
//     strip_accents, where null follows lowercase, and lowercase), or none;
//   - pre-tokenizer: BertPreTokenizer, or none;
//   - post-processor: TemplateProcessing and BertProcessing (single and
//     pair, type ids), or none;
//   - added_tokens (special, single_word, lstrip, rstrip, normalized),
//     matched in the text before the model runs;
//   - truncation (LongestFirst, OnlyFirst, OnlySecond; Right and Left).
//
// Offsets are UTF-8 byte offsets into the caller's string; special tokens
// added by the post-processor have offsets [0, 0].
//
// Refused with an error wrapping ErrUnsupported that names the type: any
// other model (BPE, Unigram, WordLevel), normalizer, pre-tokenizer or
// post-processor. Files over 64 MiB are refused with ErrTooLarge. The
// file's padding section is parsed and reported by Padding, but Encode
// never pads: a server pads per batch (as Hugging Face Text Embeddings
// Inference turns padding off, router/src/lib.rs).
package tokenizer
