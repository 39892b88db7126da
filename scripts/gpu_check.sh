#!/usr/bin/env bash
# The one script for the GPU machine: install this checkout there (no
# internet: --no-build-isolation --no-deps, the machine already has the build
# tools), run every `gpu` test, with --probes the memory diagnostics, and with
# --bench the benchmarks (extra run.py arguments in PROTON_BENCH_ARGS).
# Logs go to $OUT (the device tool's result folder) or ./gpu_out.
#   bash scripts/gpu_check.sh [--bench] [--probes] [--no-tests] [extra pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
BENCH=0
PROBES=0
TESTS=1
args=()
for a in "$@"; do
  case "$a" in
    --bench) BENCH=1 ;;
    --probes) PROBES=1 ;;
    --no-tests) TESTS=0 ;;
    *) args+=("$a") ;;
  esac
done

{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  $PY -c 'import sys; print("python", sys.version.split()[0])'
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>&1 | tail -1
  $PY -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1
  echo "libcupti: $(find / -name 'libcupti.so*' -not -path '/proc/*' 2>/dev/null | head -5 | tr '\n' ' ')"
} 2>&1 | tee "$OUT/machine.log"

echo "== install"
status=0
# Wheels the GPU machine's image lacks (no package index there): carried in gpu_wheels/ (git-ignored;
# fill it with `pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d gpu_wheels nvtx llnl-hatchet`).
# What is installed already stays: pip resolves from the carried wheels only what is missing.
if ls gpu_wheels/*.whl >/dev/null 2>&1; then
  for want in nvtx llnl-hatchet; do
    ls gpu_wheels/ | grep -qi "^${want//-/_}-\|^${want}-" || continue
    if $PY -m pip install -q --no-index --find-links gpu_wheels "$want" >>"$OUT/install.log" 2>&1; then
      echo "installed $want from gpu_wheels"
    else
      echo "could not install $want from gpu_wheels (see install.log)"
    fi
  done
fi
# proton-profiler-cupti with its test bindings (_test_launch_noop etc.), which the gpu tests
# and probes drive; release wheels are built without them (PROTON_CUPTI_TESTING=OFF).
export SKBUILD_CMAKE_DEFINE="${SKBUILD_CMAKE_DEFINE:+$SKBUILD_CMAKE_DEFINE;}PROTON_CUPTI_TESTING=ON"
$PY -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tee "$OUT/install.log" || status=1
for dir in plugins/*/; do
  [ -f "$dir/pyproject.toml" ] || continue
  if ! $PY -m pip install -q --no-build-isolation --no-deps -e "$dir" >>"$OUT/install.log" 2>&1; then
    echo "install of $dir FAILED (see install.log)" | tee -a "$OUT/install.log"
    # The cupti backend is what the gpu tests need; other plugins may still be minimal.
    [ "$dir" = "plugins/cupti/" ] && status=1
  else
    echo "installed $dir"
  fi
done
[ $status -eq 0 ] || { tail -40 "$OUT/install.log"; echo "install failed"; exit 1; }

if [ $TESTS -eq 1 ]; then
  echo "== gpu tests"
  # Tests append figures the docs quote (who holds CUPTI, what each profiler saw) here.
  export PROTON_GPU_FACTS="$OUT/gpu_facts.jsonl"
  $PY -m pytest -m gpu -v -rs "${args[@]}" 2>&1 | tee "$OUT/gpu_tests.log"
  status=${PIPESTATUS[0]}
  # CPU tests that need this machine's real Triton (compiled layouts, its switches): skipped in CI.
  echo "== tests that need the installed Triton"
  $PY -m pytest -q -rs -m "not gpu" plugins/instrumentation 2>&1 | tee "$OUT/triton_tests.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if [ $BENCH -eq 1 ] || [ "${PROTON_NVTX_COST:-0}" = 1 ]; then
  echo "== nvtx push+pop cost"
  for b in host cupti; do $PY -m benchmarks.nvtx_cost --backend $b 2>&1 | tee -a "$OUT/nvtx_cost.log"; done
fi

if [ $BENCH -eq 1 ] || [ "${PROTON_INJECTION_COST:-0}" = 1 ]; then
  echo "== injection cost (a CUDA program without Python, injected, beside the Python path)"
  $PY -m benchmarks.injection_cost ${PROTON_INJECTION_COST_ARGS:-} --json "$OUT/injection_cost.json" 2>&1 | tee "$OUT/injection_cost.log"
fi

if [ $PROBES -eq 1 ]; then
  echo "== memory probes"
  $PY -m benchmarks.probes.rss_graph_probe 2>&1 | tee "$OUT/rss_graph_probe.log"
fi

if [ $BENCH -eq 1 ]; then
  if [ -f benchmarks/run.py ]; then
    echo "== benchmarks"
    bench_args=${PROTON_BENCH_ARGS:-}
    # Every GPU gets a lane of workloads, so the whole matrix fits one call (run.py --gpus).
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    case " $bench_args " in
      *" --gpus "*) ;;
      *) [ "${gpus:-0}" -gt 1 ] && bench_args="--gpus $gpus $bench_args" ;;
    esac
    # shellcheck disable=SC2086 # a list of words on purpose
    $PY -m benchmarks.run --out "$OUT" --markdown $bench_args 2>&1 | tee "$OUT/bench.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  else
    echo "== benchmarks: benchmarks/run.py not found, skipped"
  fi
fi
exit $status
