#!/usr/bin/env bash
# The GPU check: run on a machine with a GPU, from a build made elsewhere and carried over
# (it builds and installs nothing outside temporary directories). Measures the tensor cores'
# mma.sync rate, runs the device test suite, the Python package's GPU tests, the CUTLASS
# baselines' own check, then bench_gemm, and writes into $OUT one JSON document of results (results.json) plus
# every log, and the plots when this machine's python3 has matplotlib. Usage, the budget and
# the JSON fields: bench/gpu/README.md.
#
#   OUT=/some/dir bench/gpu/check.sh          # from the repository root
#
# Environment: OUT (default: a new /tmp/moejit-gpu-check.*), MOEJIT_BUILD_DIR (default
# <repo>/build), MOEJIT_CHECK_SECONDS (whole budget, default 470), MOEJIT_CHECK_QUICK=1
# (bench_gemm --quick), MOEJIT_PYTHON_WHEELS (moejit wheels for the Python GPU tests; default
# <build>/python-wheels), MOEJIT_PERF_MODEL_JSON (the static model's predictions for this tree,
# made where nvdisasm is; default <build>/bench/perf_model/perf-model-gpu-check.json: see
# bench/gpu/README.md). Exit status: 0 pass, 1 fail, 2 no GPU (the JSON says why).
#
# Every step runs under `timeout`, so a hang costs its own slice of the budget and the later
# steps and the report still happen; partial benchmark results are kept (bench_gemm rewrites
# its JSON after every case).

set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${MOEJIT_BUILD_DIR:-$ROOT/build}
OUT=${OUT:-$(mktemp -d /tmp/moejit-gpu-check.XXXXXX)}
BUDGET=${MOEJIT_CHECK_SECONDS:-470}
QUICK=${MOEJIT_CHECK_QUICK:-0}
mkdir -p "$OUT" || { echo "check.sh: cannot create OUT=$OUT" >&2; exit 1; }
START=$SECONDS

log() { printf '[check %3ds] %s\n' "$((SECONDS - START))" "$*" | tee -a "$OUT/check.log" >&2; }
remaining() { echo $((BUDGET - (SECONDS - START))); }
min() { if (($1 < $2)); then echo "$1"; else echo "$2"; fi; }
max() { if (($1 > $2)); then echo "$1"; else echo "$2"; fi; }

TESTS=$BUILD/tests/moejit_tests
BENCH=$BUILD/bench/gpu/bench_gemm
REPORT=$BUILD/bench/gpu/gpu_check_report
CUTLASS_CHECK=$BUILD/bench/cutlass/cutlass_baseline_check
MMA_RATE=$BUILD/bench/gpu/mma_rate
PERF_MODEL_JSON=${MOEJIT_PERF_MODEL_JSON:-$BUILD/bench/perf_model/perf-model-gpu-check.json}
PYTHON_WHEELS=${MOEJIT_PYTHON_WHEELS:-$BUILD/python-wheels}

COMMIT=unknown
if commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null); then
  COMMIT=$commit
  git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || COMMIT="$COMMIT+uncommitted"
fi
log "repository $ROOT (commit $COMMIT), build $BUILD, results in $OUT, budget ${BUDGET}s"

# A fresh kernel store: every kernel is compiled here, with this machine's NVRTC.
MOEJIT_CACHE_DIR=$(mktemp -d /tmp/moejit-gpu-check-cache.XXXXXX)
export MOEJIT_CACHE_DIR
trap 'rm -rf "$MOEJIT_CACHE_DIR"' EXIT
# NVRTC from the toolkit when the loader does not know it (no ldconfig entry on toolkit-only installs).
if [[ -z ${MOEJIT_NVRTC_LIBRARY:-} ]] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so\.1[23]'; then
  for candidate in /usr/local/cuda/lib64/libnvrtc.so.13* /usr/local/cuda/targets/*/lib/libnvrtc.so.13* \
                   /usr/local/cuda-*/lib64/libnvrtc.so.13* /usr/local/cuda/lib64/libnvrtc.so.12*; do
    if [[ -f $candidate && $candidate != *alt* ]]; then
      export MOEJIT_NVRTC_LIBRARY=$candidate
      log "NVRTC: $candidate"
      break
    fi
  done
fi

for binary in "$TESTS" "$BENCH" "$REPORT" "$CUTLASS_CHECK" "$MMA_RATE"; do
  [[ -x $binary ]] || log "missing $binary: build with 'cmake -S . -B build -G Ninja && cmake --build build' and carry it"
done
# A build configured like CI's test build has no CUTLASS kernels: the run goes on (moejit's own
# measurements stand alone) and the report carries the baselines' reason, but say it first.
if grep -qs '^MOEJIT_CUTLASS_KERNELS:BOOL=OFF' "$BUILD/CMakeCache.txt"; then
  log "WARNING: $BUILD was configured with -DMOEJIT_CUTLASS_KERNELS=OFF: no CUTLASS baselines in this run"
fi

# 1. Which GPU, driver and CUDA (seconds; creates the primary context once).
t0=$SECONDS
probe_rc=127
if [[ -x $BENCH ]]; then
  timeout -k 5 60 "$BENCH" --probe --out "$OUT/gpu.json" 2>>"$OUT/check.log"
  probe_rc=$?
fi
probe_s=$((SECONDS - t0))
if ((probe_rc == 0)); then
  log "GPU found: $(grep -m1 '"name"' "$OUT/gpu.json" | sed 's/.*"name": *"\([^"]*\)".*/\1/')"
  export MOEJIT_REQUIRE_GPU=1  # from here on a GPU test that skips is a failure
else
  log "no usable GPU (probe exit $probe_rc); the suite will skip and say why"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout -k 2 20 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
fi

# 1b. The tensor cores' mma.sync rate per SM per clock (seconds), beside the time model's figure
#     (DeviceProfile::mma_per_clock, an estimate on sm_90 and sm_100).
t0=$SECONDS
mma_rc=127
if [[ -x $MMA_RATE ]] && ((probe_rc == 0)); then
  log "mma rate"
  timeout -k 5 60 "$MMA_RATE" --out "$OUT/mma_rate.json" 2>&1 | tee "$OUT/mma_rate.log"
  mma_rc=${PIPESTATUS[0]}
fi
mma_s=$((SECONDS - t0))
log "mma rate: exit $mma_rc in ${mma_s}s"

# 2. The device test suite (doctest suite "device"), its output kept whole in tests.log.
t0=$SECONDS
tests_rc=127
tests_timeout=$(max 30 "$(min 170 $(($(remaining) - 130)))")
if [[ -x $TESTS ]]; then
  log "device tests (timeout ${tests_timeout}s)"
  timeout -k 10 "$tests_timeout" "$TESTS" --test-suite=device --duration=true 2>&1 | tee "$OUT/tests.log"
  tests_rc=${PIPESTATUS[0]}
fi
tests_s=$((SECONDS - t0))
log "device tests: exit $tests_rc in ${tests_s}s"

# 2b. The Python package's GPU tests (CUDA tensors, torch's stream, graph capture), from a wheel
#     built elsewhere for this machine's python3 and installed into a private directory.
t0=$SECONDS
python_rc=127
python_tag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")' 2>/dev/null || echo none)
wheel=$(ls "$PYTHON_WHEELS"/moejit-*-"$python_tag"-*.whl 2>/dev/null | head -1)
if [[ -z $wheel ]]; then
  echo "not run: no moejit wheel for $python_tag in $PYTHON_WHEELS (bench/gpu/README.md says how to build one)" \
    >"$OUT/python_tests.log"
  log "python tests: not run (no $python_tag wheel in $PYTHON_WHEELS)"
else
  python_site=$(mktemp -d /tmp/moejit-gpu-check-python.XXXXXX)
  python_timeout=$(max 30 "$(min 90 $(($(remaining) - 150)))")
  log "python tests from $(basename "$wheel") (timeout ${python_timeout}s)"
  if python3 -m pip install -q --no-index --no-deps --no-compile --target "$python_site" "$wheel" \
      >"$OUT/python_tests.log" 2>&1; then
    PYTHONPATH=$python_site timeout -k 10 "$python_timeout" python3 -m pytest -q -rs -p no:cacheprovider \
      "$ROOT"/python/tests/test_*gpu*.py 2>&1 | tee -a "$OUT/python_tests.log"
    python_rc=${PIPESTATUS[0]}
  else
    python_rc=1
  fi
  rm -rf "$python_site"
fi
python_s=$((SECONDS - t0))
log "python tests: exit $python_rc in ${python_s}s"

# 3. The CUTLASS baselines against an fp64 reference on small problems (seconds): a fast wrong
#    baseline is no baseline. bench_gemm checks them again at the benchmark's shapes.
t0=$SECONDS
cutlass_rc=127
if [[ -x $CUTLASS_CHECK ]]; then
  log "CUTLASS baseline check"
  timeout -k 5 60 "$CUTLASS_CHECK" >"$OUT/cutlass_check.log" 2>&1
  cutlass_rc=$?
fi
cutlass_s=$((SECONDS - t0))
log "CUTLASS baseline check: exit $cutlass_rc in ${cutlass_s}s"

# 4. The benchmark; it stops starting cases 40 s before its timeout and rewrites its JSON
#    after every case, so a slow run still returns what it measured.
t0=$SECONDS
bench_rc=127
bench_timeout=$(max 20 $(($(remaining) - 15)))
bench_seconds=$(max 5 $((bench_timeout - 40)))
if [[ -x $BENCH ]]; then
  quick=()
  [[ $QUICK == 1 ]] && quick=(--quick)
  log "bench_gemm (timeout ${bench_timeout}s, cases started until ${bench_seconds}s)"
  timeout -k 10 "$bench_timeout" "$BENCH" "${quick[@]}" --out "$OUT/bench.json" --commit "$COMMIT" \
    --max-seconds "$bench_seconds" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi
bench_s=$((SECONDS - t0))
log "bench_gemm: exit $bench_rc in ${bench_s}s"

# 5. One JSON document of everything, with the model's prediction beside each measured case.
total_s=$((SECONDS - START))
report_rc=127
if [[ -f $PERF_MODEL_JSON ]]; then
  cp "$PERF_MODEL_JSON" "$OUT/perf-model.json"
  log "model predictions: $PERF_MODEL_JSON"
else
  log "no model predictions at $PERF_MODEL_JSON: the report has no model_vs_measured rows"
fi
if [[ -x $REPORT ]]; then
  "$REPORT" --perf-model "$OUT/perf-model.json" --out "$OUT/results.json" --gpu "$OUT/gpu.json" --probe-exit "$probe_rc" \
    --tests-log "$OUT/tests.log" --tests-exit "$tests_rc" --bench "$OUT/bench.json" --bench-exit "$bench_rc" \
    --bench-log "$OUT/bench.log" --cutlass-log "$OUT/cutlass_check.log" --cutlass-exit "$cutlass_rc" \
    --python-log "$OUT/python_tests.log" --python-exit "$python_rc" --commit "$COMMIT" \
    --mma-rate "$OUT/mma_rate.json" --mma-rate-exit "$mma_rc" \
    --duration "probe=$probe_s,mma_rate=$mma_s,tests=$tests_s,python_tests=$python_s,cutlass_check=$cutlass_s,bench=$bench_s,total=$total_s" 2>>"$OUT/check.log"
  report_rc=$?
fi
if ((report_rc != 0)); then
  # No report writer: a minimal document by hand, so the run still says what happened.
  log "gpu_check_report failed (exit $report_rc); writing a minimal results.json"
  cat >"$OUT/results.json" <<EOF
{
  "schema": "moejit-gpu-check/1",
  "verdict": "error",
  "error": "gpu_check_report missing or failed (exit $report_rc); see check.log",
  "commit": "$COMMIT",
  "probe_exit_code": $probe_rc,
  "mma_rate_exit_code": $mma_rc,
  "tests": {"exit_code": $tests_rc, "log": "tests.log"},
  "bench_exit_code": $bench_rc,
  "python_tests": {"exit_code": $python_rc, "log": "python_tests.log"},
  "durations_s": {"probe": $probe_s, "mma_rate": $mma_s, "tests": $tests_s, "python_tests": $python_s, "bench": $bench_s, "total": $total_s}
}
EOF
fi

# 6. Plots and tables, where this machine's python3 has matplotlib (else: run
#    bench/plot_results.py on results.json wherever it has).
if python3 -c 'import matplotlib' 2>/dev/null; then
  timeout -k 5 60 python3 "$ROOT/bench/plot_results.py" "$OUT/results.json" --out "$OUT/plots" >>"$OUT/check.log" 2>&1 ||
    log "plot_results.py failed (see check.log)"
else
  log "no matplotlib here: make the plots with 'python3 bench/plot_results.py results.json --out DIR'"
fi

verdict=$(grep -m1 '"verdict"' "$OUT/results.json" | sed 's/.*"verdict": *"\([^"]*\)".*/\1/')
log "summary: $(grep '\[doctest\] test cases' "$OUT/tests.log" 2>/dev/null | tail -1)"
log "verdict: $verdict; results: $OUT/results.json (${total_s}s)"
case $verdict in
  pass) exit 0 ;;
  no_gpu) exit 2 ;;
  *) exit 1 ;;
esac
