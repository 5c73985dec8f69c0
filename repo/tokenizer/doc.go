// Package tokenizer reads a Hugging Face tokenizer.json (the file that sits
// beside config.pbtxt in a text model's folder, as exported by the
// huggingface/tokenizers library) and encodes text with it in pure Go.
//
// Supported, matching huggingface/tokenizers' Rust core (checked by golden
// tests in testdata generated with its npm binding):
//   - models: WordPiece (continuing_subword_prefix, max_input_chars_per_word,
//     unk_token), BPE (merges as "a b" or ["a", "b"], unk_token,
//     fuse_unk, byte_fallback, ignore_merges, continuing_subword_prefix,
//     end_of_word_suffix as CLIP's; a cache of 10,000 words, as the Rust
//     core keeps) and Unigram (Viterbi over the pieces' scores,
//     unk_id with runs of unknown characters fused, byte_fallback) and
//     WordLevel; the model's type may be left out, as in older files;
//   - normalizers: BertNormalizer (clean_text, handle_chinese_chars,
//     strip_accents, where null follows lowercase, and lowercase), NFC, NFD,
//     NFKC, NFKD, Lowercase, StripAccents, Precompiled (SentencePiece's
//     compiled rules, as the XLM-R family carries them), Replace (String or
//     Regex), Strip, Prepend, Sequence, or none;
//   - pre-tokenizers: BertPreTokenizer, ByteLevel (GPT-2's split pattern,
//     add_prefix_space, use_regex), Split (String or Regex pattern, every
//     behavior, invert; regexes run by github.com/dlclark/regexp2, since
//     Llama 3's and Qwen2's patterns use lookahead), Whitespace,
//     WhitespaceSplit, Digits, Punctuation, Metaspace (prepend_scheme,
//     split), Sequence, or none;
//   - post-processors: TemplateProcessing, BertProcessing, RobertaProcessing
//     (single and pair, type ids; trim_offsets), ByteLevel (trim_offsets)
//     and a Sequence of ByteLevel and one of the others (Llama 3's), or
//     none;
//   - added_tokens (special, single_word, lstrip, rstrip, normalized),
//     matched in the text before the model runs;
//   - truncation (LongestFirst, OnlyFirst, OnlySecond; Right and Left);
//   - padding: Pad pads a batch (longest or fixed, to a multiple, Right
//     or Left, attention mask 0), and EncodeBatch / EncodePairBatch pad
//     as the file's padding section says;
//   - decoders, for Decode(ids, skipSpecial): WordPiece, ByteLevel,
//     Metaspace, BPEDecoder, ByteFallback, Fuse, Strip, Replace, Sequence,
//     or none (tokens joined with spaces); DecodeStream decodes one id at a
//     time for streamed generation, as the Rust core's DecodeStream.
//
// Offsets are UTF-8 byte offsets into the caller's string; special tokens
// added by the post-processor have offsets [0, 0].
//
// Added tokens take the ids the Rust core gives them: the vocabulary's id
// when the content is in the vocabulary, else the next free id after it
// (tokenizer/added_vocabulary.rs), whatever the file's "id" says.
//
// Refused with an error wrapping ErrUnsupported that names the type: any
// other model, normalizer (Nmt, ByteLevel, ...), pre-tokenizer
// (UnicodeScripts, CharDelimiterSplit, ...), post-processor (a Sequence of
// two that add tokens) or decoder (CTC); BPE dropout, and byte_fallback
// with a prefix or suffix; a Unigram model without unk_id, a WordLevel one
// whose unk_token is not in its vocabulary (the Rust core would fail every
// text with an unknown character or word). An empty precompiled_charsmap
// is taken as no rules. Files over 64 MiB are refused with ErrTooLarge.
// Encode and EncodePair never pad: a server pads per batch, as Text
// Embeddings Inference turns padding off on load
// (huggingface/text-embeddings-inference router/src/lib.rs).
//
// Characters are classified as the Rust core's own (older) Unicode tables
// do, where they differ from Go's: see rust_unicode.go.
package tokenizer
