#!/usr/bin/env bash
# The GPU check of inferd, for a host with the NVIDIA driver and CUDA 13 libraries but no Go toolchain and no
# network: `make gpu-bundle` (on a machine with Go) writes the bundle's parts, gpu-<id>.NNofMM, to .gpu-bundle/;
# on the GPU host, from a copy of the same checkout:
#
#   bash deploy/gpu/check.sh stash       moves the parts now in .gpu-bundle/ aside ($INFERD_GPU_DIR/parts), for
#                                        parts that arrive one at a time; parts of an older bundle are dropped
#   bash deploy/gpu/check.sh run OUT     takes the parts still in .gpu-bundle/ too, reassembles the bundle, runs
#                                        every check and writes OUT/summary.txt (one PASS, FAIL or SKIP line per
#                                        check, with the reason) and OUT/details.tgz (each check's output)
#
# Without a GPU (or with a bundle built with GPU_PROVIDERS=0) it runs to the end, passing the CPU checks and
# skipping each GPU check with its reason; CI runs it that way (deploy/gpu/check_test.go). It exits 1 when a
# check failed. Settings, from the environment:
#   INFERD_GPU_DIR  where parts and the unpacked bundle are held (default /var/tmp/inferd-gpu)
#   BUNDLE_DIR      where parts arrive (default .gpu-bundle in the checkout)
#   CUDA_LIB_DIRS   colon-separated folders holding CUDA's libraries; else $CUDA_HOME's lib64, else the lib
#                   folders of the nvidia-* Python packages of $PYTHON (default python3), else the loader's path
#   PYTHON          the python3 that has the nvidia-* packages, perhaps TensorRT's (tensorrt_libs) and, for the
#                   CUDA shared-memory client, cupy
#   PERF_CONC       the concurrencies `inferd perf` measures (default "1 16 64" with a GPU, "1" without)
#   PERF_MS         its window in ms (default 3000 with a GPU, 500 without)
#   BENCH_TIME      the benchmarks' -test.benchtime (default 3s), BENCH_COUNT their -test.count (default 2)
#   CPU_FIGURES     0 skips figures 1 to 3 on the host's CPUs (measured only on 8 CPUs or more; about 2 minutes)
#   PORT_BASE       the server's HTTP port; gRPC and metrics take the next two (default 18900)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
hold=${INFERD_GPU_DIR:-/var/tmp/inferd-gpu}
arrive=${BUNDLE_DIR:-$root/.gpu-bundle}
PYTHON=${PYTHON:-python3}
mkdir -p "$hold/parts"

# take moves the parts that arrived; a part of another bundle drops the older bundle's parts.
take() {
  local p id
  for p in "$arrive"/gpu-*.*of*; do
    [ -e "$p" ] || continue
    id=$(basename "$p" | cut -d. -f1)
    if ls "$hold/parts" | grep -qv "^$id\."; then
      echo "dropping the parts of another bundle: $(ls "$hold/parts" | grep -v "^$id\." | tr '\n' ' ')"
      find "$hold/parts" -type f ! -name "$id.*" -delete
    fi
    mv -f "$p" "$hold/parts/"
  done
}

case "${1:-}" in
stash) take; echo "parts held: $(ls "$hold/parts" | tr '\n' ' ')"; exit 0 ;;
run) [ -n "${2:-}" ] || { echo "usage: check.sh run OUT" >&2; exit 2; } ;;
*) echo "usage: check.sh stash | run OUT" >&2; exit 2 ;;
esac
take
mkdir -p "$2"
out=$(cd "$2" && pwd)
D=$hold/details
rm -rf "$D" && mkdir -p "$D"
S=$out/summary.txt
: >"$S"
failed=0
rep() { printf '%s\n' "$*" | tee -a "$S"; }
pass() { rep "PASS $1: $2"; }
fail() { rep "FAIL $1: $2"; failed=$((failed + 1)); }
skip() { rep "SKIP $1: $2"; }
finish() {
  rep "checks: $(grep -c '^PASS' "$S") passed, $(grep -c '^FAIL' "$S") failed, $(grep -c '^SKIP' "$S") skipped"
  tar -czf "$out/details.tgz" -C "$D" .
  [ "$failed" = 0 ]
  exit
}
one_line() { tr -s ' \t\n' ' ' | cut -c1-${1:-300}; }

# ---- reassembly ----
parts=$(ls "$hold/parts")
total=$(printf '%s\n' "$parts" | sed -n '1s/.*of\([0-9]*\)$/\1/p')
if [ -z "$parts" ] || [ -z "$total" ]; then
  fail bundle "no parts in $arrive or $hold/parts: run make gpu-bundle and copy .gpu-bundle/ here"; finish
fi
id=$(printf '%s\n' "$parts" | head -1 | cut -d. -f1)
missing=$(for i in $(seq 1 "$total"); do n=$(printf '%02d' "$i"); [ -e "$hold/parts/$id.${n}of$total" ] || echo "$n"; done | paste -sd' ' -)
if [ -n "$missing" ]; then fail bundle "bundle $id: parts $missing of $total have not arrived"; finish; fi
B=$hold/bundle
if [ "$(cat "$B/ID" 2>/dev/null)" != "$id" ]; then
  rm -rf "$B" && mkdir -p "$B"
  if ! cat "$hold/parts/$id".* | xz -d | tar -C "$B" -xf - 2>"$D/reassembly.txt"; then
    rm -rf "$B"; fail bundle "bundle $id: reassembly failed: $(one_line <"$D/reassembly.txt")"; finish
  fi
  echo "$id" >"$B/ID"
fi
pass bundle "bundle $id, $total parts: $(grep -E '^(commit|go|providers)=' "$B/BUNDLE" | paste -sd' ' -); $(nproc) CPUs"

# ---- GPU, CUDA libraries, the providers ----
if [ -z "${CUDA_LIB_DIRS:-}" ] && [ -n "${CUDA_HOME:-}" ]; then
  CUDA_LIB_DIRS=$(for d in "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/x86_64-linux/lib; do [ -d "$d" ] && echo "$d"; done | paste -sd: -)
  [ -n "$CUDA_LIB_DIRS" ] && cuda_from="CUDA_HOME ($CUDA_HOME)"
fi
if [ -z "${CUDA_LIB_DIRS:-}" ]; then
  nv=$("$PYTHON" -c 'import nvidia, os; print(" ".join(os.path.abspath(p) for p in nvidia.__path__))' 2>/dev/null)
  [ -n "$nv" ] && CUDA_LIB_DIRS=$(find $nv -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  [ -n "${CUDA_LIB_DIRS:-}" ] && cuda_from="the nvidia-* packages of $PYTHON"
fi
if [ -n "${CUDA_LIB_DIRS:-}" ]; then rep "INFO cuda libraries: from ${cuda_from:-CUDA_LIB_DIRS}: $CUDA_LIB_DIRS"
else rep "INFO cuda libraries: the loader's own path (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}, ldconfig)"; fi
# TensorRT's pip wheels keep their libraries in the tensorrt_libs package, not under nvidia.
trt_dir=$("$PYTHON" -c 'import tensorrt_libs, os; print(os.path.dirname(os.path.abspath(tensorrt_libs.__file__)))' 2>/dev/null)
[ -n "$trt_dir" ] && rep "INFO tensorrt libraries: $trt_dir" && CUDA_LIB_DIRS=${CUDA_LIB_DIRS:+$CUDA_LIB_DIRS:}$trt_dir
export LD_LIBRARY_PATH=$B/lib${CUDA_LIB_DIRS:+:$CUDA_LIB_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ORT_LIB_PATH=$B/lib/libonnxruntime.so.1

nogpu=""
if ! command -v nvidia-smi >/dev/null 2>&1; then nogpu="no GPU: nvidia-smi is not installed"
elif ! nvidia-smi -L >"$D/nvidia-smi.txt" 2>&1 || ! grep -q '^GPU ' "$D/nvidia-smi.txt"; then
  nogpu="no GPU: nvidia-smi -L: $(one_line 160 <"$D/nvidia-smi.txt")"
else rep "INFO gpu: $(grep -c '^GPU ' "$D/nvidia-smi.txt") visible, $(head -1 "$D/nvidia-smi.txt")"; fi
[ -n "$nogpu" ] && rep "INFO gpu: $nogpu"

# notfound LIB: the libraries LIB needs that the loader cannot find.
notfound() { ldd "$1" 2>&1 | awk '/not found/ {print $1}' | paste -sd' ' -; }
cuda_skip=$nogpu
if [ ! -e "$B/lib/libonnxruntime_providers_cuda.so" ]; then
  cuda_skip=${nogpu:-the bundle was built with GPU_PROVIDERS=0}
  skip cuda-provider "the bundle was built with GPU_PROVIDERS=0: no CUDA execution provider"
elif m=$(notfound "$B/lib/libonnxruntime_providers_cuda.so"); [ -n "$m" ]; then
  if [ -n "$nogpu" ]; then skip cuda-provider "$nogpu (its libraries $m are not found either)"
  else cuda_skip="the CUDA provider's libraries are missing"; fail cuda-provider "missing $m: set CUDA_HOME, CUDA_LIB_DIRS or PYTHON"; fi
elif [ -n "$nogpu" ]; then skip cuda-provider "$nogpu (every library the provider needs was found)"
else pass cuda-provider "every library the CUDA provider needs was found"; fi

trt_skip=$cuda_skip
if [ -z "$trt_skip" ]; then
  if [ ! -e "$B/lib/libonnxruntime_providers_tensorrt.so" ]; then trt_skip="no TensorRT provider in the bundle"
  elif m=$(notfound "$B/lib/libonnxruntime_providers_tensorrt.so"); [ -n "$m" ]; then
    trt_skip="TensorRT's libraries are not found ($m): pip install tensorrt-cu13 in \$PYTHON, or add their folder to LD_LIBRARY_PATH"
  fi
fi

# ---- the packages' own GPU tests (they skip with a reason where no GPU can be used) ----
# gotest NAME BINARY PKG PATTERN [ARGS...]: runs a test binary from its package's folder in the checkout.
gotest() {
  local name=$1 bin=$2 pkg=$3 pat=$4 dir=$root/$3
  shift 4
  [ -d "$dir" ] || dir=$B
  if [ ! -x "$B/tests/$bin" ]; then echo "NOBINARY: $bin is not in the bundle (make gpu-bundle GPU_TEST_PKGS=...)" >"$D/$name.txt"; return; fi
  (cd "$dir" && timeout 600 "$B/tests/$bin" -test.run "$pat" -test.v -test.count 1 "$@") >"$D/$name.txt" 2>&1
}
# status FILE NAME: PASS, FAIL, SKIP <reason> or NONE for the test or benchmark NAME.
status() {
  local f=$1 n=$2
  if grep -q '^NOBINARY' "$f"; then echo "SKIP $(sed 's/^NOBINARY: //' "$f")"
  elif grep -qE -- "--- FAIL: $n( |$)" "$f"; then echo FAIL
  elif grep -qE -- "--- PASS: $n( |$)" "$f"; then echo PASS
  elif grep -qE -- "--- SKIP: $n( |$)" "$f"; then
    echo "SKIP $(grep -B4 -E -- "--- SKIP: $n( |$)" "$f" | grep -E '^ +[^ ]+_test\.go:[0-9]+: ' | tail -1 | sed -E 's/^ +[^ ]+_test\.go:[0-9]+: //' | one_line 240)"
  else echo NONE; fi
}
# gpucheck NAME FILE TEST WHAT SKIPREASON: a GPU check from one test's outcome.
gpucheck() {
  local s
  s=$(status "$2" "$3")
  case "$s" in
  PASS) if [ -n "$5" ]; then fail "$1" "$3 passed although $5"; else pass "$1" "$4 ($3)"; fi ;;
  SKIP*) if [ -n "$5" ]; then skip "$1" "$5 ($3: ${s#SKIP })"; else fail "$1" "$3 skipped on a GPU host: ${s#SKIP }"; fi ;;
  FAIL) fail "$1" "$3 failed: see $(basename "$2") in details.tgz" ;;
  *) fail "$1" "$3 did not run: $(tail -3 "$2" | one_line 200)" ;;
  esac
}
# pkgcheck NAME FILE: the package's selected tests as one CPU check.
pkgcheck() {
  if grep -q '^NOBINARY' "$2"; then skip "$1" "$(sed 's/^NOBINARY: //' "$2")"
  elif grep -qE -- '^(--- FAIL|FAIL|panic:)' "$2" || ! grep -q '^PASS$' "$2"; then
    fail "$1" "$(grep -E -- '--- FAIL' "$2" | head -3 | one_line 200) see $(basename "$2") in details.tgz"
  else
    local skipped
    skipped=$(grep -oE -- '--- SKIP: [^ ]+' "$2" | sed 's/--- SKIP: //' | paste -sd' ' -)
    pass "$1" "$(grep -c -- '--- PASS' "$2") passed, $(grep -c -- '--- SKIP' "$2") skipped${skipped:+ ($skipped)}"
  fi
}

gotest onnxrt onnxrt.test core/onnxrt 'GPU|Gpu|CUDA|Cuda|TensorRT|Device|PlanProviders'
pkgcheck tests-onnxrt "$D/onnxrt.txt"
gpucheck kind-gpu-ort "$D/onnxrt.txt" TestKindGPUExecute "a KIND_GPU instance runs add/sub in-process" "$cuda_skip"
gotest metrics metrics.test platforms/metrics 'GPU|NVML|Gpu'
pkgcheck tests-metrics "$D/metrics.txt"
gpucheck nvml "$D/metrics.txt" TestNVML "NVML reads the GPU's utilisation, memory, power and energy" "$nogpu"
gotest cudaipc cudaipc.test platforms/shm/cudaipc '.'
pkgcheck tests-cudaipc "$D/cudaipc.txt"
gpucheck cuda-shm-ipc "$D/cudaipc.txt" TestCUDARegionOpenCopyClose "a CUDA IPC region opens, copies both ways and closes" "$nogpu"

# ---- end to end: the models served over HTTP and gRPC, metrics, CUDA shared memory, perf ----
P=${PORT_BASE:-18900}
load=(simple mlp_cpu)
[ -z "$cuda_skip" ] && load+=(simple_gpu mlp_gpu id16m_gpu id16m_cpu)
[ -z "$trt_skip" ] && load+=(simple_trt)
args=(--model-repository="$B/models" --model-control-mode=explicit --exit-on-error=false --allow-client-shm=true
  --http-port=$P --grpc-port=$((P + 1)) --metrics-port=$((P + 2)))
for m in "${load[@]}"; do args+=(--load-model="$m"); done
"$B/inferd" "${args[@]}" >"$D/server.txt" 2>&1 &
pid=$!
for _ in $(seq 1 720); do
  grep -q '"serving"' "$D/server.txt" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.25
done
fetch() { if command -v curl >/dev/null; then curl -s "$@"; else "$PYTHON" -c 'import sys, urllib.request as u; sys.stdout.write(u.urlopen(u.Request(sys.argv[-1], method="POST" if "-XPOST" in sys.argv else "GET"), timeout=30).read().decode())' "$@"; fi; }
if ! grep -q '"serving"' "$D/server.txt"; then
  fail server "inferd did not start: $(tail -3 "$D/server.txt" | one_line)"
  kill "$pid" 2>/dev/null; finish
fi
fetch -XPOST "localhost:$P/v2/repository/index" >"$D/index.json"
ready=$(grep -o '"name":"[^"]*","version":"[^"]*","state":"READY"' "$D/index.json" | sed 's/"name":"\([^"]*\)".*/\1/' | paste -sd' ' -)
notready=$(for m in "${load[@]}"; do echo " $ready " | grep -q " $m " || echo "$m"; done | paste -sd' ' -)
if [ -z "$notready" ]; then pass server "serving ${load[*]}"
else fail server "not ready: $notready ($(grep -E '^E' "$D/server.txt" | head -2 | one_line 300))"; fi

served=(simple)
[ -z "$cuda_skip" ] && served+=(simple_gpu)
[ -z "$trt_skip" ] && served+=(simple_trt)
INFERD_CHECK_HTTP=localhost:$P INFERD_CHECK_GRPC=localhost:$((P + 1)) INFERD_CHECK_MODELS=$(IFS=,; echo "${served[*]}") \
  gotest served gpu.test deploy/gpu '^TestServed$'
for m in simple simple_gpu simple_trt; do
  for proto in http grpc; do
    what="INT32 add/sub over $([ $proto = http ] && echo HTTP || echo gRPC), both outputs checked"
    case $m in
    simple) gpucheck "$proto-$m" "$D/served.txt" "TestServed/$proto/$m" "$what, KIND_CPU" "" ;;
    simple_gpu) if [ -n "$cuda_skip" ]; then skip "$proto-$m" "$cuda_skip"; else gpucheck "$proto-$m" "$D/served.txt" "TestServed/$proto/$m" "$what, KIND_GPU" ""; fi ;;
    simple_trt) if [ -n "$trt_skip" ]; then skip "tensorrt-$proto" "$trt_skip"; else gpucheck "tensorrt-$proto" "$D/served.txt" "TestServed/$proto/$m" "$what, KIND_GPU with the tensorrt accelerator" ""; fi ;;
    esac
  done
done

if [ -n "$nogpu" ]; then skip cuda-shm-server "$nogpu ($(grep -o 'CUDA shared memory regions are refused.*' "$D/server.txt" | one_line 160))"
elif grep -q 'CUDA shared memory regions are served' "$D/server.txt"; then pass cuda-shm-server "inferd opened the CUDA runtime for client regions"
else fail cuda-shm-server "$(grep -o 'CUDA shared memory regions are refused.*' "$D/server.txt" | one_line 200)"; fi
if [ -n "$cuda_skip" ]; then skip cuda-shm-cupy "$cuda_skip"
elif ! "$PYTHON" -c 'import cupy, numpy' >"$D/cupy-import.txt" 2>&1; then skip cuda-shm-cupy "$PYTHON has no cupy: $(tail -1 "$D/cupy-import.txt" | one_line 120)"
elif PYTHONUNBUFFERED=1 timeout 120 "$PYTHON" "$B/cudashm_check.py" "http://localhost:$P" simple simple_gpu >"$D/cudashm.txt" 2>&1; then
  pass cuda-shm-cupy "$(grep -c '^PASS' "$D/cudashm.txt") client checks: a cupy process's device memory as inputs and outputs over HTTP"
else fail cuda-shm-cupy "$(grep -E '^FAIL|Error' "$D/cudashm.txt" | head -2 | one_line 300)"; fi
# CUDA shared memory's figure: a 16 MiB identity through CUDA regions against
# binary HTTP, on the GPU (inputs read and outputs written in place) and on
# the CPU (copied through the host), one run.
if [ -n "$cuda_skip" ]; then skip cuda-shm-16mib "$cuda_skip"
elif ! "$PYTHON" -c 'import cupy, numpy' >/dev/null 2>&1; then skip cuda-shm-16mib "$PYTHON has no cupy"
elif PYTHONUNBUFFERED=1 timeout 150 "$PYTHON" "$B/cudashm_bench.py" "localhost:$P" id16m_gpu id16m_cpu >"$D/cudashm-bench.txt" 2>&1; then
  pass cuda-shm-16mib "$(grep -E '^PASS' "$D/cudashm-bench.txt" | sed 's/^PASS //' | paste -sd';' - | one_line 400)"
else fail cuda-shm-16mib "$(grep -E '^FAIL|Error' "$D/cudashm-bench.txt" | head -2 | one_line 300)"; fi

conc=${PERF_CONC:-$([ -z "$cuda_skip" ] && echo "1 16 64" || echo 1)}
window=${PERF_MS:-$([ -z "$cuda_skip" ] && echo 3000 || echo 500)}
for m in mlp_gpu mlp_cpu; do
  if [ $m = mlp_gpu ] && [ -n "$cuda_skip" ]; then skip "perf-$m" "$cuda_skip"; continue; fi
  line="" bad=""
  for c in $conc; do
    f=$D/perf-$m-c$c
    timeout 300 "$B/inferd" perf -m $m -u "localhost:$P" -i http --concurrency-range "$c" -p "$window" --max-trials 4 \
      --json "$f.json" >"$f.txt" 2>&1
    thru=$(grep -oE '"throughput_infer_per_sec": *[0-9.eE+-]+' "$f.json" 2>/dev/null | head -1 | grep -oE '[0-9.eE+-]+$')
    p50=$(grep -oE '"p50_latency_us": *[0-9.eE+-]+' "$f.json" 2>/dev/null | head -1 | grep -oE '[0-9.eE+-]+$')
    errs=$(grep -oE '"errors": *[0-9]+' "$f.json" 2>/dev/null | head -1 | grep -oE '[0-9]+$')
    if [ -z "$thru" ] || [ "${errs:-1}" != 0 ]; then bad="$bad c$c: $(tail -2 "$f.txt" | one_line 160)"; continue; fi
    unstable=$(grep -qE '"stable": *false' "$f.json" && echo " (not stable)")
    line="$line c$c $(printf '%.0f' "$thru") infer/s p50 $(printf '%.0f' "$p50") µs$unstable;"
  done
  if [ -n "$bad" ]; then fail "perf-$m" "${line}${bad}"; else pass "perf-$m" "HTTP binary, batch 1, ${window} ms windows:${line%;}"; fi
done

fetch "localhost:$((P + 2))/metrics" >"$D/metrics.txt"
if [ -n "$nogpu" ]; then
  if grep -q '^nv_gpu_' "$D/metrics.txt"; then fail gpu-metrics "nv_gpu_* families served without a GPU"
  else skip gpu-metrics "$nogpu (the nv_gpu_* families are absent, as they should be)"; fi
elif grep -q '^nv_gpu_utilization{' "$D/metrics.txt"; then
  pass gpu-metrics "$(grep -E '^nv_gpu_(utilization|memory_used_bytes|power_usage)\{' "$D/metrics.txt" | sed 's/{[^}]*}//' | paste -sd' ' - | one_line 200)"
else fail gpu-metrics "no nv_gpu_utilization on /metrics"; fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# ---- figure 1 on the GPU beside in-process ONNX Runtime on the same GPU; the CPU figures on a big host ----
bt=${BENCH_TIME:-3s}
bc=${BENCH_COUNT:-2}
if [ -n "$cuda_skip" ]; then skip figure1-gpu "$cuda_skip"
else
  gotest bench-gpu httpapi.test platforms/httpapi '^$' -test.bench '^BenchmarkBatchingGPU$' -test.benchtime "$bt" -test.count "$bc"
  s=$(status "$D/bench-gpu.txt" BenchmarkBatchingGPU)
  r=$(grep -E '^BenchmarkBatchingGPU/ratio' "$D/bench-gpu.txt" | tail -1 | awk '{for (i = 3; i < NF; i += 2) printf "%s %s ", $(i+1), $i}')
  if [ -n "$r" ]; then pass figure1-gpu "$r(HTTP with dynamic batching, c16, over in-process ORT batch 8, same GPU)"
  elif [ "${s%% *}" = SKIP ]; then fail figure1-gpu "skipped on a GPU host: ${s#SKIP }"
  else fail figure1-gpu "no ratio: $(tail -3 "$D/bench-gpu.txt" | one_line 200)"; fi
fi
if [ "${CPU_FIGURES:-1}" = 0 ]; then skip figure1-cpu "CPU_FIGURES=0"
elif [ "$(nproc)" -lt 8 ]; then skip figure1-cpu "$(nproc) CPUs: the CPU figures are measured on 8 or more"
else
  gotest bench-cpu httpapi.test platforms/httpapi '^$' -test.bench '^(BenchmarkBatching|BenchmarkSimple)$' -test.benchtime "$bt" -test.count "$bc"
  r=$(grep -E '^Benchmark(Batching|Simple)/ratio' "$D/bench-cpu.txt" | sort -u | awk '{for (i = 3; i < NF; i += 2) printf "%s %s ", $(i+1), $i}')
  s=$(status "$D/bench-cpu.txt" BenchmarkBatching)
  if [ -n "$r" ]; then pass figure1-cpu "on $(nproc) CPUs: $r"; elif [ "${s%% *}" = SKIP ]; then skip figure1-cpu "${s#SKIP }"; else fail figure1-cpu "no ratio: $(tail -3 "$D/bench-cpu.txt" | one_line 200)"; fi
fi
finish
