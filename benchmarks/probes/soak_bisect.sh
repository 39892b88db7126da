#!/usr/bin/env bash
# Which part of the soak (benchmarks/soak.py) moves RSS: short runs (40 phases of
# 100 000 kernels) that each leave one ingredient out, every one in a fresh process.
# Prints one line per variant: RSS slope after phase 10 (MiB per phase), kernels
# lost, ns per launch profiled/unprofiled, the native record counts.
#   bash benchmarks/probes/soak_bisect.sh [--graphs]   # GPU machine, after scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
run() {
  tag=$1; shift
  timeout 150 python3 -m benchmarks.soak --out "/tmp/soak_$tag" --launches 4000000 --phases 40 --warmup-phases 10 "$@" \
    >"/tmp/soak_$tag.log" 2>&1
  python3 - "$tag" "$*" <<'PY' || tail -5 "/tmp/soak_$tag.log"
import json, sys
tag, args = sys.argv[1:]
d = json.load(open(f"/tmp/soak_{tag}/soak.json"))
print(tag, args, "| MiB/phase", d["rss_mib_per_phase_after_warmup"], "| lost", d["kernels_lost"],
      "| ns", d["ns_per_launch_profiled"], "/", d["ns_per_launch_unprofiled"], "|", d["native_kernel_records"],
      "| rss", d["rss_series_every_10"])
PY
}
if [ "${1:-}" = "--graphs" ]; then  # what about the graphs: replays, their size, when captured, the syncs
  run all --scopes 1000
  run one-call-a-phase --scopes 1 --scope-entries 1
  run tenth-the-replays --scopes 1000 --graph-share 0.04
  run small-graphs --scopes 1000 --graph-nodes 10
  run captured-in-session --scopes 1000 --capture-while-profiling
  exit 0
fi
run all --scopes 1000
run no-graphs --scopes 1000 --graph-share 0
run unprofiled --scopes 1000 --unprofiled
run no-graphs-no-writer --scopes 1000 --graph-share 0 --poll 30
run few-scopes --scopes 1 --scope-entries 10 --graph-share 0
run unprofiled-no-graphs --scopes 1000 --graph-share 0 --unprofiled
