"""Host memory over CUDA-graph replays under each profiler: is the growth CUPTI's or ours?

    python3 -m benchmarks.probes.rss_graph_replay_probe [REPLAYS]     # GPU machine, after gpu_check.sh

A 1 000-kernel graph is captured *before* profiling starts (what the soak
does), then replayed REPLAYS times (default 2 000: 2 M graph kernels) in
rounds of 100, a flush after each round.  Each variant runs in a fresh
process and prints the RSS slope in MiB per million graph kernels:

* ``none``: no profiler (the driver and torch alone);
* ``floor``: the bare-CUPTI floor (benchmarks/floor: subscribe, kernel activity, count);
* ``ours``: ``proton.start(backend="cupti")``, flushed each round;
* ``ours-recycled``: as ``ours``, CUPTI detached (``cuptiFinalize``) and re-attached each round;
* ``upstream``: Triton's own Proton (``triton.profiler``), if importable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.probes.rss_graph_replay_probe ...")

from benchmarks import REPO, python_m  # noqa: E402

VARIANTS = ("none", "floor", "ours", "ours-recycled", "upstream")
ROUND = 100


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(variant: str, replays: int) -> None:
    import torch

    from benchmarks.soak import capture_graph

    graph = capture_graph(torch, torch.zeros(1, device="cuda"), 1000)
    tmp = tempfile.mkdtemp()
    flush = lambda: None  # noqa: E731
    stop = lambda: None  # noqa: E731
    if variant == "floor":
        from benchmarks.floor.build import build, find_cupti, load

        _proton_floor = load(build(os.path.join(tmp, "floor")))
        _proton_floor.start(find_cupti())
        stop = _proton_floor.stop
    elif variant.startswith("ours"):
        import proton_core as proton

        sid = proton.start(os.path.join(tmp, "p"), backend="cupti")
        flush = lambda: proton.data.is_phase_complete(sid, proton.data.advance_phase(sid) - 1)  # noqa: E731
        stop = lambda: proton.finalize(sid)  # noqa: E731
        if variant == "ours-recycled":
            from proton_cupti import _cupti

            def flush():
                proton.data.is_phase_complete(sid, proton.data.advance_phase(sid) - 1)
                _cupti._test_stop(True)  # cuptiFinalize: CUPTI's per-process state goes
                _cupti._test_start(True)
                from proton_core.session import MANAGER

                _cupti.set_epoch(MANAGER.backends["cupti"].epoch)  # a memory probe: the paths may come out wrong
    elif variant == "upstream":
        try:
            import triton.profiler as tp
        except ImportError as exc:
            print(f"{variant:14s} skipped: {exc}")
            return
        tp.start(os.path.join(tmp, "u"), backend="cupti")
        stop = tp.finalize
    series = []
    for i in range(replays // ROUND + 2):  # the first two rounds are warm-up
        for _ in range(ROUND):
            graph.replay()
        torch.cuda.synchronize()
        flush()
        series.append(rss_mib())
    stop()
    after = series[2:]
    n = len(after)
    mean_x, mean_y = (n - 1) / 2, sum(after) / n
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(after)) / sum((i - mean_x) ** 2 for i in range(n))
    per_million = slope / (ROUND * 1000) * 1e6
    print(f"{variant:14s} {per_million:8.1f} MiB per 1M graph kernels  (RSS {after[0]:.0f} -> {after[-1]:.0f} MiB "
          f"over {replays * 1000:,} kernels)", flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    replays = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for variant in VARIANTS:
        subprocess.run(python_m("benchmarks.probes.rss_graph_replay_probe", "--child", variant, str(replays)),
                       check=False, timeout=600, cwd=REPO)


if __name__ == "__main__":
    main()
