#!/bin/sh
# Single-thread encode throughput of this package beside Hugging Face's Rust
# core (npm tokenizers@0.23.2, through its Node binding: the baseline
# includes the binding's overhead), on the same corpus and tokenizers, run
# alternately ROUNDS times. Each round takes 5 samples a side (Rust: 5
# encodeBatch calls; Go: -count 5 of 3 passes, GOMAXPROCS=1); the best
# sample of each side is kept, so that a loaded machine's stalls count
# against neither.
#
#   sh repo/tokenizer/testdata/throughput.sh [EXTRA_TOKENIZER.json ...]
#
# Needs node 20+ and `npm install tokenizers@0.23.2` in $HFTOK (default
# /tmp/hftok). Corpus: README.md and docs/*.md of this repository, one
# input per paragraph. Tokenizers: all-MiniLM-L6-v2 (WordPiece), a
# byte-level BPE the Rust core trains on docs/[a-m]*.md (written under
# $WORK), the XLM-R-style Unigram fixture, and any extra files given.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
TD=$ROOT/repo/tokenizer/testdata
HFTOK=${HFTOK:-/tmp/hftok}
WORK=${WORK:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
cat "$ROOT"/README.md "$ROOT"/docs/*.md > "$WORK/corpus.txt"
(cd "$HFTOK" && node "$TD/throughput.mjs" train "$WORK/bench-bpe.json" "$ROOT"/docs/[a-m]*.md)
FILES="$TD/all-minilm-l6-v2.json $WORK/bench-bpe.json $TD/small-unigram-xlmr.json $*"
(cd "$ROOT" && go test -c -o "$WORK/tokenizer.test" ./repo/tokenizer/)
for r in $(seq "$ROUNDS"); do
  (cd "$HFTOK" && RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false UV_THREADPOOL_SIZE=1 \
    node "$TD/throughput.mjs" "$WORK/corpus.txt" $FILES) > "$WORK/rust.$r"
  (cd "$ROOT/repo/tokenizer" && GOMAXPROCS=1 TOKENIZER_BENCH_CORPUS="$WORK/corpus.txt" \
    TOKENIZER_BENCH_FILES=$(echo $FILES | tr ' ' ',') "$WORK/tokenizer.test" \
    -test.run '^$' -test.bench Throughput -test.benchtime 3x -test.count 5) | grep '^BenchmarkThroughput' > "$WORK/go.$r"
done
# rustmb FILE NAME and gomb FILE NAME: the best MB/s of NAME in a result file.
rustmb() { awk -F'\t' -v b="$2" '$1 == b { sub(/ MB\/s/, "", $5); if ($5 > m) m = $5 } END { print m + 0 }' "$1"; }
gomb() { awk -v b="BenchmarkThroughput/$2" 'index($1, b) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == "MB/s" && $i > m) m = $i } END { print m + 0 }' "$1"; }
cat "$WORK"/rust.[0-9]* > "$WORK/all-rust.txt"; cat "$WORK"/go.[0-9]* > "$WORK/all-go.txt"
gotokens() { awk -v b="BenchmarkThroughput/$2" 'index($1, b) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == "tokens") t = $i } END { print t + 0 }' "$1"; }
echo "tokenizer | inputs, bytes, tokens (Rust) | tokens (Go) | Rust core via Node, MB/s (best) | Go, MB/s (best) | Go ÷ Rust (best ÷ best) | Go ÷ Rust per round (min–max of $ROUNDS)"
echo "---|---|---|---|---|---|---"
for f in $FILES; do
  b=$(basename "$f")
  info=$(awk -F'\t' -v b="$b" '$1 == b { print $2 ", " $3 ", " $4; exit }' "$WORK/rust.1")
  rust=$(rustmb "$WORK/all-rust.txt" "$b"); go=$(gomb "$WORK/all-go.txt" "$b")
  ratios=$(for r in $(seq "$ROUNDS"); do echo "$(gomb "$WORK/go.$r" "$b") $(rustmb "$WORK/rust.$r" "$b")"; done |
    awk '{ x = $1 / $2; if (NR == 1 || x < lo) lo = x; if (x > hi) hi = x } END { printf "%.2f–%.2f", lo, hi }')
  echo "$b | $info | $(gotokens "$WORK/all-go.txt" "$b") | $rust | $go | $(awk -v g="$go" -v r="$rust" 'BEGIN { printf "%.2f", g / r }') | $ratios"
done
