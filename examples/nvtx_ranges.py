"""NVTX ranges as scopes: torch.cuda.nvtx inside proton scopes, and a transformers model under emit_nvtx.

    python3 examples/nvtx_ranges.py [OUT_DIR]       # a CUDA GPU, torch; transformers for the second part

Prints each profile as an indented tree: inclusive GPU time and kernel count per node.
"""

from __future__ import annotations

import os
import sys

import proton_core as proton  # first: NVTX must find Proton before torch's first range
from proton_core.formats import hatchet


def show(path: str, depth: int = 6, width: int = 6) -> None:
    """Indented tree, heaviest children first: inclusive time (ms) and kernel launches."""

    def total(node):
        own_t = node.metrics.get("time (ns)", 0) if node.device else 0
        own_c = node.metrics.get("count", 0) if node.device else 0
        for c in node.children:
            t, n = total(c)
            own_t, own_c = own_t + t, own_c + n
        return own_t, own_c

    def walk(node, level):
        t, n = total(node)
        print(f"{'  ' * level}{node.name}  {t / 1e6:.3f} ms  {int(n)} kernels")
        if level < depth:
            for c in sorted(node.children, key=lambda c: -total(c)[0])[:width]:
                walk(c, level + 1)

    walk(hatchet.read(path).root, 0)


def main() -> None:
    import torch

    out = sys.argv[1] if len(sys.argv) > 1 else "nvtx_out"
    os.makedirs(out, exist_ok=True)
    x = torch.randn(2048, 2048, device="cuda")

    proton.start(os.path.join(out, "ranges"), backend="cupti")
    with proton.scope("train_step"):
        torch.cuda.nvtx.range_push("forward")
        with proton.scope("layer0"):
            torch.cuda.nvtx.range_push("matmul")
            y = x @ x
            torch.cuda.nvtx.range_pop()
        y = torch.relu(y)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        (y * 2).sum()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    proton.finalize()
    show(os.path.join(out, "ranges.hatchet"))

    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        print("transformers not installed: skipping the emit_nvtx model")
        return
    model = BertModel(BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                                 intermediate_size=1024)).cuda().eval()
    ids = torch.randint(0, 1000, (8, 128), device="cuda")
    with torch.no_grad():
        model(ids)  # warm-up, unprofiled
        torch.cuda.synchronize()
        proton.start(os.path.join(out, "bert"), backend="cupti")
        with proton.scope("inference"), torch.autograd.profiler.emit_nvtx():
            model(ids)
        torch.cuda.synchronize()
        proton.finalize()
    show(os.path.join(out, "bert.hatchet"), depth=4, width=4)


if __name__ == "__main__":
    main()
