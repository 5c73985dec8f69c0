# Writes small-unigram-xlmr.json (XLM-R's layout, as transformers'
# convert_slow_tokenizer.py SpmConverter/XLMRobertaConverter build it: a
# Sequence of Precompiled (SentencePiece's nmt_nfkc rules), Strip right and Replace " {2,}" -> "▁"; Metaspace;
# <s> A </s> </s> B </s>; Metaspace decoder), small-unigram-bytefb.json
# (byte_fallback with <0xXX> pieces, NFKC, Metaspace "first", Llama 2's
# decoder chain) and small-bpe-llama2.json (small-bpe-metaspace.json under
# Llama 2's normalizers: Prepend "▁", Replace " " -> "▁", no pre-tokenizer).
# The Unigram pieces and scores are substring counts over CORPUS (not EM
# training: the goldens only need a fixed vocabulary). Run from this
# directory: python3 make_unigram.py (after make_spm_bpe.py).
import collections, json, math

CORPUS = """The quick brown fox jumps over the lazy dog. Inference servers batch requests for throughput.
Héllo wörld, café naïve! Straße über Ärger. Ελληνικά και Русский язык. 日本語のテキストと中文。
the the the and and of of to to in in is is it it. tokenization multilingual embeddings rerank 12345 67890"""
words = [("▁" + w) for w in CORPUS.split()]
counts = collections.Counter()
for w in words:
    for i in range(len(w)):
        for j in range(i + 1, min(len(w), i + 7) + 1):
            counts[w[i:j]] += 1
chars = sorted({c for w in words for c in w})
pieces = [p for p, n in counts.most_common() if len(p) > 1 and n > 1][:300]
total = sum(counts.values())
score = lambda p: round(math.log(counts[p] / total) - (3 if len(p) == 1 else 0), 4)
specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
vocab = specials + [(p, score(p)) for p in sorted(set(pieces) | set(chars), key=lambda p: (-counts[p], p))]
vocab.append(("<mask>", 0.0))
ids = {p: i for i, (p, _) in enumerate(vocab)}

def added(tok, **kw):
    a = {"id": ids[tok], "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
    a.update(kw)
    return a

# The charsmap lives in small-unigram-xlmr.json itself (see README.md for
# where it was copied from); it is read back from there.
charsmap = json.load(open("small-unigram-xlmr.json"))["normalizer"]["normalizers"][0]["precompiled_charsmap"]
special = lambda t, type_id=0: {"SpecialToken": {"id": t, "type_id": type_id}}
seq = lambda s, type_id=0: {"Sequence": {"id": s, "type_id": type_id}}
xlmr = {"version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added("<s>"), added("<pad>"), added("</s>"), added("<unk>"), added("<mask>", lstrip=True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "▁"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [special("<s>"), seq("A"), special("</s>")],
                           "pair": [special("<s>"), seq("A"), special("</s>"), special("</s>"), seq("B"), special("</s>")],
                           "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("<s>", "</s>")}},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 3, "vocab": [[p, s] for p, s in vocab], "byte_fallback": False}}

fb_vocab = specials[:] + [("<0x%02X>" % b, 0.0) for b in range(256)] + vocab[4:-1]
fb = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [dict(added("<s>"), id=0), dict(added("</s>"), id=2), dict(added("<unk>"), id=3)],
      "normalizer": {"type": "NFKC"},
      "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
      "post_processor": {"type": "TemplateProcessing", "single": [special("<s>"), seq("A")],
                         "pair": [special("<s>"), seq("A"), special("<s>", 1), seq("B", 1)],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
      "decoder": {"type": "Sequence", "decoders": [
          {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
          {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
      "model": {"type": "Unigram", "unk_id": 3, "vocab": [[p, s] for p, s in fb_vocab], "byte_fallback": True}}

llama2 = json.load(open("small-bpe-metaspace.json"))
llama2["normalizer"] = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
llama2["pre_tokenizer"] = None

# The older export of the same (xlm-roberta-base's tokenizer.json, 2020):
# Precompiled alone, Metaspace with add_prefix_space instead of
# prepend_scheme and split.
legacy = json.loads(json.dumps(xlmr))
legacy["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": charsmap}
legacy["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
legacy["decoder"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}

for name, doc in (("small-unigram-xlmr.json", xlmr), ("small-unigram-xlmr-legacy.json", legacy), ("small-unigram-bytefb.json", fb), ("small-bpe-llama2.json", llama2)):
    with open(name, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
