"""Does per-launch memory growth after a CUDA graph come from CUPTI or the driver? (GPU only)

python3 plugins/cupti/tests/rss_graph_probe.py [--cupti-during-capture]
"""

import sys

import torch

from proton_cupti import _cupti
from proton_cupti.backend import load_cupti


def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmRSS:"))


def phase(name, fn):
    before = rss()
    fn()
    print(f"{name:40s} RSS {before} -> {rss()} MiB ({rss() - before:+d})", flush=True)


N = 3_000_000
load_cupti()
_cupti._test_launch_noop(100_000)
if "--cupti-during-capture" in sys.argv:
    _cupti.start()
    _cupti.set_epoch(1)
x = torch.ones(1 << 16, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x * 2
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2
g.replay()
torch.cuda.synchronize()
phase(f"after graph, bare {N}", lambda: _cupti._test_launch_noop(N))
_cupti.start()
_cupti.set_epoch(1)
phase(f"after graph, cupti epoch 1, {N}", lambda: _cupti._test_launch_noop(N))
_cupti.flush()
_cupti.set_epoch(0)
_cupti.stop()
