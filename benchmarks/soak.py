"""Soak test (GPU): a long run under periodic writing keeps flat memory and loses no kernel.

100 M kernels over 1 000 phases by default: direct launches of an empty kernel
(the cupti test build's noop launcher) under scopes that cycle through 100 000
distinct names (1 000 scope entries a phase, so every name has been seen by
phase 100: the warm-up), and CUDA-graph replays. Each phase ends with ``proton.data.advance_phase``;
the periodic writer writes and frees complete phases as part files. Reports
RSS after every phase (flat after warm-up?), kernels found in the parts
against kernels launched, and the per-launch cost against the same launches
unprofiled.

    python3 -m benchmarks.soak --out $OUT/soak [--launches 100000000 --phases 1000]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import logging
import os
import sys
import time

if not __package__:  # started as a file: the package (benchmarks.floor) cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.soak ...")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _MallInfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        return libc
    except (OSError, AttributeError):
        return None


LIBC = _libc()


def heap_mib() -> tuple[float, float]:
    """malloc's view (glibc, all arenas): (bytes handed out, bytes free but kept), in MiB.

    RSS growth that is "free but kept" is fragmentation (malloc_trim returns it);
    growth "handed out" is memory someone still holds; growth in neither is not malloc's.
    """
    if LIBC is None:
        return (0.0, 0.0)
    m = LIBC.mallinfo2()
    return ((m.uordblks + m.hblkhd) / 2**20, m.fordblks / 2**20)


def capture_graph(torch, x, nodes: int):
    """A CUDA graph of ``nodes`` one-kernel ops on ``x`` (captured now, on the current stream)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(nodes):
            x.add_(1)
    torch.cuda.synchronize()
    return graph


def kernel_counts(paths) -> list[tuple[int, int]]:
    """(direct noop kernels, graph kernels) found in each part file."""
    from proton_core.formats import hatchet

    out = []
    for path in paths:
        noop = other = 0
        for node in hatchet.read(path).root.walk():
            if node.device is not None:
                if node.name == "proton_noop":
                    noop += int(node.metrics.get("count", 0))
                else:
                    other += int(node.metrics.get("count", 0))
        out.append((noop, other))
    return out


def floor_ns_per_launch(cupti, calls: int, per_call: int, out: str) -> float:
    """The bare-CUPTI floor (benchmarks/floor: callbacks, kernel activity, correlation map) on the
    same pattern as a phase's direct launches: what any CUPTI profiler costs here."""
    from benchmarks.floor.build import build, find_cupti, load

    _proton_floor = load(build(os.path.join(out, "floor_build")))
    _proton_floor.start(find_cupti(), 0)
    try:
        t0 = time.perf_counter()
        for _ in range(3):
            for _ in range(calls):
                assert cupti._test_launch_noop(per_call) == ""
        return (time.perf_counter() - t0) / (3 * calls * per_call) * 1e9
    finally:
        _proton_floor.stop(True)  # detach (cuptiFinalize): the session attaches afresh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out/soak")
    ap.add_argument("--launches", type=int, default=100_000_000, help="kernels in all")
    ap.add_argument("--phases", type=int, default=1000)
    ap.add_argument("--graph-share", type=float, default=0.4, help="share of kernels from CUDA-graph replays")
    ap.add_argument("--graph-nodes", type=int, default=1000, help="kernels per captured graph")
    ap.add_argument("--scopes", type=int, default=100_000, help="distinct scope names, cycled through")
    ap.add_argument("--scope-entries", type=int, default=1000, help="scopes entered per phase")
    ap.add_argument("--warmup-phases", type=int, help="phases before RSS is the base (default: one cycle + 10)")
    ap.add_argument("--capture-while-profiling", action="store_true",
                    help="capture the graph inside the session (CUPTI then keeps ~32 B per later launch)")
    ap.add_argument("--poll", type=float, default=0.2, help="periodic writer poll, seconds")
    ap.add_argument("--malloc-trim", action="store_true",
                    help="diagnostic: malloc_trim(0) after every phase (is the RSS growth malloc fragmentation?)")
    ap.add_argument("--no-floor", action="store_true", help="skip the bare-CUPTI floor's cost on the same pattern")
    ap.add_argument("--unprofiled", action="store_true",
                    help="the same program without a session: what the driver and torch alone do to RSS")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    import torch

    import proton_core as proton
    from proton_cupti import _cupti

    if not hasattr(_cupti, "_test_launch_noop"):
        print("soak: proton-profiler-cupti was built without PROTON_CUPTI_TESTING=ON (the noop launcher)", file=sys.stderr)
        return 2
    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    logging.getLogger("proton").addHandler(Keep())

    graph_kernels = int(args.launches * args.graph_share) // (args.graph_nodes * args.phases) * args.graph_nodes
    replays = graph_kernels // args.graph_nodes
    direct = (args.launches - graph_kernels * args.phases) // args.phases
    scopes_per_phase = args.scope_entries
    per_scope = max(1, direct // scopes_per_phase)
    direct = per_scope * scopes_per_phase
    warmup = args.warmup_phases if args.warmup_phases is not None else -(-args.scopes // scopes_per_phase) + 10
    warmup = min(warmup, args.phases - 1)

    assert _cupti._test_launch_noop(100_000) == ""
    # Unprofiled, the same pattern as a phase's direct launches (each call ends in a synchronize).
    t0 = time.perf_counter()
    for _ in range(3):
        for _ in range(scopes_per_phase):
            assert _cupti._test_launch_noop(per_scope) == ""
    bare_ns = (time.perf_counter() - t0) / (3 * direct) * 1e9
    floor_ns = None if args.no_floor else floor_ns_per_launch(_cupti, scopes_per_phase, per_scope, args.out)

    x = torch.zeros(1, device="cuda")
    name = os.path.join(args.out, "soak")

    def capture():
        return capture_graph(torch, x, args.graph_nodes)

    graph = None if args.capture_while_profiling else capture()
    sid = None if args.unprofiled else proton.start(name, backend="cupti", mode=f"periodic_flushing:poll={args.poll}")
    graph = graph or capture()

    rss, heap_used, heap_free, pending, direct_s = [], [], [], [], 0.0
    start = time.perf_counter()
    for phase in range(args.phases):
        for i in range(scopes_per_phase):
            with proton.scope(f"scope_{(phase * scopes_per_phase + i) % args.scopes}"):
                t = time.perf_counter()
                assert _cupti._test_launch_noop(per_scope) == ""
                direct_s += time.perf_counter() - t
        with proton.scope("graphs"):
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize()
        if sid is not None:
            proton.data.advance_phase(sid)
        if args.malloc_trim and LIBC is not None:
            LIBC.malloc_trim(0)
        rss.append(round(rss_mib(), 2))
        used, free = heap_mib()
        heap_used.append(round(used, 2))
        heap_free.append(round(free, 2))
        if phase % 10 == 9:  # phases ended but not yet written as parts: how far the writer lags
            pending.append(phase + 1 - len(glob.glob(glob.escape(name) + ".part_*")))
        if phase % 100 == 0:
            print(f"phase {phase}: {time.perf_counter() - start:.0f} s, RSS {rss[-1]:.1f} MiB", flush=True)
    written_before_finalize = len(glob.glob(glob.escape(name) + ".part_*"))
    paths = proton.finalize(sid) if sid is not None else []
    wall = time.perf_counter() - start
    native = dict(_cupti.stats()) if hasattr(_cupti, "stats") else {}

    launched = (direct + replays * args.graph_nodes) * args.phases
    per_part = kernel_counts(paths)
    found = sum(a + b for a, b in per_part)
    # Fewer than launched is a loss; more happens only in the part where torch captured the graph
    # inside the session (its capture launches a couple of kernels of its own): counted, not lost.
    short = [(i, a, b) for i, (a, b) in enumerate(per_part) if a < direct or b < replays * args.graph_nodes]
    base = rss[warmup]
    after = rss[warmup:]
    n = len(after)
    mean_x, mean_y = (n - 1) / 2, sum(after) / n
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(after)) / max(1e-9, sum((i - mean_x) ** 2 for i in range(n)))
    if sid is None:
        launched = found = 0
    result = {
        "kernels_launched": launched, "kernels_found": found, "kernels_lost": max(0, launched - found),
        "kernels_extra": max(0, found - launched),
        "phases": args.phases, "parts": len(paths), "warmup_phases": warmup,
        "graph_captured_while_profiling": args.capture_while_profiling,
        "distinct_scopes": min(args.scopes, scopes_per_phase * args.phases), "wall_s": round(wall, 1),
        "rss_base_mib": base, "rss_max_after_warmup_mib": max(after), "rss_min_after_warmup_mib": min(after),
        "rss_growth_after_warmup_mib": round(max(after) - base, 2), "rss_series_every_10": rss[::10],
        "rss_mib_per_phase_after_warmup": round(slope, 3),
        "heap_used_growth_after_warmup_mib": round(max(heap_used[warmup:]) - heap_used[warmup], 2),
        "heap_free_growth_after_warmup_mib": round(max(heap_free[warmup:]) - heap_free[warmup], 2),
        "heap_used_series_every_10": heap_used[::10], "heap_free_series_every_10": heap_free[::10],
        "malloc_trim_each_phase": args.malloc_trim, "unprofiled": args.unprofiled,
        "ns_per_launch_unprofiled": round(bare_ns),
        "ns_per_launch_floor": round(floor_ns) if floor_ns is not None else None,
        "ns_per_launch_profiled": round(direct_s / (direct * args.phases) * 1e9),
        "native_kernel_records": native,
        "parts_written_before_finalize": written_before_finalize,
        "phases_pending_every_10": pending,
        "dropped_warnings": [w for w in warnings if "dropped" in w or "cleared" in w],
        "parts_not_as_launched (part, direct, graph)": short[:20], "parts_not_as_launched_count": len(short),
        "expected_per_part (direct, graph)": [direct, replays * args.graph_nodes],
    }
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_series_every_10")}, indent=1))
    ok = result["kernels_lost"] == 0 and not short and result["rss_growth_after_warmup_mib"] <= 16
    print("soak:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
