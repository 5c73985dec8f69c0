// Regenerates golden.json from cases.json with Hugging Face's own Rust core
// (the official npm binding, huggingface/tokenizers bindings/node). Run from
// a directory where `npm install tokenizers@0.23.2` was done; see README.md.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "x.js"));
const { Tokenizer } = require("tokenizers");
const dir = path.dirname(new URL(import.meta.url).pathname);
const cases = JSON.parse(fs.readFileSync(path.join(dir, "cases.json"), "utf8"));

// The binding reports code-point offsets; the golden file stores UTF-8 byte offsets.
const byteIndex = (s) => { const b = [0]; for (const c of s) b.push(b[b.length - 1] + Buffer.byteLength(c)); return b; };

const out = {};
for (const [file, list] of Object.entries(cases)) {
  out[file] = [];
  for (const c of list) {
    const tok = Tokenizer.fromFile(path.join(dir, file));
    const raw = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
    tok.disablePadding(); // Encode never pads
    if (c.truncation) {
      const t = { ...raw.truncation, ...c.truncation };
      tok.setTruncation(t.max_length, { strategy: t.strategy, direction: t.direction.toLowerCase(), stride: 0 });
    }
    const special = c.special ?? true;
    let enc, error = null;
    try {
      enc = await tok.encode(c.a, c.b ?? null, { addSpecialTokens: special });
    } catch (e) {
      error = String(e);
    }
    const rec = { ...c, special };
    if (error) { rec.error = error; out[file].push(rec); continue; }
    const seq = enc.getSequenceIds(), idx = [byteIndex(c.a), c.b != null ? byteIndex(c.b) : null];
    Object.assign(rec, {
      ids: enc.getIds(), type_ids: enc.getTypeIds(), tokens: enc.getTokens(),
      special_mask: enc.getSpecialTokensMask(),
      offsets: enc.getOffsets().map(([s, e], i) => (seq[i] == null ? [0, 0] : [idx[seq[i]][s], idx[seq[i]][e]])),
      decoded: await tok.decode(enc.getIds(), false),
      decoded_skip: await tok.decode(enc.getIds(), true),
      // Every other id: cuts characters that span tokens (byte-level, byte fallback).
      decoded_odd: await tok.decode(enc.getIds().filter((_, i) => i % 2 === 1), false),
    });
    out[file].push(rec);
  }
}
fs.writeFileSync(path.join(dir, "golden.json"), JSON.stringify(out, null, 0).replace(/\},\{/g, "},\n{") + "\n");

// Batches (batch_cases.json -> golden_batch.json): encodeBatch pads with the
// file's padding section, or with the case's padding when it gives one.
const batches = JSON.parse(fs.readFileSync(path.join(dir, "batch_cases.json"), "utf8"));
const bout = [];
for (const c of batches) {
  const tok = Tokenizer.fromFile(path.join(dir, c.file));
  if (c.padding === null) tok.disablePadding();
  else if (c.padding) tok.setPadding(c.padding);
  const encs = await tok.encodeBatch(c.inputs, { addSpecialTokens: c.special ?? true });
  bout.push({ ...c, encodings: encs.map((e) => ({
    ids: e.getIds(), type_ids: e.getTypeIds(), tokens: e.getTokens(),
    special_mask: e.getSpecialTokensMask(), attention_mask: e.getAttentionMask(),
  })) });
}
fs.writeFileSync(path.join(dir, "golden_batch.json"), JSON.stringify(bout, null, 0).replace(/\},\{/g, "},\n{") + "\n");
