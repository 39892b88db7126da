"""Which part of CUPTI keeps host memory per kernel launch after a CUDA-graph launch, and what a detach costs.

    python3 -m benchmarks.probes.cupti_launch_growth_probe [ROUNDS]     # GPU machine, after gpu_check.sh

Each variant runs in a fresh process: a 1 000-kernel graph is captured before
CUPTI is attached, then ROUNDS rounds (default 20) of 100 000 direct launches of
an empty kernel; the graph is replayed once at the start (or each round, for the
``cycle`` variants). Printed per variant: malloc's bytes handed out (glibc
mallinfo2, all arenas) and RSS, as growth per million direct launches, and per
round for the ``cycle`` variants, which detach CUPTI (``cuptiFinalize``) and
attach it again every round (ours: the backend's own ``reattach_if_due``).

The bare-CUPTI floor (benchmarks/floor) takes config bits that leave parts out:
1 no launch callbacks, 2 no kernel activity, 4 no correlation map (always set
here: the floor's own map would grow per launch and hide CUPTI's), 8 no
callbacks on cuGraphLaunch (kernel launches only).

    python3 -m benchmarks.probes.cupti_launch_growth_probe ROUNDS "floor, graph" ...   # only these variants
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.probes.cupti_launch_growth_probe ...")

from benchmarks import REPO, python_m  # noqa: E402

ROUND = 100_000
NO_CALLBACKS, NO_ACTIVITY, NO_CORRELATION, NO_GRAPH_LAUNCH_CALLBACKS = 1, 2, 4, 8
# name: (profiler, floor config, graph replays: "none" | "once" | "each", detach each round)
VARIANTS = {
    "no profiler": ("none", 0, "once", False),
    "floor, no graph": ("floor", NO_CORRELATION, "none", False),
    "floor, graph": ("floor", NO_CORRELATION, "once", False),
    "floor activity only, graph": ("floor", NO_CORRELATION | NO_CALLBACKS, "once", False),
    "floor callbacks only, graph": ("floor", NO_CORRELATION | NO_ACTIVITY, "once", False),
    "floor no graph-launch cb, graph": ("floor", NO_CORRELATION | NO_GRAPH_LAUNCH_CALLBACKS, "once", False),
    "floor cycle, no graph": ("floor", NO_CORRELATION, "none", True),
    "floor cycle, graph": ("floor", NO_CORRELATION, "each", True),
    "ours cycle, graph": ("ours", 0, "each", True),
    "floor, graph each round": ("floor", NO_CORRELATION, "each", False),
    "ours, graph each round": ("ours", 0, "each", False),
    "ours no node cb, graph each": ("ours-no-node-callbacks", 0, "each", False),
    # Does the soak's growth come from forced flushes after graph launches? (no re-attach in either)
    "ours, graph, a phase a round": ("ours-phases-1", 0, "each", True),
    "ours, graph, 10 phases a round": ("ours-phases-10", 0, "each", True),
}


def child(name: str, rounds: int) -> None:
    import torch

    from proton_cupti import _cupti
    from benchmarks.soak import capture_graph, heap_mib, rss_mib

    profiler, config, replays, cycle = VARIANTS[name]
    graph = capture_graph(torch, torch.zeros(1, device="cuda"), 1000)
    assert _cupti._test_launch_noop(1000) == ""
    tmp = tempfile.mkdtemp()
    start = stop = lambda: None  # noqa: E731
    if profiler == "floor":
        from benchmarks.floor.build import build, find_cupti, load

        _proton_floor = load(build(os.path.join(tmp, "floor")))
        lib = find_cupti()
        start = lambda: _proton_floor.start(lib, config)  # noqa: E731
        stop = lambda: _proton_floor.stop(cycle)  # noqa: E731
    elif profiler.startswith("ours"):
        import proton_core as proton

        os.environ["PROTON_CUPTI_REATTACH_RECORDS"] = "0"  # only where the variant asks
        sid = proton.start(os.path.join(tmp, "p"), backend="cupti")
        if profiler == "ours-no-node-callbacks":
            _cupti._test_stop(True)
            _cupti._test_start(False)
        if not profiler.startswith("ours-phases-"):
            # The backend's own path between phases (a graph was launched, so it is due at once).
            stop = lambda: _cupti.reattach_if_due(0)  # noqa: E731
        else:  # forced flushes (sync + cuptiActivityFlushAll) at phase ends, no re-attach
            per_round = int(profiler.rsplit("-", 1)[1])

            def stop():
                for _ in range(per_round):
                    ended = proton.data.advance_phase(sid) - 1  # flushes: sync + forced activity flush
                    proton.data.clear(sid, ended, clear_up_to_phase=True)  # our memory stays flat
    if profiler == "floor":
        start()
    used, rss = [], []
    for i in range(rounds + 2):  # two rounds of warm-up
        if replays == "each" or (replays == "once" and i == 0):
            graph.replay()
        assert _cupti._test_launch_noop(ROUND) == ""
        torch.cuda.synchronize()
        if cycle:
            stop()
            if profiler == "floor":
                start()
        used.append(heap_mib()[0])
        rss.append(rss_mib())

    def slope(ys):
        ys = ys[2:]
        n = len(ys)
        mx, my = (n - 1) / 2, sum(ys) / n
        return sum((i - mx) * (y - my) for i, y in enumerate(ys)) / sum((i - mx) ** 2 for i in range(n))

    per_m = 1e6 / ROUND
    extra = f"   per round: heap {slope(used) * 1024:7.1f} KiB, RSS {slope(rss) * 1024:7.1f} KiB" if cycle else ""
    print(f"{name:32s} per 1M launches: heap {slope(used) * per_m:6.2f} MiB, RSS {slope(rss) * per_m:6.2f} MiB{extra}",
          flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for name in sys.argv[2:] or VARIANTS:
        r = subprocess.run(python_m("benchmarks.probes.cupti_launch_growth_probe", "--child", name, str(rounds)),
                           check=False, timeout=600, capture_output=True, text=True, cwd=REPO)
        print(r.stdout.strip() or f"{name:32s} failed: {r.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
