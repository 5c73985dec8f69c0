# Writes small-bpe-metaspace.json: a SentencePiece-style BPE (Metaspace
# pre-tokenizer, byte_fallback with <0xXX> tokens, unk) with merges learned
# here from CORPUS. Run: python3 make_spm_bpe.py (from this directory).
import collections, json

from bpe_train import learn

CORPUS = """The quick brown fox jumps over the lazy dog. Inference servers batch requests.
Héllo wörld, café naïve! the the the and and of of to to in in is is it it.""" * 3
words = collections.Counter(tuple("▁" + w) for w in CORPUS.split())
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    vocab["<0x%02X>" % b] = len(vocab)
for ch in sorted({c for w in words for c in w}):
    vocab.setdefault(ch, len(vocab))
merges = [a + " " + b for a, b in learn(words, vocab, 120)]
added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for t in ("<unk>", "<s>", "</s>")]
doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
       "normalizer": None,
       "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
       "post_processor": {"type": "TemplateProcessing",
                          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                          "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                   {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                          "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
       # Llama 2's decoder (its tokenizer.json).
       "decoder": {"type": "Sequence", "decoders": [
           {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
           {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
       "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                 "vocab": vocab, "merges": merges}}
with open("small-bpe-metaspace.json", "w", encoding="utf-8") as f:
    json.dump(doc, f, ensure_ascii=False, indent=0)
    f.write("\n")
split = json.loads(json.dumps(doc))
split["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
# Not a real model's decoder: it runs ByteFallback, BPEDecoder and Metaspace.
split["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "ByteFallback"}, {"type": "BPEDecoder", "suffix": "s"},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}]}
with open("small-bpe-metaspace-split.json", "w", encoding="utf-8") as f:
    json.dump(split, f, ensure_ascii=False, indent=0)
    f.write("\n")
