#!/usr/bin/env bash
# Before and after a change, side by side in the same rounds, on the GPU machine.
#
#   git archive -o .ab/base.tar <base commit>                       # here, once (.ab/ is git-ignored)
#   bash scripts/ab_bench.sh install .ab/base.tar                   # there: two fresh venvs
#   bash scripts/ab_bench.sh measure [rounds]                       # there, on the same machine: measure
#   AB_MEASURES="launch nvtx" ...; PROTON_TORCH_NO_EXTENSION=1 at install skips building the torch observer
#
# "after" is this checkout, "before" the tree in the tarball; each is installed into a fresh venv that sees
# the machine's packages (torch, triton, the build tools) through a .pth line.  The harness (benchmarks/ of
# this checkout) is copied outside both trees, so neither tree's proton_core shadows the venv's.  Each round
# runs both sides, in alternating order, over the measures of a change to the scope engine: the shadow
# launch loop (ns per launch, ours and the bare-CUPTI floor in one process), the Triton launch hooks (us per
# launch), NVTX push+pop (ns) and hook="torch" on the decoder step (its time over the floor's, in-process
# pairs).  Raw logs go to $OUT/ab/; `python3 -m benchmarks.ab_summary $OUT/ab` prints the table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/ab_out}
# Which measures a round takes (a subset saves device time; "decoder" needs the torch plugin's extension).
MEASURES=${AB_MEASURES:-launch triton nvtx decoder}
WORK=${PROTON_AB_DIR:-/tmp/proton_ab}
mkdir -p "$OUT/ab"

install_side() {  # side tree
  local side=$1 tree=$2 site
  site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  python3 -m venv "$WORK/venv-$side"
  echo "$site" > "$("$WORK/venv-$side/bin/python" -c 'import site; print(site.getsitepackages()[0])')/machine_packages.pth"
  (cd "$tree" && PYTHON="$WORK/venv-$side/bin/python" OUT="$WORK/install-$side" bash scripts/gpu_check.sh --no-tests) \
    > "$OUT/ab/install-$side.log" 2>&1
  echo "$side: $(tail -1 "$OUT/ab/install-$side.log")"
}

case "${1:-}" in
  install)
    base=${2:?usage: ab_bench.sh install base.tar}
    rm -rf "$WORK" && mkdir -p "$WORK/after" "$WORK/before" "$WORK/harness"
    git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null |
      tar -xf - -C "$WORK/after"
    tar -xf "$base" -C "$WORK/before"
    cp -r benchmarks "$WORK/harness/"
    mkdir -p "$WORK/harness/plugins/nvtx/tests" && cp -r plugins/nvtx/tests/native "$WORK/harness/plugins/nvtx/tests/"
    install_side after "$WORK/after" &
    install_side before "$WORK/before" &
    wait
    (cd "$WORK/harness" && "$WORK/venv-after/bin/python" -c \
      "from benchmarks.floor.build import build; print('floor built:', build('$WORK/floor'))") 2>&1 | tail -1
    ;;
  measure)
    rounds=${2:-2}
    cd "$WORK/harness" || exit 1
    export PROTON_BENCH_FLOOR_DIR="$WORK/floor"
    for ((r = 0; r < rounds; r++)); do
      order=(after before)
      [ $((r % 2)) -eq 1 ] && order=(before after)
      for side in "${order[@]}"; do
        py="$WORK/venv-$side/bin/python"
        log="$OUT/ab/r$r-$side"
        echo "== round $r $side"
        case " $MEASURES " in *" launch "*)
          $py -m benchmarks.launch_cost --profilers none,floor,ours-shadow --windows 8 --depth 0 > "$log-launch.log" 2>&1 ;; esac
        case " $MEASURES " in *" triton "*)
          taskset -c 1-4 $py -m benchmarks.framework_overhead.triton_hook_overhead --repeats 9 > "$log-triton.log" 2>&1 ;; esac
        case " $MEASURES " in *" nvtx "*)
          $py -m benchmarks.nvtx_cost --backend cupti --n 100000 --repeat 2 > "$log-nvtx.log" 2>&1 ;; esac
        case " $MEASURES " in *" decoder "*)
          $py -m benchmarks.run --out "$log-decoder" --workloads decoder --profilers none,floor,ours-torch/floor \
            --rounds 1 --pairs 3 --budget 70 > "$log-decoder.log" 2>&1 ;; esac
        tail -3 "$log-launch.log" "$log-triton.log" "$log-nvtx.log" 2>/dev/null | cut -c1-160
      done
    done
    ;;
  *)
    echo "usage: ab_bench.sh install base.tar | measure [rounds]" >&2
    exit 2
    ;;
esac
