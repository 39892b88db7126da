"""Shows the memory CUPTI keeps per launch after a CUDA graph capture, and that cuptiFinalize frees it.

    python3 -m benchmarks.probes.rss_graph_probe [N]      # or: bash scripts/gpu_check.sh --probes

GPU only; needs proton-profiler-cupti built with its test bindings (PROTON_CUPTI_TESTING=ON,
as scripts/install.sh and scripts/gpu_check.sh build it).  Runs each variant in
a fresh process (CUPTI state is process-wide) and prints the RSS growth over N
profiled driver launches of an empty kernel (or, for "replays", over N graph
kernels).  The figures are in docs/performance.md ("CUDA graphs and CUPTI's memory").
"""

import gc
import subprocess
import sys

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.probes.rss_graph_probe ...")

from benchmarks import REPO, python_m  # noqa: E402

VARIANTS = {
    "plain": "no graph at all",
    "graph_before": "graph captured and replayed before profiling started",
    "graph_during": "graph captured and replayed while profiling",
    "capture_only": "graph captured while profiling, never replayed",
    "replay_only": "graph captured before profiling, replayed while profiling",
    "restart_detached": "as graph_during, then stop (cuptiFinalize) and start again",
    "restart_attached": "as graph_during, then stop without cuptiFinalize and start again",
    "replays": "graph captured while profiling, growth over its replays",
}


def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024


def child(variant, n):
    import torch

    from proton_cupti import _cupti
    from proton_cupti.backend import load_cupti

    load_cupti()
    _cupti._test_launch_noop(100_000)
    x = torch.ones(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.mul_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    def begin():
        _cupti._test_start(True)
        _cupti.configure(False, False, [], [])
        _cupti.set_epoch(1)

    def end(detach=True):
        _cupti.flush()
        _cupti.set_epoch(0)
        _cupti._test_stop(detach)

    def capture():
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                x.mul_(1.0)
        torch.cuda.synchronize()
        return g

    def replay(g, times):
        for _ in range(times):
            g.replay()
        torch.cuda.synchronize()

    graph = None
    if variant in ("graph_before", "replay_only"):
        graph = capture()
        if variant == "graph_before":
            replay(graph, 5)
    begin()
    if variant in ("graph_during", "capture_only", "restart_detached", "restart_attached", "replays"):
        graph = capture()
        if variant != "capture_only":
            replay(graph, 5)
    if variant == "replay_only":
        replay(graph, 5)
    if variant.startswith("restart"):
        end(detach=variant == "restart_detached")
        begin()
    _cupti.flush()
    if variant == "replays":
        replay(graph, 2000)
        _cupti.flush()
        before = rss_mib()
        replay(graph, n // 20)
        err = ""
    else:
        _cupti._test_launch_noop(200_000)  # steady state first
        _cupti.flush()
        before = rss_mib()
        err = _cupti._test_launch_noop(n)
    _, records, _, dropped, _ = _cupti.flush()
    after = rss_mib()
    end()
    counted = sum(r[5] for r in records)
    print(f"{variant:18s} growth {after - before:+8.1f} MiB  ({(after - before) * 2**20 / n:5.1f} B/kernel)"
          f"  counted {counted} of {n} dropped {dropped} {err}", flush=True)
    del graph
    gc.collect()


def main():
    from proton_cupti import _cupti

    if not hasattr(_cupti, "_test_launch_noop"):
        sys.exit("proton_cupti._cupti was built without its test bindings: reinstall with "
                 "SKBUILD_CMAKE_DEFINE=PROTON_CUPTI_TESTING=ON pip install -e plugins/cupti")
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    for variant, what in VARIANTS.items():
        print(f"# {variant}: {what}", flush=True)
        subprocess.run(python_m("benchmarks.probes.rss_graph_probe", "--child", variant, str(n)), check=False,
                       cwd=REPO)


if __name__ == "__main__":
    main()
