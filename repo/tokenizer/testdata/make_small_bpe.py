# Writes small-bpe.json and small-bpe-template.json: byte-level BPE tokenizers
# with a 256-character base vocabulary and 300 merges learned here from CORPUS.
# Run: python3 make_small_bpe.py (from this directory).
import collections, json, re

from bpe_train import learn

CORPUS = """The quick brown fox jumps over the lazy dog. Inference servers batch requests;
they pad rows to the longest one. Héllo wörld, café naïve résumé! Tokenizers split text into
words, then merge bytes into tokens: the the the and and and of of to to in in is is it it.
日本語のテキスト 中文 한국어 Ελληνικά Русский 1234567890 3.14159 don't won't I'm we'll they've
""" * 3

def byte_chars():
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
words = collections.Counter(
    tuple(bc[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\s\w]+|\s+", CORPUS))
vocab = {bc[b]: i for i, b in enumerate(range(256))}
merges = learn(words, vocab, 300)

eot = len(vocab)
added = [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True},
         {"id": eot + 1, "content": " <sep>", "single_word": False, "lstrip": False, "rstrip": True,
          "normalized": True, "special": False}]
model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
         "vocab": vocab}
gpt2 = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": dict(model, merges=[a + " " + b for a, b in merges])}
tpl = {"version": "1.0",
       "truncation": {"direction": "Right", "max_length": 40, "strategy": "LongestFirst", "stride": 0},
       "padding": None, "added_tokens": added[:1], "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": {"type": "TemplateProcessing",
                          "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                          "pair": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                   {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                          "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot], "tokens": ["<|endoftext|>"]}}},
       "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "model": dict(model, merges=[[a, b] for a, b in merges], ignore_merges=True)}
# Qwen2's and Llama 3's split patterns (their tokenizer.json files), then
# ByteLevel without its own regex.
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = QWEN2.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
def split_doc(pattern, post):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added[:1],
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
            "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": dict(model, merges=[[a, b] for a, b in merges], ignore_merges=True)}
qwen = split_doc(QWEN2, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False})
llama = split_doc(LLAMA3, dict(tpl["post_processor"], pair=tpl["post_processor"]["pair"][:2] + [
    {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}]))
for name, doc in (("small-bpe.json", gpt2), ("small-bpe-template.json", tpl),
                  ("small-bpe-qwen2.json", qwen), ("small-bpe-llama3.json", llama)):
    with open(name, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
