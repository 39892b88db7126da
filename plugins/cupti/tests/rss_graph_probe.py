"""Where does memory go per launch after a CUDA graph?  GPU only, diagnostics.

    python3 plugins/cupti/tests/rss_graph_probe.py [N]

Runs each variant in a fresh process (CUPTI state is process-wide) and prints
the RSS growth over N driver launches of an empty kernel, profiled.
"""

import gc
import os
import subprocess
import sys

VARIANTS = {
    "plain": "no graph at all",
    "graph_before": "graph captured and replayed before profiling started",
    "graph_during": "graph captured and replayed while profiling",
    "graph_during_restart": "as graph_during, then stop and start again (what the test suite does)",
    "graph_during_deleted": "as graph_during, graph deleted before the launches",
    "graph_during_nocb": "as graph_during, without the graph-node resource callbacks",
}


def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024


def child(variant, n):
    import torch

    from proton_cupti import _cupti
    from proton_cupti.backend import load_cupti

    lib = load_cupti()
    _cupti._test_launch_noop(100_000)

    def begin(graph_nodes=True):
        _cupti._test_start(graph_nodes)
        _cupti.configure(False, False, [], [])
        _cupti.set_epoch(1)

    def capture():
        x = torch.ones(1 << 16, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.mul_(1.0)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                x.mul_(1.0)
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        return g

    graph = None
    if variant == "graph_before":
        graph = capture()
    begin(graph_nodes=variant != "graph_during_nocb")
    if variant.startswith("graph_during"):
        graph = capture()
    if variant == "graph_during_restart":
        _cupti.flush()
        _cupti.set_epoch(0)
        _cupti.stop()
        begin()
    if variant == "graph_during_deleted":
        del graph
        gc.collect()
        torch.cuda.synchronize()
    _cupti.flush()
    _cupti._test_launch_noop(200_000)  # steady state first
    _cupti.flush()
    before = rss_mib()
    err = _cupti._test_launch_noop(n)
    _, records, _, dropped, _ = _cupti.flush()
    after = rss_mib()
    _cupti.set_epoch(0)
    _cupti.stop()
    counted = sum(r[5] for r in records if r[2] == "proton_noop")
    maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l})
    print(f"{variant:22s} growth {after - before:+8.1f} MiB  ({(after - before) * 2**20 / n:5.1f} B/launch)"
          f"  counted {counted}/{n} dropped {dropped} {err}  libcupti loaded={lib} mapped={maps}", flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    for variant, what in VARIANTS.items():
        print(f"# {variant}: {what}", flush=True)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant, str(n)], check=False)


if __name__ == "__main__":
    main()
