// Rust core throughput for testdata/throughput.sh: encodeBatch (one call,
// all paragraphs of the corpus) with each tokenizer.json, truncation and
// padding off, best of RUNS. Run from a directory where
// `npm install tokenizers@0.23.2` was done, with RAYON_NUM_THREADS=1.
// Usage: node throughput.mjs CORPUS FILE...
//        node throughput.mjs train OUT.json TEXT...  (trains the byte-level BPE
//        the benchmark uses: NFC, ByteLevel, the Rust core's default BpeTrainer)
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "x.js"));
const { Tokenizer } = require("tokenizers");
if (process.argv[2] === "train") {
  const hf = require("tokenizers");
  const tok = new hf.Tokenizer(hf.BPE.empty());
  tok.setNormalizer(hf.nfcNormalizer());
  tok.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  tok.setPostProcessor(hf.byteLevelProcessing(false));
  tok.train(process.argv.slice(4));
  tok.save(process.argv[3]);
  process.exit(0);
}
const [corpus, ...files] = process.argv.slice(2);
const texts = fs.readFileSync(corpus, "utf8").replaceAll("\r\n", "\n").split("\n\n").map((p) => p.trim()).filter((p) => p !== "");
const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t), 0);
const runs = Number(process.env.RUNS ?? 5);
for (const f of files) {
  const tok = Tokenizer.fromFile(f);
  tok.disablePadding();
  tok.disableTruncation();
  await tok.encodeBatch(texts.slice(0, 50), { addSpecialTokens: true }); // warm up
  let best = Infinity, tokens = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    const encs = await tok.encodeBatch(texts, { addSpecialTokens: true });
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    tokens = encs.reduce((a, e) => a + e.getLength(), 0);
  }
  console.log(`${path.basename(f)}\t${texts.length} texts\t${bytes} bytes\t${tokens} tokens\t${(bytes / 1e6 / best).toFixed(2)} MB/s`);
}
