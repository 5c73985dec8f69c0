# Writes small-wordpiece-seq.json and small-bpe-nfkc.json: the small test
# tokenizers under Sequence normalizers. Run: python3 make_variants.py
# (from this directory, after make_small_bpe.py).
import json

wp = json.load(open("small-wordpiece.json"))
wp["normalizer"] = {"type": "Sequence", "normalizers": [
    {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]}
wp["truncation"] = None
json.dump(wp, open("small-wordpiece-seq.json", "w"), indent=1, ensure_ascii=False)

bpe = json.load(open("small-bpe-template.json"))
bpe["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
bpe["truncation"] = None
json.dump(bpe, open("small-bpe-nfkc.json", "w"), indent=0, ensure_ascii=False)

# Llama 3's post-processor: a Sequence of ByteLevel (trim_offsets off, as in
# its tokenizer.json) and TemplateProcessing; and one with trim_offsets on.
llama = json.load(open("small-bpe-llama3.json"))
tpl = llama["post_processor"]
for name, trim in (("small-bpe-llama3-seq.json", False), ("small-bpe-seq-trim.json", True)):
    llama["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": trim, "use_regex": True}, tpl]}
    json.dump(llama, open(name, "w"), indent=0, ensure_ascii=False)

# A WordLevel model over small-wordpiece.json's vocabulary, Whitespace
# pre-tokenizer, no decoder (Decode joins with spaces).
wl = json.load(open("small-wordpiece.json"))
wl["model"] = {"type": "WordLevel", "vocab": wl["model"]["vocab"], "unk_token": "[UNK]"}
wl["normalizer"] = {"type": "Lowercase"}
wl["pre_tokenizer"] = {"type": "Whitespace"}
wl["decoder"] = None
wl["truncation"] = None
json.dump(wl, open("small-wordlevel.json", "w"), indent=1, ensure_ascii=False)
