"""hook="triton"'s native hooks (proton_frameworks._triton_fast) against the Python ones: same results.

Every behaviour test runs with both implementations ("python": triton_hook.launch_enter/launch_exit,
"native": the C functions installed for Triton where the extension is built); the equivalence tests run
one sequence of launches with each and compare the written profiles whole.  Native runs also check,
through _triton_fast.stats(), that repeated launches really took the C path (a regression to "always
call the Python code" would still give right numbers, only slowly).
"""

import math
import os
import shutil
import sysconfig
import threading

import pytest

import proton_core as proton
from fwtest import install_fake_triton, load, node
from proton_core.plugin_api import (close_scope, current_op, open_scope, open_scopes, register_settler, thread_state,
                                    unregister_settler)
from proton_core.testing import PendingScope, add_setter, engine_counts, launch_op_cache, reset
from proton_frameworks import triton_hook
from proton_frameworks.testing import LazyDict

try:
    from proton_frameworks import _triton_fast
except ImportError:  # no compiler at install: only the Python hooks exist (test_extension_is_built says if wrong)
    _triton_fast = None

IMPLS = ["python", pytest.param("native", marks=pytest.mark.skipif(
    _triton_fast is None, reason="proton_frameworks._triton_fast is not built"))]


def hooks_of(impl):
    if impl == "native":
        return _triton_fast.launch_enter, _triton_fast.launch_exit
    return triton_hook.launch_enter, triton_hook.launch_exit


@pytest.fixture(params=IMPLS)
def impl(request):
    return request.param


class Hooks:
    """One implementation's hooks, with the native path counters since this object was made."""

    def __init__(self, impl):
        self.impl = impl
        self.enter, self.exit = hooks_of(impl)
        self.start = self._stats()

    @staticmethod
    def _stats():
        """Enters done by the core's cached step (from a remembered hit, or looked up), by the Python remainder;
        exits closed natively or by the Python close_op (the core's engine counts its own C API's calls)."""
        if _triton_fast is None:
            return {}
        core, hooks = engine_counts(), _triton_fast.stats()
        return {"enter_recalled": core["launch_recalled"], "enter_fast": core["launch_fast"],
                "enter_slow": hooks["enter_slow"], "exit_fast": core["close_op_fast"], "exit_slow": core["close_op_slow"]}

    def taken(self):
        """How many enters/exits took each native path since this object was made."""
        now = self._stats()
        return {k: now[k] - self.start[k] for k in now}

    def launch(self, fake, kernel="matmul_kernel", fn=None, args=None, ns=100, leave=True):
        meta = LazyDict({"name": kernel, "function": 1234, "stream": 0})
        if fn is not None:
            meta.add(fn, ((1, 1, 1), {"num_warps": 4}, args or {}))
        self.enter(meta)
        fake.launch(kernel, ns)
        if leave:
            self.exit(meta)
        return meta


def matmul(grid, metadata, args):
    m, n, k = args["M"], args["N"], args["K"]
    return {"name": f"matmul_{m}x{n}x{k}", "flops16": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}


def constant(**values):
    return lambda grid, metadata, args: dict(values)


def strip(literal):
    """A hatchet tree without the metadata that differs between runs (the file name)."""
    out = {k: v for k, v in literal.items() if k not in ("metadata",)}
    out["children"] = sorted((strip(c) for c in literal["children"]), key=lambda c: c["frame"]["name"])
    return out


# ------------------------------------------------------------------ behaviour ----
def test_kernels_launch_metadata_runs_itself_are_filed_under_its_scope(tmp_path, fake, impl):
    """upstream's test_hook_launch_context: launch_metadata that launches a kernel (``x.sum().item()``) files it
    under ``__proton_launch_metadata`` at the launching scope; the kernel itself goes under its op; a
    launch_metadata that raises leaves no scope open."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")

    def reducing(grid, metadata, args):
        fake.launch("reduce_kernel", 7)
        return {"name": "foo_test", "bytes": 4}

    def failing(grid, metadata, args):
        raise ValueError("bad metadata")

    with proton.scope("test0"):
        for _ in range(3):
            h.launch(fake, "foo", reducing)
        with pytest.raises(ValueError):
            h.launch(fake, "foo", failing, leave=False)
        assert open_scopes() == ["test0"]
    proton.finalize()
    test0 = node(load(tmp_path / "p.hatchet")[0], "test0")
    metadata = node(test0, "__proton_launch_metadata")
    assert [c["frame"]["name"] for c in metadata["children"]] == ["reduce_kernel"]
    assert node(metadata, "reduce_kernel")["metrics"]["count"] == 3
    assert node(test0, "foo_test")["metrics"]["count"] == 3


def test_the_python_context_keeps_launch_metadatas_scope_too(tmp_path, fake, impl):
    """upstream's test_hook_launch_context[python]: scopes are not in python paths, this one is (as a state)."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake", context="python")

    def reducing(grid, metadata, args):
        fake.launch("reduce_kernel", 7)
        return {"name": "foo_test"}

    with proton.scope("test0"):
        h.launch(fake, "foo", reducing)
    proton.finalize()
    parents = {}
    stack = [load(tmp_path / "p.hatchet")[0]]
    while stack:
        n = stack.pop()
        for c in n["children"]:
            parents[c["frame"]["name"]] = n["frame"]["name"]
            stack.append(c)
    assert parents["reduce_kernel"] == "__proton_launch_metadata" and "test0" not in parents


def test_repeated_launches_rename_and_count_exactly(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    n = 300
    with proton.scope("step"):
        for _ in range(n):
            h.launch(fake, "matmul_kernel", matmul, {"M": 64, "N": 32, "K": 16})
            fake.launch("cublas_gemm", 1)  # not Triton's: after the exit hook, back in "step"
        assert current_op() is None
    proton.finalize()
    step = node(load(tmp_path / "p.hatchet")[0], "step")
    assert sorted(c["frame"]["name"] for c in step["children"]) == ["cublas_gemm", "matmul_64x32x16"]
    assert node(step, "cublas_gemm")["metrics"]["count"] == n
    m = node(step, "matmul_64x32x16")["metrics"]
    assert (m["count"], m["time (ns)"]) == (n, 100 * n)
    assert m["flops16"] == n * 2 * 64 * 32 * 16 and m["bytes"] == n * 2 * (64 * 16 + 16 * 32 + 64 * 32)
    if impl == "native":  # the first launch builds the entry (Python), the second looks it up, the rest recall it
        taken = h.taken()
        assert taken["enter_slow"] == 1 and taken["enter_recalled"] + taken["enter_fast"] == n - 1
        assert taken["enter_recalled"] >= n - 2 and taken["exit_fast"] == n


def test_a_launch_settles_plugins_frames_before_it_opens_its_op(tmp_path, fake, impl):
    """Before the op of a launch is opened at the thread's context, the core's settlers run (a plugin's own
    frames, such as the torch plugin's module calls, become scopes): the op nests under what they open, also
    when the launch is one the native side recalls."""
    h = Hooks(impl)
    frame = PendingScope()
    proton.start(str(tmp_path / "p"), backend="fake")
    register_settler(frame)
    try:
        for _ in range(3):
            frame.keep()
            h.launch(fake, "matmul_kernel", matmul, {"M": 4, "N": 4, "K": 4})
            frame.close()
    finally:
        unregister_settler(frame)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["frame"]
    assert node(root, "frame", "matmul_4x4x4")["metrics"]["count"] == 3


def test_different_metadata_values_count_separately(tmp_path, fake, impl):
    """More distinct launches than the native side remembers, interleaved: each still counts only its own."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    sizes = list(range(1, 13))
    rounds = 20
    for _ in range(rounds):
        for s in sizes:
            h.launch(fake, "matmul_kernel", matmul, {"M": s, "N": 2, "K": 3})
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    for s in sizes:
        m = node(root, f"matmul_{s}x2x3")["metrics"]
        assert (m["count"], m["flops16"]) == (rounds, rounds * 2 * s * 2 * 3)


def test_same_name_other_numbers_are_another_entry(tmp_path, fake, impl):
    """Only the numbers change: a remembered launch must not answer for the new values."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    for flops in [5, 5, 5, 7, 7, 5, 7.0, 7, 5.0, 5]:
        h.launch(fake, "k", constant(name="gemm", flops16=flops))
    proton.finalize()
    m = node(load(tmp_path / "p.hatchet")[0], "gemm")["metrics"]
    assert (m["count"], m["flops16"]) == (10, 5 * 6 + 7 * 4)


def test_bad_values_are_one_line_errors_naming_the_kernel(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    for _ in range(3):  # remembered first: the bad launches below have other values
        h.launch(fake, "k", constant(name="gemm", flops16=1.0))
    for bad in (-1.0, math.nan, math.inf, math.nan):
        meta = LazyDict({"name": "k", "function": 1234, "stream": 0})
        meta.add(constant(name="gemm", flops16=bad), (None, None, None))
        with pytest.raises(proton.ProtonError, match=r"^launch_metadata of Triton kernel 'gemm': ") as exc:
            h.enter(meta)
        assert "\n" not in str(exc.value)
        assert current_op() is None
    with pytest.raises(proton.ProtonError, match="'count'.*reserved"):
        h.launch(fake, "k", constant(name="gemm", count=3))
    h.launch(fake, "k", constant(name="gemm", flops16=1.0))
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "gemm")["metrics"]["flops16"] == 4.0


def test_errors_of_launch_metadata_itself_propagate_unchanged(fake, impl):
    h = Hooks(impl)
    proton.start("unused", backend="fake")

    def broken(grid, metadata, args):
        raise ZeroDivisionError("from the user's launch_metadata")

    with pytest.raises(ZeroDivisionError, match="from the user's"):
        h.launch(fake, "k", broken)
    class NoDict(LazyDict):  # a get() that returns no dict
        def get(self):
            return None

    meta = NoDict({"name": "k", "function": 1, "stream": 0})
    meta.add(None, None)
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'items'"):
        h.enter(meta)
    assert current_op() is None


def test_python_context_session_takes_the_general_path(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake", context="python")
    for _ in range(20):
        h.launch(fake, "k", constant(name="gemm", flops16=3))
    proton.finalize()
    tree = load(tmp_path / "p.hatchet")[0]
    found = []

    def walk(literal):
        if literal["frame"]["name"] == "gemm":
            found.append(literal["metrics"])
        for c in literal["children"]:
            walk(c)

    walk(tree)
    assert sum(m.get("flops16", 0) for m in found) == 60 and sum(m.get("count", 0) for m in found) == 20
    if impl == "native":  # no counted op exists for python context: every launch is the Python code's
        taken = h.taken()
        assert taken["enter_recalled"] == taken["enter_fast"] == 0 and taken["enter_slow"] == 20


def test_two_sessions_and_one_started_midway_count_exactly(tmp_path, fake, impl):
    h = Hooks(impl)
    a = proton.start(str(tmp_path / "a"), backend="fake")
    for _ in range(10):
        h.launch(fake, "k", constant(name="gemm", flops16=2))
    b = proton.start(str(tmp_path / "b"), backend="fake")
    for _ in range(15):
        h.launch(fake, "k", constant(name="gemm", flops16=2))
    proton.finalize(a)
    for _ in range(5):
        h.launch(fake, "k", constant(name="gemm", flops16=2))
    proton.finalize(b)
    ma = node(load(tmp_path / "a.hatchet")[0], "gemm")["metrics"]
    mb = node(load(tmp_path / "b.hatchet")[0], "gemm")["metrics"]
    assert (ma["count"], ma["flops16"]) == (25, 50)
    assert (mb["count"], mb["flops16"]) == (20, 40)


def test_deactivate_and_activate_mid_run(tmp_path, fake, impl):
    h = Hooks(impl)
    calls = []

    def fn(grid, metadata, args):
        calls.append(1)
        return {"name": "gemm", "flops16": 4}

    sid = proton.start(str(tmp_path / "p"), backend="fake")
    for _ in range(5):
        h.launch(fake, "k", fn)
    proton.deactivate(sid)
    for _ in range(7):
        h.launch(fake, "k", fn)
    assert len(calls) == 5  # not evaluated while nothing records
    proton.activate(sid)
    for _ in range(3):
        h.launch(fake, "k", fn)
    proton.finalize()
    m = node(load(tmp_path / "p.hatchet")[0], "gemm")["metrics"]
    assert (m["count"], m["flops16"]) == (8, 32) and len(calls) == 8


class CountingLazyDict(LazyDict):
    gets = 0

    def get(self):
        CountingLazyDict.gets += 1
        return super().get()


def test_kernels_without_launch_metadata_pay_nothing_and_open_no_op(tmp_path, fake, impl):
    enter, leave = hooks_of(impl)
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    CountingLazyDict.gets = 0
    seen = []
    for _ in range(50):
        meta = CountingLazyDict({"name": "plain_kernel", "function": 1, "stream": 0})
        enter(meta)
        seen.append(current_op())
        fake.launch("plain_kernel", 10)
        leave(meta)
    assert CountingLazyDict.gets == 0 and seen == [None] * 50
    # extras empty but data with a key of the user's (metadata evaluated by another hook): it counts
    meta = LazyDict({"name": "k", "function": 1, "stream": 0, "flops16": 6})
    enter(meta)
    fake.launch("k", 10)
    leave(meta)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert node(root, "plain_kernel")["metrics"]["count"] == 50
    assert node(root, "k")["metrics"]["flops16"] == 6
    if impl == "native":
        taken = h.taken()
        assert taken["enter_recalled"] + taken["enter_fast"] + taken["enter_slow"] == 1


def test_an_op_left_open_is_replaced_by_the_next_launch(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("step"):
        for _ in range(3):
            h.launch(fake, "k", constant(name="a", flops16=1))
        h.launch(fake, "k", constant(name="b", flops16=10), leave=False)  # the exit hook never ran
        assert current_op() == "b"
        for _ in range(3):
            h.launch(fake, "k", constant(name="a", flops16=1))
        assert current_op() is None
    proton.finalize()
    step = node(load(tmp_path / "p.hatchet")[0], "step")
    assert node(step, "a")["metrics"]["flops16"] == 6 and node(step, "a")["metrics"]["count"] == 6
    assert node(step, "b")["metrics"]["flops16"] == 10


def test_an_op_opened_by_someone_else_is_respected(tmp_path, fake, impl):
    """thread.op set while current stays (no hook of ours did it): the cached step declines, as in Python."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    for _ in range(3):
        h.launch(fake, "k", constant(name="a", flops16=1))
    thread_state().op = "theirs"
    h.launch(fake, "k", constant(name="a", flops16=1))
    assert current_op() is None
    proton.finalize()
    m = node(load(tmp_path / "p.hatchet")[0], "a")["metrics"]
    assert (m["count"], m["flops16"]) == (4, 4)
    if impl == "native":
        assert h.taken()["enter_slow"] == 2  # the first launch and the one with "theirs" open


def test_scopes_and_states_between_launches(tmp_path, fake, impl):
    """The same metadata in other contexts: the context is part of what is remembered."""
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    for i in range(30):
        with proton.scope("even" if i % 2 == 0 else "odd"):
            h.launch(fake, "k", constant(name="gemm", flops16=1))
            if i % 3 == 0:
                with proton.state("warm"):
                    h.launch(fake, "k", constant(name="gemm", flops16=1))
    h.launch(fake, "k", constant(name="gemm", flops16=1))
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert node(root, "even", "gemm")["metrics"]["count"] == 15
    assert node(root, "odd", "gemm")["metrics"]["count"] == 15
    assert node(root, "even", "warm", "gemm")["metrics"]["count"] == 5  # i = 0, 6, 12, 18, 24
    assert node(root, "odd", "warm", "gemm")["metrics"]["count"] == 5  # i = 3, 9, 15, 21, 27
    assert node(root, "gemm")["metrics"]["count"] == 1


def test_threads_count_exactly_in_their_own_scopes(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    n, errors = 2000, []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            barrier.wait()
            with proton.scope(f"t{i}"):
                for j in range(n):
                    h.launch(fake, "k", constant(name="gemm", flops16=i + 1))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    for i in range(4):
        m = node(root, f"t{i}", "gemm")["metrics"]
        assert (m["count"], m["flops16"]) == (n, n * (i + 1))
    if impl == "native":
        assert h.taken()["enter_recalled"] >= 4 * (n - 2)


def test_a_thread_ending_with_an_op_open_leaves_later_threads_clean(tmp_path, fake, impl):
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    ops = []

    def leaves_open():
        h.launch(fake, "k", constant(name="gemm", flops16=1))
        h.launch(fake, "k", constant(name="gemm", flops16=1), leave=False)

    def normal():
        ops.append(current_op())
        for _ in range(3):
            h.launch(fake, "k", constant(name="gemm", flops16=1))
        ops.append(current_op())

    for target in (leaves_open, normal, leaves_open, normal):
        t = threading.Thread(target=target)
        t.start()
        t.join()
    proton.finalize()
    assert ops == [None] * 4
    assert node(load(tmp_path / "p.hatchet")[0], "gemm")["metrics"]["count"] == 10


def test_the_op_cache_emptied_midway(tmp_path, fake, impl):
    """The core empties its op cache when full (ops.clear(), clears[0] += 1): a remembered hit must not outlive
    that."""
    ops, clears = launch_op_cache()
    h = Hooks(impl)
    proton.start(str(tmp_path / "p"), backend="fake")
    data = LazyDict({"name": "k", "function": 1234, "stream": 0})
    data.add(constant(name="gemm", flops16=1), (None, None, None))
    key = (thread_state().current, tuple(data.get().items()))
    for i in range(10):
        for _ in range(3):  # built, looked up, remembered (native)
            h.launch(fake, "k", constant(name="gemm", flops16=1))
            assert key in ops  # rebuilt (by the Python code) after a clear, not answered from memory
        ops.clear()  # what launch_ops does when the cache is full
        clears[0] += 1
        h.launch(fake, "k", constant(name=f"other{i}", flops16=1))
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert node(root, "gemm")["metrics"]["count"] == 30 and node(root, "other9")["metrics"]["count"] == 1
    if impl == "native":
        assert h.taken()["enter_recalled"] == 10


# --------------------------------------------------------------- equivalence ----
def scenario(tmp_path, fake, impl, name):
    """A mix of everything the hooks meet; returns both sessions' trees, metadata stripped."""
    h = Hooks(impl)
    a = proton.start(str(tmp_path / f"{name}_a"), backend="fake")
    b = None
    for i in range(60):
        with proton.scope("outer" if i % 4 else "other"):
            h.launch(fake, "matmul_kernel", matmul, {"M": 16 * (1 + i % 3), "N": 8, "K": 4})
            h.launch(fake, "plain_kernel")
            h.launch(fake, "k", constant(name="mixed", flops16=2 if i % 5 else 2.0, note="text", flag=True,
                                          missing=None, bytes=i % 2))
            if i % 7 == 0:
                with proton.state("s"):
                    h.launch(fake, "k", constant(name="mixed", flops16=2))
            if i % 11 == 0:
                h.launch(fake, "k", constant(name="unhashable", flops16=1, shape=[1, 2]))
            if i == 20:
                b = proton.start(str(tmp_path / f"{name}_b"), backend="fake")
            if i == 30:
                proton.deactivate(a)
            if i == 40:
                proton.activate(a)
            if i == 45:
                h.launch(fake, "k", constant(name="left_open", flops16=9), leave=False)
    proton.finalize(b)
    proton.finalize(a)
    return [strip(load(tmp_path / f"{name}_{s}.hatchet")[0]) for s in "ab"]


@pytest.mark.skipif(_triton_fast is None, reason="proton_frameworks._triton_fast is not built")
def test_native_and_python_write_the_same_profiles(tmp_path, fake):
    python = scenario(tmp_path, fake, "python", "py")
    reset()  # what the test fixture does between tests
    native = scenario(tmp_path, fake, "native", "c")
    assert native == python
    assert node(python[0], "outer", "mixed")["metrics"]["count"] > 0


# ----------------------------------------------------------------- selection ----
def test_extension_is_built_where_a_compiler_is(monkeypatch):
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) here: the Python hooks are the ones installed")
    assert _triton_fast is not None, "a C compiler is here but proton_frameworks._triton_fast was not built"
    assert triton_hook._NATIVE is _triton_fast  # configured at import


@pytest.mark.skipif(_triton_fast is None, reason="proton_frameworks._triton_fast is not built")
@pytest.mark.parametrize("setting, expected", [(None, "native"), ("1", "native"), ("0", "python"), (" 0 ", "python")])
def test_proton_triton_native_selects_the_installed_hooks(tmp_path, fake, monkeypatch, setting, expected):
    runtime = install_fake_triton(monkeypatch)
    if setting is None:
        monkeypatch.delenv("PROTON_TRITON_NATIVE", raising=False)
    else:
        monkeypatch.setenv("PROTON_TRITON_NATIVE", setting)
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    assert (runtime.launch_enter_hook.calls, runtime.launch_exit_hook.calls) == tuple([f] for f in hooks_of(expected))
    proton.finalize()
    assert runtime.launch_enter_hook.calls == [] and runtime.launch_exit_hook.calls == []


@pytest.mark.skipif(_triton_fast is None, reason="proton_frameworks._triton_fast is not built")
def test_configure_refuses_what_it_cannot_use():
    with pytest.raises(TypeError, match="reserved keys"):
        _triton_fast.configure(list(triton_hook.RESERVED_KEYS), triton_hook._enter_general)
    _triton_fast.configure(triton_hook.RESERVED_KEYS, triton_hook._enter_general)  # what triton_hook did at import
    assert os.environ.get("PROTON_TRITON_NATIVE", "1").strip() == "0" or triton_hook.hooks()[0] is \
        _triton_fast.launch_enter


def flaky_run(tmp_path, fake, impl, exc_type, monkeypatch):
    """Launches with a context setter that raises exc_type once, at a launch the native side recalls."""
    h = Hooks(impl)
    proton.start(str(tmp_path / impl), backend="fake")
    calls, raised, listening = [], [], [True]
    metadata_scope = open_scope("__proton_launch_metadata")  # its context id, as the hooks open it
    close_scope(metadata_scope)

    def flaky(ctx):
        if not listening[0] or ctx in (0, metadata_scope):  # an op's context only (not launch_metadata's scope)
            return
        calls.append(ctx)
        if len(calls) == 5:  # the 5th launch's enter
            raise exc_type("from a setter")

    add_setter(flaky)
    for _ in range(8):
        try:
            h.launch(fake, "k", constant(name="gemm", flops16=1))
        except exc_type as exc:
            raised.append(str(exc))
            h.exit(None)
    listening[0] = False
    proton.finalize()
    return strip(load(tmp_path / f"{impl}.hatchet")[0]), calls, raised


@pytest.mark.skipif(_triton_fast is None, reason="proton_frameworks._triton_fast is not built")
@pytest.mark.parametrize("exc_type", [TypeError, RuntimeError])
def test_a_setter_raising_is_handled_as_in_python(tmp_path, fake, monkeypatch, exc_type):
    """A TypeError inside the cached step sends the launch to the general path (the Python hook's
    `except TypeError`); anything else propagates."""
    python = flaky_run(tmp_path, fake, "python", exc_type, monkeypatch)
    reset()
    native = flaky_run(tmp_path, fake, "native", exc_type, monkeypatch)
    assert native == python
    assert python[2] == ([] if exc_type is TypeError else ["from a setter"])


def test_the_core_counts_its_cache_clears(fake):
    """What the native side relies on: the core's op cache is emptied only with clears[0] incremented."""
    from proton_core.plugin_api import close_op, metric_name, open_counted_op

    ops, clears = launch_op_cache()
    numbers = ((metric_name("flops16"), 1),)
    proton.start("unused", backend="fake")
    before, n = clears[0], 0
    while clears[0] == before:
        assert open_counted_op(("distinct", n), "op", numbers)
        close_op()
        n += 1
        assert n <= 1 << 20
    assert len(ops) == 1 and n > 1000  # cleared when full, then the new entry
