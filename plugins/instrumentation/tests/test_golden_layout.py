"""Golden layout: compile real kernels with our passes (Triton wheel, no GPU) and check the IR facts
the decoder and the registry rely on (DESIGN.md §2-§3). A Triton upgrade that changes them fails here.

Needs the triton package (skipped without it); compiles for sm90 on CPU up to the cubin.
"""

import json
import re

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
import triton.profiler.language as pl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

from proton_core.plugin_api import ProtonError  # noqa: E402
from proton_instrumentation import compiler_hook, triton_env  # noqa: E402
from proton_instrumentation.decode import (CLOCK_HI_MASK, END_BIT, HEADER_BYTES, PREAMBLE, SCOPE_SHIFT,  # noqa: E402
                                           cta_block_bytes)
from proton_instrumentation.mode import parse_mode  # noqa: E402
from proton_instrumentation.registry import Registry, mode_from_key, text_tables  # noqa: E402
from proton_instrumentation.scopes import check_scopes  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
MAX_SHARED = 232448


@gluon.jit
def gluon_nested(x, n):
    with pl.scope("outer"):
        for i in range(n):
            with pl.scope("inner"):
                gl.store(x + i, 1.0)
        with pl.scope("inner2"):
            gl.store(x, 2.0)


@triton.jit
def triton_loops(x, n):
    pl.enter_scope("one")
    for i in range(n):
        tl.store(x + i, 1.0)
    pl.exit_scope("one")
    pl.enter_scope("four")
    for i in range(4 * n):
        tl.store(x + i, 2.0)
    pl.exit_scope("four")


@gluon.jit
def gluon_exit_without_enter(x):
    pl.exit_scope("lonely")
    gl.store(x, 1.0)


@pytest.fixture(scope="module")
def compiled():
    """compile(fn, mode) -> CompiledKernel, with our three switches set for the call."""
    pl.enable_semantic("triton")
    env = triton_env.load()

    def build(fn, mode="default", signature=None, gluon_src=False):
        m = parse_mode(mode)
        saved = compiler_hook.install(env, compiler_hook.ProtonPasses(m, MAX_SHARED))
        try:
            cls = GluonASTSource if gluon_src else triton.compiler.ASTSource
            src = cls(fn=fn, signature=signature or {"x": "*fp32", "n": "i32"}, constexprs={})
            return triton.compile(src, target=TARGET, options={"instrumentation_mode": m.cache_key()})
        finally:
            compiler_hook.uninstall(env, saved)

    return env, build


def meta(kernel):
    path = next(p for c, p in kernel.metadata_group.items() if c.endswith(".json"))
    with open(path) as f:
        return json.load(f)


def test_gluon_nested_scopes_tables_and_sizes(compiled):
    env, build = compiled
    k = build(gluon_nested, gluon_src=True)
    md = meta(k)
    assert md["profile_scratch_size"] == cta_block_bytes(8192, 4) == 8320  # shared, auto size, 4 warps
    assert md["profile_scratch_align"] == 128
    assert mode_from_key(md["instrumentation_mode"]) == parse_mode("default")
    ttgir = k.asm["ttgir"]
    assert re.findall(r'proton\.record (start|end) "(\w+)"', ttgir) == [
        ("start", "outer"), ("start", "inner"), ("end", "inner"), ("start", "inner2"), ("end", "inner2"),
        ("end", "outer")]
    assert check_scopes(ttgir, "gluon_nested").errors == []
    ttgir_path = next(p for c, p in k.metadata_group.items() if c.endswith(".ttgir"))
    names, parents = env.scope_tables(ttgir_path)
    assert sorted(names) == [(0, "outer"), (1, "inner"), (2, "inner2")]
    assert sorted(parents) == [(1, 0), (2, 0)]
    tn, tp = text_tables(ttgir)
    assert sorted(tn) == sorted(names) and sorted(tp) == sorted(parents)  # our CPU-test fallback agrees


def test_llvm_ir_has_the_record_layout_the_decoder_reads(compiled):
    _, build = compiled
    llir = build(gluon_nested, gluon_src=True).asm["llir"]
    define = next(line for line in llir.splitlines() if line.startswith("define") and "gluon_nested" in line)
    assert define.count("ptr addrspace(1)") == 3  # x, then global_scratch and profile_scratch appended
    signed = PREAMBLE - (1 << 32)
    assert str(signed) in llir or str(PREAMBLE) in llir, "preamble 0xDEADBEEF not stored"
    assert "globaltimer" in llir and "smid" in llir
    assert "clock" in llir
    # the tag of each record: (end << 31) | (scope id << 23) | (clock_hi & 0x7ff), ids outer 0, inner 1, inner2 2
    assert SCOPE_SHIFT == 23 and CLOCK_HI_MASK == 0x7FF and HEADER_BYTES == 40

    def tag(scope_id, end):
        value = (END_BIT if end else 0) | (scope_id << SCOPE_SHIFT)
        return value - (1 << 32) if value & END_BIT else value

    ors = [v for v in map(int, re.findall(r"or disjoint i32 %\w+, (-?\d+)", llir)) if v < 0 or v >= 1 << 23]
    assert ors == [tag(1, False), tag(1, True), tag(2, False), tag(2, True), tag(0, True)]
    assert len(re.findall(r"and i32 %\w+, 2047", llir)) == 6  # every record keeps 11 high clock bits


def test_triton_dsl_kernel_and_global_buffer(compiled):
    _, build = compiled
    k = build(triton_loops, mode="default:buffer_type=global:buffer_size=1024")
    md = meta(k)
    assert md["profile_scratch_size"] == cta_block_bytes(1024, 4) == 1152
    assert mode_from_key(md["instrumentation_mode"]).buffer_type == "global"
    assert re.findall(r'proton\.record (start|end) "(\w+)"', k.asm["ttgir"]) == [
        ("start", "one"), ("end", "one"), ("start", "four"), ("end", "four")]


def test_clock32_and_small_shared_buffer(compiled):
    _, build = compiled
    k = build(triton_loops, mode="default:buffer_size=256:optimizations=clock32")
    assert meta(k)["profile_scratch_size"] == cta_block_bytes(256, 4) == 384


def test_a_kernel_without_scopes_has_no_profile_scratch(compiled):
    @triton.jit
    def plain(x, n):
        tl.store(x, 1.0)

    _, build = compiled
    assert meta(build(plain))["profile_scratch_size"] == 0


def test_misused_scope_compiles_on_36_and_our_check_names_it(compiled, tmp_path):
    env, build = compiled
    k = build(gluon_exit_without_enter, signature={"x": "*fp32"}, gluon_src=True)
    assert meta(k)["profile_scratch_size"] > 0  # Triton only printed a diagnostic
    problems = check_scopes(k.asm["ttgir"], "gluon_exit_without_enter")
    assert problems.errors == ["kernel gluon_exit_without_enter: pl.exit_scope('lonely') has no matching "
                               "pl.enter_scope('lonely') before it; add the enter or remove the exit"]
    with pytest.raises(ProtonError, match=r"^kernel gluon_exit_without_enter: pl.exit_scope\('lonely'\)"):
        Registry().on_load(env, None, 0x1234, "gluon_exit_without_enter", k.metadata_group)


def test_registry_reads_a_real_metadata_group(compiled):
    env, build = compiled
    k = build(gluon_nested, mode="default:granularity=warp_group", gluon_src=True)
    info = Registry().on_load(env, None, 0x42, "gluon_nested", k.metadata_group)
    assert info.instrumented and info.num_warps == 4 and info.cta_bytes == 8320
    assert info.mode.granularity == "warp_group" and info.mode.compile_granularity == "warp"
    assert dict(info.names)[0] == "outer"
