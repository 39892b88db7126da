"""The instrumentation backend end to end on CPU: proton.start -> Triton's hooks -> flush -> profile.

A fake Triton and GPU (fake_triton.py) play Triton 3.6's part of each launch in its order, and the
"kernel" writes a synthetic profile buffer in the 3.6 layout (instr_buffers.py).
"""

import json
import logging
import sys
import types

import pytest

import proton_core as proton
from fake_triton import Kernel
from instr_buffers import scope
from proton_core.plugin_api import ProtonError
from proton_core.testing import child, load_profile
from proton_instrumentation import installation
from proton_instrumentation.compiler_hook import ProtonPasses
from proton_instrumentation.mode import CACHE_KEY_PREFIX, parse_mode
from proton_instrumentation.registry import REGISTRY

NESTED = Kernel("kern", [(True, "outer"), (True, "inner"), (False, "inner"), (False, "outer")])
CY, CALLS, WARPS, TIME = "cycles (exc)", "scope_calls (exc)", "warps (exc)", "scope_time (ns)(exc)"


def nested_warp(shift=0):
    """outer 0..100 around inner 10..30 and 40..90, shifted."""
    return [(0, 0, shift), (1, 0, shift + 10), (1, 1, shift + 30), (1, 0, shift + 40), (1, 1, shift + 90),
            (0, 1, shift + 100)]


def ctas(n=2, warps=4):
    return [{w: nested_warp(7 * w) for w in range(warps)} for _ in range(n)]


def metrics(node):
    return {k: v for k, v in node["metrics"].items() if k not in ("device_id", "device_type")}


def messages(caplog):
    return [r.getMessage() for r in caplog.records]


def test_tree_has_kernel_scopes_with_cycles_calls_and_warps(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    with proton.scope("step"):
        ftriton.launch(NESTED, ctas())
        ftriton.launch(NESTED, ctas())
    proton.finalize()
    root, device_info = load_profile(tmp_path / "p.hatchet")
    kernel = child(root, "step", "kern")
    assert kernel["metrics"]["count"] == 2 and kernel["metrics"]["time (ns)"] == 2 * 7000  # globaltimer span
    outer, inner = child(kernel, "outer"), child(kernel, "outer", "inner")
    # 2 launches x 2 CTAs x 4 warps; outer 100 cycles, inner 20 + 50 cycles per warp; 2 GHz: 0.5 ns a cycle
    assert metrics(outer) == {CY: 16 * 100, CALLS: 16, WARPS: 16, TIME: 16 * 100 * 0.5}
    assert metrics(inner) == {CY: 16 * 70, CALLS: 32, WARPS: 16, TIME: 16 * 70 * 0.5}
    assert outer["frame"]["type"] == inner["frame"]["type"] == "in_kernel"
    assert device_info["CUDA"]["0"]["arch"] == "90"


def test_switches_are_set_during_the_session_and_restored_after(tmp_path, ftriton):
    before_alloc = ftriton.allocation._profile_allocator.get()
    ftriton.compilation.instrumentation_mode = "user-value"
    proton.start(str(tmp_path / "p"), backend="instrumentation", mode="default:buffer_size=1024")
    assert ftriton.flags.instrumentation_on is True
    passes = ftriton.cuda_backend.instrumentation
    assert isinstance(passes, ProtonPasses) and passes.mode == parse_mode("default:buffer_size=1024")
    assert ftriton.compilation.instrumentation_mode == CACHE_KEY_PREFIX + passes.mode.canonical()
    assert ftriton.allocation._profile_allocator.get() is not before_alloc
    assert all(len(getattr(ftriton.runtime, h).calls) == 1 for h in installation.HOOKS)
    proton.finalize()
    assert ftriton.flags.instrumentation_on is False and ftriton.cuda_backend.instrumentation is None
    assert ftriton.compilation.instrumentation_mode == "user-value"
    assert ftriton.allocation._profile_allocator.get() is before_alloc
    assert all(getattr(ftriton.runtime, h).calls == [] for h in installation.HOOKS)
    assert installation.users() == 0


def test_two_sessions_share_one_installation_and_the_last_restores(tmp_path, ftriton):
    a = proton.start(str(tmp_path / "a"), backend="instrumentation")
    b = proton.start(str(tmp_path / "b"), backend="instrumentation")
    ftriton.launch(NESTED, ctas(1))
    proton.finalize(a)
    assert ftriton.flags.instrumentation_on is True  # b still runs
    ftriton.launch(NESTED, ctas(1))
    proton.finalize(b)
    assert ftriton.flags.instrumentation_on is False
    assert child(load_profile(tmp_path / "a.hatchet")[0], "kern")["metrics"]["count"] == 1
    assert child(load_profile(tmp_path / "b.hatchet")[0], "kern")["metrics"]["count"] == 2


@pytest.mark.parametrize("conflict, message", [
    ("allocator", "another profile allocator is set"),
    ("backend", "CUDABackend.instrumentation is already set"),
    ("upstream", "upstream proton's instrumentation"),
])
def test_conflicts_fail_start_in_one_line_and_change_nothing(tmp_path, ftriton, monkeypatch, conflict, message):
    if conflict == "allocator":
        ftriton.allocation.set_profile_allocator(lambda size, align, stream: None)
    elif conflict == "backend":
        ftriton.cuda_backend.instrumentation = object()
    else:
        hook = types.ModuleType("triton.profiler.hooks.instrumentation")
        hook.InstrumentationHook = type("InstrumentationHook", (), {"active_count": 1})
        monkeypatch.setitem(sys.modules, hook.__name__, hook)
    alloc, passes = ftriton.allocation._profile_allocator.get(), ftriton.cuda_backend.instrumentation
    with pytest.raises(ProtonError) as err:
        proton.start(str(tmp_path / "p"), backend="instrumentation")
    assert message in str(err.value) and "\n" not in str(err.value)
    assert ftriton.flags.instrumentation_on is False and ftriton.compilation.instrumentation_mode == ""
    assert ftriton.allocation._profile_allocator.get() is alloc and ftriton.cuda_backend.instrumentation is passes
    assert all(getattr(ftriton.runtime, h).calls == [] for h in installation.HOOKS)


def test_runs_beside_another_backend(tmp_path, ftriton, fake):
    """Two sessions at once: kernel times from one backend (here the synthetic one standing for cupti),
    cycles from instrumentation, each in its own tree."""
    proton.start(str(tmp_path / "times"), backend="fake")
    proton.start(str(tmp_path / "cycles"), backend="instrumentation")
    with proton.scope("step"):
        ftriton.launch(NESTED, ctas(1))
        fake.launch("kern", 5000)
    proton.finalize()
    times = child(load_profile(tmp_path / "times.hatchet")[0], "step", "kern")
    cycles = child(load_profile(tmp_path / "cycles.hatchet")[0], "step", "kern")
    assert times["metrics"]["time (ns)"] == 5000 and times["children"] == []
    assert metrics(child(cycles, "outer"))[CY] == 400


def test_kernel_loaded_before_the_session_warns_once_naming_it(tmp_path, ftriton, caplog):
    held = ftriton.launch(NESTED, ctas(1))  # compiled and loaded with no session: not instrumented
    assert held.cta_bytes == 0
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    with caplog.at_level(logging.WARNING, logger="proton"):
        ftriton.launch(held, ctas(1))
        ftriton.launch(held, ctas(1))
        ftriton.launch(NESTED, ctas(1))  # through the "JIT": recompiled under our key, instrumented
    proton.finalize()
    lines = [m for m in messages(caplog) if "loaded before the instrumentation session started" in m]
    assert len(lines) == 1 and lines[0].startswith("kernel kern was loaded before")
    assert metrics(child(load_profile(tmp_path / "p.hatchet")[0], "kern", "outer"))[CALLS] == 4


def test_exit_without_enter_is_one_error_naming_kernel_and_scope(tmp_path, ftriton, caplog):
    bad = Kernel("bad_kernel", [(False, "lonely"), (True, "ok"), (False, "ok")])
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    ftriton.launch(NESTED, ctas(1))
    with pytest.raises(ProtonError) as err:
        ftriton.launch(bad, [{0: scope(1, 0, 5)}])
    assert str(err.value).startswith("kernel bad_kernel: pl.exit_scope('lonely') has no matching pl.enter_scope")
    assert "\n" not in str(err.value)
    compiled = ftriton.cache[("bad_kernel", ftriton.compilation.instrumentation_mode)]
    with caplog.at_level(logging.WARNING, logger="proton"):
        ftriton.launch(compiled, [{0: scope(1, 0, 5)}])  # launched again: not decoded, counted
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert metrics(child(root, "kern", "outer"))[CY] == 400  # the good kernel's data is all there
    assert root["metrics"]["dropped"] >= 1
    assert any(m.startswith("kernel bad_kernel: launches are not decoded") for m in messages(caplog))


def test_scope_name_used_twice(tmp_path, ftriton, caplog):
    nested_dup = Kernel("dup_nested", [(True, "a"), (True, "a"), (False, "a"), (False, "a")])
    sequential = Kernel("dup_seq", [(True, "a"), (False, "a"), (True, "a"), (False, "a")])
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    with pytest.raises(ProtonError, match=r"^kernel dup_nested: scope 'a' is entered again while it is open"):
        ftriton.launch(nested_dup, [{0: scope(0, 0, 5)}])
    with caplog.at_level(logging.WARNING, logger="proton"):
        ftriton.launch(sequential, [{0: scope(0, 0, 5) + scope(0, 10, 12)}])
    proton.finalize()
    assert any(m.startswith("kernel dup_seq: scope name 'a' is used for two scopes") for m in messages(caplog))
    assert metrics(child(load_profile(tmp_path / "p.hatchet")[0], "dup_seq", "a"))[CY] == 7


def test_small_buffer_warns_and_keeps_the_records_that_fit(tmp_path, ftriton, caplog):
    loop = Kernel("loop", [(True, "it"), (False, "it")])
    many = {w: [r for i in range(20) for r in scope(0, 100 * i, 100 * i + 10 + w)] for w in range(4)}
    proton.start(str(tmp_path / "p"), backend="instrumentation", mode="default:buffer_size=256")  # 8 records/warp
    with caplog.at_level(logging.WARNING, logger="proton"):
        ftriton.launch(loop, [many])
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    it = metrics(child(root, "loop", "it"))
    assert it[CALLS] == 4 * 4  # the latest 8 records = 4 iterations per warp
    assert it[CY] == sum(4 * (10 + w) for w in range(4))
    assert root["metrics"]["dropped"] == 4 * 32
    assert any("instrumentation buffer too small" in m and "raise buffer_size" in m for m in messages(caplog))


@pytest.mark.parametrize("granularity, warps, calls", [("warp_group", 4, 4), ("cta", 2, 2)])
def test_granularity_folds_warps(tmp_path, ftriton, granularity, warps, calls):
    wide = Kernel("wide", [(True, "s"), (False, "s")], num_warps=8)
    proton.start(str(tmp_path / "p"), backend="instrumentation", mode=f"default:granularity={granularity}")
    ftriton.launch(wide, [{w: scope(0, 10 + w, 100 + w) for w in range(8)}] * 2)
    proton.finalize()
    s = metrics(child(load_profile(tmp_path / "p.hatchet")[0], "wide", "s"))
    assert (s[WARPS], s[CALLS]) == (warps, calls)  # units: 2 CTAs x 2 warp groups, or the 2 CTAs
    group_cycles = 2 * ((103 - 10) + (107 - 14))  # a group: earliest start to latest end of its warps
    assert s[CY] == (group_cycles if granularity == "warp_group" else 2 * (107 - 10))


def test_trace_has_one_track_per_warp_with_scope_slices(tmp_path, ftriton):
    proton.start(str(tmp_path / "t"), backend="instrumentation", data="trace")
    with proton.scope("step"):
        ftriton.launch(NESTED, ctas(2))
        ftriton.launch(NESTED, ctas(1))
    proton.finalize()
    events = json.loads((tmp_path / "t.chrome_trace").read_text())["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name" and "launch" in
             e["args"]["name"]}
    assert sorted(procs.values()) == ["kern launch 1 (CUDA 0)", "kern launch 2 (CUDA 0)"]
    tracks = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name" and e["pid"] in procs}
    first = next(p for p, n in procs.items() if n.startswith("kern launch 1"))
    assert sorted(n for p, n in tracks if p == first) == [f"CTA {c} (SM {c + 100}) warp {w}"
                                                          for c in range(2) for w in range(4)]
    slices = [e for e in events if e.get("cat") == "in_kernel"]
    assert len(slices) == 3 * 4 * 3  # 3 CTAs x 4 warps x (outer + 2 inner)
    outer = [e for e in slices if e["name"] == "outer"]
    assert all(abs(e["dur"] - 0.05) < 1e-9 for e in outer)  # 100 cycles at 2 GHz = 50 ns
    assert all(e["args"]["path"] == "step" and e["args"]["kernel"] == "kern" for e in slices)


def test_deactivated_session_records_nothing(tmp_path, ftriton):
    sid = proton.start(str(tmp_path / "p"), backend="instrumentation")
    proton.deactivate(sid)
    ftriton.launch(NESTED, ctas(1))
    proton.activate(sid)
    ftriton.launch(NESTED, ctas(1))
    proton.finalize()
    assert child(load_profile(tmp_path / "p.hatchet")[0], "kern")["metrics"]["count"] == 1


def test_drain_delivers_only_completed_copies_and_flush_waits(ftriton):
    from proton_instrumentation.backend import InstrumentationBackend

    backend = InstrumentationBackend()
    backend.start(None)
    try:
        backend.configure(python_frames=False, trace=False)
        backend.set_epoch(3)
        backend.set_context(77)
        ftriton.launch(NESTED, ctas(1))
        first = backend.drain()  # the periodic writer's poll: copies the arena out; this copy completes at once
        assert first.nodes == [(1, 0, 0, 77)] and first.records == [(3, 1, "kern", 0, 6000, 1)]
        assert {k[4] for k in first.kernel_metrics} == {("outer",), ("outer", "inner")}
        ftriton.device.holding = True
        ftriton.launch(NESTED, ctas(1))
        assert backend.drain().records == []  # copied out, not complete: not read
        assert len(backend.allocator.batches) == 1 and backend.outstanding() == 1
        assert backend.drain().records == [] and len(ftriton.device.copies) == 2  # nothing new to copy
        second = backend.flush()  # waits for the copy
        assert second.records == [(3, 1, "kern", 0, 6000, 1)] and second.nodes == [] and backend.outstanding() == 0
    finally:
        backend.stop()
    assert installation.users() == 0


def test_a_kernel_loaded_in_an_earlier_session_is_decoded_in_the_next(tmp_path, ftriton):
    proton.start(str(tmp_path / "a"), backend="instrumentation")
    ftriton.launch(NESTED, ctas(1))
    proton.finalize()
    loaded = len(REGISTRY.kernels)
    proton.start(str(tmp_path / "b"), backend="instrumentation")
    ftriton.launch(NESTED, ctas(1))  # the JIT's cache under the same key: no new load
    proton.finalize()
    assert len(REGISTRY.kernels) == loaded
    assert metrics(child(load_profile(tmp_path / "b.hatchet")[0], "kern", "outer"))[CY] == 400


def test_a_second_mode_while_running_is_refused(tmp_path, ftriton):
    from proton_instrumentation import installation as inst

    proton.start(str(tmp_path / "a"), backend="instrumentation", mode="default")
    passes = ProtonPasses(parse_mode("default:buffer_type=global"), 1000, proton=object())
    with pytest.raises(ProtonError, match="already running with mode"):
        inst.acquire(ftriton.env, passes, None, ())
    proton.finalize()


def test_mode_objects_are_accepted(tmp_path, ftriton):
    upstream_like = types.SimpleNamespace(name="default", granularity=types.SimpleNamespace(name="CTA"),
                                          buffer_type="global", buffer_size=4096, optimizations=[])
    proton.start(str(tmp_path / "p"), backend="instrumentation", mode=parse_mode(upstream_like))
    assert "granularity=cta" in ftriton.compilation.instrumentation_mode
    assert "buffer_type=global" in ftriton.compilation.instrumentation_mode
    proton.finalize()


def test_bad_mode_is_one_line(tmp_path, ftriton):
    with pytest.raises(ProtonError, match="instrumentation mode option buffer_size=300"):
        proton.start(str(tmp_path / "p"), backend="instrumentation", mode="default:buffer_size=300")
    assert ftriton.flags.instrumentation_on is False


def test_runs_inside_the_op_of_hook_triton_whichever_starts_first(tmp_path, ftriton, monkeypatch):
    """Both plugins in Triton's hooks at once, through the one manager (proton_frameworks.triton_hooks):
    hook="triton"'s op (upstream's launch-hook priority) enters before and exits after the
    instrumentation's launch (its lower priority), though the instrumentation session started first, so
    the in-kernel scopes land under the op's name; the last finalize leaves the chains empty."""
    import fake_triton
    from proton_frameworks import triton_hook

    knobs = types.ModuleType("triton.knobs")
    knobs.runtime = ftriton.runtime
    triton = types.ModuleType("triton")
    triton.__version__, triton.knobs = "3.6.0", knobs
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", knobs)

    class WithMetadata(fake_triton.LazyDict):  # a kernel declared with launch_metadata
        def __init__(self, data):
            super().__init__(data)
            self.extras = [("launch_metadata", ())]

        def get(self):
            return {**self.data, "name": "matmul_64", "flops": 10}

    monkeypatch.setattr(fake_triton, "LazyDict", WithMetadata)
    instr = proton.start(str(tmp_path / "instr"), backend="instrumentation")
    both = proton.start(str(tmp_path / "both"), backend="instrumentation", hook="triton")
    ours_enter, ours_exit = triton_hook.hooks()
    enter, leave = ftriton.runtime.launch_enter_hook.calls, ftriton.runtime.launch_exit_hook.calls
    assert enter[0] is ours_enter and leave[0] is ours_exit and len(enter) == len(leave) == 2  # exit: reversed
    with proton.scope("step"):
        ftriton.launch(NESTED, ctas(1))
    proton.finalize(both)
    proton.finalize(instr)
    for name in ("instr", "both"):
        op = child(load_profile(tmp_path / f"{name}.hatchet")[0], "step", "matmul_64")
        assert op["metrics"]["flops"] == 10 and op["metrics"]["count"] == 1
        assert metrics(child(op, "outer"))[CY] == 400
    assert all(getattr(ftriton.runtime, h).calls == [] for h in installation.HOOKS)
