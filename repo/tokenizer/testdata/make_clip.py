# Writes small-bpe-clip.json: a byte-level BPE in CLIP's layout (its
# tokenizer.json: end_of_word_suffix "</w>"; NFC, Replace \s+ -> " ",
# Lowercase; a Split that keeps its pattern's matches, then ByteLevel
# without regex; RobertaProcessing without trim_offsets; BPEDecoder), with
# 250 merges learned here from CORPUS; and
# small-bpe-wp.json, the same vocabulary spelled with a continuing prefix
# "##" instead (no suffix). Run from this directory: python3 make_clip.py
import collections, json, re

from bpe_train import learn

CORPUS = """A photo of a cat. A photo of two dogs on the grass! The quick brown fox jumps over the lazy dog.
Héllo wörld, café naïve résumé. It's a picture of the city at night; they're walking in the rain.
日本語のテキスト 中文 Ελληνικά Русский 1234567890 don't won't I'm we'll they've
""" * 3


def byte_chars():
    # GPT-2's byte-to-character table (pre_tokenizers/byte_level.rs bytes_char).
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


bc = byte_chars()
SUFFIX = "</w>"


def build(prefix, suffix):
    words = collections.Counter()
    for w in re.findall(r"'s|'t|'re|'ve|'m|'ll|'d|[^\W\d_]+|\d|[^\s\w]+", CORPUS.lower()):
        syms = [bc[b] for b in w.encode()]
        syms = [syms[0]] + [prefix + s for s in syms[1:]]
        syms[-1] += suffix
        words[tuple(syms)] += 1
    vocab = {}
    for b in range(256):
        vocab[bc[b]] = len(vocab)
    for b in range(256):
        for t in (bc[b] + suffix, prefix + bc[b], prefix + bc[b] + suffix):
            vocab.setdefault(t, len(vocab))
    merges = []
    for a, b in learn(words, {}, 250):
        merged = a + b[len(prefix):]
        vocab.setdefault(a, len(vocab))
        vocab.setdefault(b, len(vocab))
        vocab.setdefault(merged, len(vocab))
        merges.append([a, b])
    return vocab, merges


def doc(vocab, merges, prefix, suffix):
    sot, eot = len(vocab), len(vocab) + 1
    vocab = dict(vocab, **{"<|startoftext|>": sot, "<|endoftext|>": eot})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": t == "<|startoftext|>", "special": True}
             for i, t in ((sot, "<|startoftext|>"), (eot, "<|endoftext|>"))]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
                {"type": "Lowercase"}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"},
                 "behavior": "Removed", "invert": True},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
            "post_processor": {"type": "RobertaProcessing", "sep": ["<|endoftext|>", eot], "cls": ["<|startoftext|>", sot],
                               "trim_offsets": False, "add_prefix_space": False},
            "decoder": {"type": "BPEDecoder", "suffix": suffix} if suffix else {"type": "WordPiece", "prefix": prefix, "cleanup": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<|endoftext|>",
                      "continuing_subword_prefix": prefix, "end_of_word_suffix": suffix, "fuse_unk": False,
                      "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges}}


for name, prefix, suffix in (("small-bpe-clip.json", "", SUFFIX), ("small-bpe-wp.json", "##", "")):
    v, m = build(prefix, suffix)
    with open(name, "w", encoding="utf-8") as f:
        json.dump(doc(v, m, prefix, suffix), f, ensure_ascii=False, indent=0)
        f.write("\n")
