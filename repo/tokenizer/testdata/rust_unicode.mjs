// Writes, as JSON on stdout, how Hugging Face's Rust core classifies every
// code point from U+0080 up with its own (older) Unicode tables: BERT
// punctuation (pre_tokenizers/bert.rs, crate unicode_categories), the
// nonspacing marks BertNormalizer strips and the marks StripAccents strips,
// what BertNormalizer's clean_text removes or turns into a space, and each
// character's NFD and NFKD (crate unicode-normalization-alignments).
// gen_rust_unicode.go turns it into rust_unicode.go. Run from a directory
// where `npm install tokenizers@0.23.2` was done:
//   node rust_unicode.mjs > /tmp/rust_unicode.json
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "x.js"));
const hf = require("tokenizers");
const pre = hf.bertPreTokenizer();
const strip = hf.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true, lowercase: false });
const clean = hf.bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false, lowercase: false });
const marks = hf.stripAccentsNormalizer();
const nfd = hf.nfdNormalizer(), nfkd = hf.nfkdNormalizer();
const sets = { punct: [], mn: [], mark: [], control: [], space: [] };
const nfdMap = {}, nfkdMap = {};
for (let cp = 0x80; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp < 0xe000) continue;
  const c = String.fromCodePoint(cp);
  if (pre.preTokenizeString("a" + c + "a").length === 3) sets.punct.push(cp);
  if (pre.preTokenizeString("a" + c + "a").length === 2 && pre.preTokenizeString(c).length === 0) sets.space.push(cp);
  const d = nfd.normalizeString(c), k = nfkd.normalizeString(c);
  if (d !== c) nfdMap[cp] = d;
  if (k !== c) nfkdMap[cp] = k;
  // BertNormalizer strips after NFD, so only characters that do not
  // decompose say whether they are Mn; StripAccents does not decompose.
  if (d === c && strip.normalizeString("a" + c) === "a") sets.mn.push(cp);
  if (marks.normalizeString("a" + c) === "a") sets.mark.push(cp);
  if (clean.normalizeString("a" + c + "a") === "aa") sets.control.push(cp);
}
// Consecutive code points as [lo, hi] ranges.
const ranges = (l) => l.reduce((out, cp) => {
  const last = out[out.length - 1];
  if (last && last[1] === cp - 1) last[1] = cp; else out.push([cp, cp]);
  return out;
}, []);
const out = { version: hf.version ?? "tokenizers@0.23.2", nfd: nfdMap, nfkd: nfkdMap };
for (const [k, v] of Object.entries(sets)) out[k] = ranges(v);
process.stdout.write(JSON.stringify(out));
