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
