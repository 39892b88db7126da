"""Scoped Triton kernels shared by the GPU tests and ``benchmarks/instrumentation_cost.py``.

Importing this module needs Triton 3.6+ (it turns on ``pl.enable_semantic("triton")``); kernels are
defined at module level because Triton reads a kernel's source and globals from its module.
"""

import triton
import triton.language as tl
import triton.profiler.language as pl

pl.enable_semantic("triton")


@triton.jit
def tiny(x):
    """One CTA, one scope: a launch-bound loop of these measures the per-launch cost."""
    with pl.scope("body"):
        v = tl.load(x) + 1.0
    tl.store(x, v)


@triton.jit
def two_loops(x, out, n, BLOCK: tl.constexpr):
    """'one' runs n dependent FMA steps, 'four' 4n: their cycles should be 1:4."""
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x + offs)
    pl.enter_scope("one")
    for _ in range(n):
        acc = acc * 1.0001 + 0.5
    pl.exit_scope("one")
    pl.enter_scope("four")
    for _ in range(4 * n):
        acc = acc * 1.0001 + 0.5
    pl.exit_scope("four")
    tl.store(out + tl.program_id(0) * BLOCK + offs, acc)
