#!/usr/bin/env bash
# The autopilot on BENCHMARKS.md figure 1's MLP (ONNX Runtime, FP32 [1024], four 1024x1024 layers):
# `inferd perf search`'s best within a p99 target, against the autopilot tuning batching, instances and
# intra-op threads on live traffic driven low, high, low (docs/autopilot.md, "Measuring it").
#
#   core/autopilot/testdata/bench-onnx.sh            # from the repository root; needs `make ort`
#
# Knobs (environment): TARGET_MS (p99 target, default 20), CPUS (CPUs the instances may use and the
# largest instance count tried, default nproc), LOW (infer/s, default 200), HIGH (a perf
# --request-rate-range S:E:STEP, default 1000:4000:1000), WINDOW_MS (perf's -p, default 3000), OUT
# (scratch folder, default /tmp/ap-onnx), PORT (HTTP port, default 18000; gRPC and metrics take the
# next two), DELAYS and CONCURRENCY (the search's lists; SEARCH_RATES=S:E:STEP sweeps open-loop request
# rates instead, like the autopilot's run), SEARCH_MS (its -p, default 2000),
# SKIP_SEARCH=1 to run only the autopilot. SETTLE_RATES=R1,R2 then compares, at each rate, the search's
# best configuration (mlp_t1's, loaded as mlp_best) with the autopilot settled there: from LOW, SETTLE_S
# seconds at the rate (default 30), then 15 s measured; the best is measured before and after.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
TARGET_MS=${TARGET_MS:-20}
CPUS=${CPUS:-$(nproc)}
LOW=${LOW:-200}
HIGH=${HIGH:-1000:4000:1000}
WINDOW_MS=${WINDOW_MS:-3000}
DELAYS=${DELAYS:-off,0,200,500,1000,2000}
CONCURRENCY=${CONCURRENCY:-1,2,4,8,16,32,64}
SEARCH_MS=${SEARCH_MS:-2000}
OUT=${OUT:-/tmp/ap-onnx}
PORT=${PORT:-18000}
export ORT_LIB_PATH=${ORT_LIB_PATH:-$PWD/third_party/onnxruntime/libonnxruntime.so.1}

rm -rf "$OUT" && mkdir -p "$OUT/repo"
go build -o "$OUT/inferd" ./cmd/inferd
go run ./deploy/gpu/checkrepo "$OUT/gen" >/dev/null # writes mlp_gpu/1/model.onnx: onnxbuild.MLP(1024, 1024, 4)

# model NAME COUNT EXTRA: figure 1's config (max_batch_size 8, dynamic batching 500 µs) with COUNT
# instances and EXTRA lines.
model() {
	mkdir -p "$OUT/repo/$1/1"
	ln "$OUT/gen/mlp_gpu/1/model.onnx" "$OUT/repo/$1/1/model.onnx"
	cat >"$OUT/repo/$1/config.pbtxt" <<CFG
name: "$1"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1024 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1024 ] } ]
instance_group [ { kind: KIND_CPU count: $2 } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
$3
CFG
}
# The search's two families: one thread per instance (counts 1..CPUS), and one instance with every CPU.
model mlp_t1 1 'parameters { key: "intra_op_thread_count" value { string_value: "1" } }'
model mlp_tn 1 "parameters { key: \"intra_op_thread_count\" value { string_value: \"$CPUS\" } }"
# The autopilot's: up to CPUS instances, threads split by the autopilot, starting as configured.
model mlp_ap "$CPUS" "parameters { key: \"slo_p99_ms\" value { string_value: \"$TARGET_MS\" } }
parameters { key: \"slo_period_ms\" value { string_value: \"1000\" } }
parameters { key: \"slo_max_cpus\" value { string_value: \"$CPUS\" } }"

"$OUT/inferd" --model-repository="$OUT/repo" --model-control-mode=explicit \
	--load-model=mlp_t1 --load-model=mlp_tn --load-model=mlp_ap \
	--http-port="$PORT" --grpc-port=$((PORT + 1)) --metrics-port=$((PORT + 2)) >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for i in $(seq 150); do
	curl -sf "localhost:$PORT/v2/health/ready" >/dev/null && break
	if ! kill -0 $SERVER 2>/dev/null || [ "$i" = 150 ]; then
		echo "the server did not start:" >&2
		tail -5 "$OUT/server.log" >&2
		exit 1
	fi
	sleep 0.2
done
U="-u localhost:$PORT"

if [ -z "${SKIP_SEARCH:-}" ]; then
	echo "== 1. inferd perf search: the best within p99 ${TARGET_MS} ms"
	COUNTS=$(seq -s, 1 "$CPUS")
	SWEEP="--concurrency $CONCURRENCY"
	if [ -n "${SEARCH_RATES:-}" ]; then
		SWEEP="--request-rate-range $SEARCH_RATES" # open loop, as the autopilot's run
	fi
	S="--max-batch-sizes 8 --dynamic-batching-delays $DELAYS $SWEEP --latency-budget $TARGET_MS -p $SEARCH_MS"
	"$OUT/inferd" perf search -m mlp_t1 $U --instance-counts "$COUNTS" $S --config-out "$OUT/mlp_t1.best.pbtxt" | tee "$OUT/search_t1.txt" || true
	"$OUT/inferd" perf search -m mlp_tn $U --instance-counts 1 $S --config-out "$OUT/mlp_tn.best.pbtxt" | tee "$OUT/search_tn.txt" || true
fi

echo "== 2. the autopilot, open loop: $LOW, $HIGH, $LOW infer/s"
P="-m mlp_ap $U -p $WINDOW_MS -s 100000 --max-trials 3 -v"
"$OUT/inferd" perf $P --request-rate-range "$LOW" | tee "$OUT/ap_low1.txt"
"$OUT/inferd" perf $P --request-rate-range "$HIGH" --report "$OUT/ap.html" | tee "$OUT/ap_high.txt"
"$OUT/inferd" perf $P --request-rate-range "$LOW" | tee "$OUT/ap_low2.txt"

echo "== the slo block (instances, threads, decisions) and the decisions logged"
curl -s "localhost:$PORT/v2/models/mlp_ap/stats" | python3 -c '
import json, sys
slo = json.load(sys.stdin)["model_stats"][0].get("slo", {})
print({k: v for k, v in slo.items() if k != "decisions"})
for d in slo.get("decisions", []):
    print(d["time_ms"], d.get("from_instances", ""), "->", d.get("instances", ""), d.get("intra_op_threads", ""), d["reason"])
'
{ grep -E 'autopilot' "$OUT/server.log" || true; } | tee "$OUT/decisions.log" | tail -40
grep -c 'level=ERROR' "$OUT/server.log" || true

if [ -n "${SETTLE_RATES:-}" ] && [ -f "$OUT/mlp_t1.best.pbtxt" ]; then
	echo "== 3. settled: the search's best against the autopilot after ${SETTLE_S:-30} s at each of $SETTLE_RATES infer/s"
	mkdir -p "$OUT/repo/mlp_best/1"
	ln -f "$OUT/gen/mlp_gpu/1/model.onnx" "$OUT/repo/mlp_best/1/model.onnx"
	sed 's/^name: "mlp_t1"/name: "mlp_best"/' "$OUT/mlp_t1.best.pbtxt" >"$OUT/repo/mlp_best/config.pbtxt"
	curl -sf -X POST "localhost:$PORT/v2/repository/models/mlp_best/load" >/dev/null
	Q="$U -s 100000 --max-trials 3"
	summary() { grep -E 'Throughput:|p99 latency' | tr -s ' \n' ' '; echo; }
	for R in ${SETTLE_RATES//,/ }; do
		"$OUT/inferd" perf -m mlp_best $Q --request-rate-range "$R" -p 3000 >/dev/null 2>&1 # warm
		echo "best at $R: $("$OUT/inferd" perf -m mlp_best $Q --request-rate-range "$R" -p 5000 2>/dev/null | summary)"
		"$OUT/inferd" perf -m mlp_ap $Q --request-rate-range "$LOW" -p 3000 >/dev/null 2>&1
		echo "autopilot settling at $R: $("$OUT/inferd" perf -m mlp_ap $Q --request-rate-range "$R" -p $((${SETTLE_S:-30} * 1000 / 3)) 2>/dev/null | summary)"
		echo "autopilot settled at $R: $("$OUT/inferd" perf -m mlp_ap $Q --request-rate-range "$R" -p 5000 2>/dev/null | summary)"
		echo "best at $R again: $("$OUT/inferd" perf -m mlp_best $Q --request-rate-range "$R" -p 5000 2>/dev/null | summary)"
	done
	{ grep -E 'autopilot' "$OUT/server.log" || true; } | tail -20
fi
echo "figures in $OUT (ap.html: the decisions over time)"
