"""proton.scope's two implementations: the C one (proton_core._scope_fast) and the Python one.

Each scenario runs under both and must leave exactly the same trail: every context id handed to the
backends' setters, the thread's scope stack, its ``opened`` entries and published context after each
step, every exception, and the profile written.  A scenario that only the Python path handles (metrics,
cpu_timed_scope, a state or op on top, tracing, interleaved generators, a mismatch) checks the C path
hands it over; the counters prove which path ran.
"""

import inspect
import json
import re
import shutil
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import pytest

import proton_core as proton
import proton_core.scope
scope_module = sys.modules["proton_core.scope"]  # proton_core.scope is also the class
from proton_core.context import THREAD
from proton_core.errors import ProtonError
from proton_core.plugin_api import (close_op, close_scope, innermost_scope, open_op, open_scope, open_scopes,
                                    register_settler, scope_depth, unregister_settler)
from proton_core.session import MANAGER
from proton_core.testing import PendingScope, reset, run_threads

FAST = scope_module._FAST

needs_fast = pytest.mark.skipif(FAST is None, reason="proton_core._scope_fast is not built here, or PROTON_PURE_PYTHON is set")


@pytest.fixture
def both_paths():
    yield
    scope_module.use_fast(True)


def snapshot(trail, label):
    trail.append((label, [(c, n) for c, n, _ in THREAD.stack], [(type(o).__name__, p) for o, p, _ in THREAD.opened],
                  THREAD.current, THREAD.state, THREAD.op))


class Recorder:
    """Stands in for the backends' setters: every context id published, in order."""

    def __init__(self, trail):
        self.trail = trail

    def __call__(self, ctx):
        self.trail.append(("set", ctx))


def start(path, trail, **kwargs):
    sid = proton.start(str(path), backend="fake", **kwargs)
    MANAGER.setters = (*MANAGER.setters, Recorder(trail))
    return sid


def run(scenario, tmp_path, fake, fast: bool):
    """The scenario's trail and written profile under one path."""
    assert scope_module.use_fast(fast) is fast
    reset()
    trail = []
    where = Path(tempfile.mkdtemp(prefix="c" if fast else "py", dir=tmp_path))
    out = where / "p"
    before = dict(FAST.counts()) if FAST else {}
    try:
        scenario(out, trail, fake)
    except Exception as exc:  # noqa: BLE001  (the exception is part of the trail)
        trail.append(("raised", type(exc).__name__, str(exc).replace(str(where), "OUT")))
    snapshot(trail, "end")
    reset()
    profile = None
    for suffix in (".hatchet", ".chrome_trace"):
        if (out.parent / (out.name + suffix)).exists():
            text = (out.parent / (out.name + suffix)).read_text().replace(str(where), "OUT")
            profile = json.loads(re.sub(r'"cpu_time \(ns\)":\s*[1-9][0-9]*', '"cpu_time (ns)": "positive"', text))
            if suffix == ".chrome_trace":  # times differ run to run: names and nesting only
                profile = sorted((e.get("name"), e.get("ph")) for e in profile.get("traceEvents", []))
    after = dict(FAST.counts()) if FAST else {}
    return trail, profile, {k: after[k] - before.get(k, 0) for k in after}


def same_both_ways(scenario, tmp_path, fake):
    """Run both ways; return the C path's counters (how many calls each path took)."""
    c_trail, c_profile, counts = run(scenario, tmp_path, fake, True)
    py_trail, py_profile, _ = run(scenario, tmp_path, fake, False)
    assert c_trail == py_trail
    assert c_profile == py_profile
    return counts


# ------------------------------------------------------------------ scenarios ----
def nested_and_reused(out, trail, fake):
    start(out, trail)
    outer, inner = proton.scope("outer"), proton.scope("inner")
    for _ in range(3):
        with outer:
            snapshot(trail, "in outer")
            with inner:
                snapshot(trail, "in inner")
                fake.launch("k", 10)
            with proton.scope("fresh"):
                fake.launch("j", 5)
        with inner:  # the same object under another parent
            fake.launch("k", 1)
            snapshot(trail, "inner at root")
    proton.finalize()


def recursion_and_threads(out, trail, fake):
    shared = proton.scope("shared")
    before = proton.scope("before")
    before.__enter__()  # profiling off: pushes nothing
    snapshot(trail, "before entered")
    start(out, trail)

    @shared
    def recurse(n):
        fake.launch("k", 1)
        if n:
            recurse(n - 1)

    recurse(3)
    snapshot(trail, "recursed")
    barrier = threading.Barrier(3)

    def worker():
        with shared:
            barrier.wait()
            fake.launch("t", 1)

    run_threads(worker, 3)
    trail[:] = [e for e in trail if e[0] != "set"]  # three threads' setter calls interleave in any order
    before.__exit__(None, None, None)
    snapshot(trail, "before left")
    proton.finalize()


def python_only_cases(out, trail, fake):
    start(out, trail)
    with proton.scope("m", {"bytes": 7}):  # metrics
        fake.launch("k", 1)
        with proton.cpu_timed_scope("timed"):
            snapshot(trail, "timed")
    with proton.state("s"):
        with proton.scope("under_state"):  # a state on top
            snapshot(trail, "under state")
            fake.launch("k", 2)
    with proton.scope("holds_state"):
        with proton.state("s2"):
            fake.launch("k", 3)
            snapshot(trail, "state inside")
    proton.enter_scope("op", triton_op=True)
    with proton.scope("under_op"):
        snapshot(trail, "under op")
    proton.exit_scope(triton_op=True)
    a, b = proton.scope("a"), proton.scope("b")
    a.__enter__()
    b.__enter__()
    try:
        a.__exit__(None, None, None)  # not the innermost: Python raises the mismatch
    except ProtonError as exc:
        trail.append(("mismatch", str(exc)))
    snapshot(trail, "after mismatch")
    b.__exit__(None, None, None)
    snapshot(trail, "b left")
    proton.finalize()


def interleaved_generators(out, trail, fake):
    start(out, trail)
    s = proton.scope("gen")

    def gen(tag):
        with s:
            yield tag
            fake.launch(tag, 1)
            yield tag

    g1, g2 = gen("one"), gen("two")
    next(g1)
    next(g2)
    snapshot(trail, "both open")
    next(g1)
    next(g2)
    for g in (g1, g2):  # g1's scope is not the innermost when it closes: Python raises the mismatch
        try:
            next(g)
        except StopIteration:
            pass
        except ProtonError as exc:
            trail.append(("mismatch", str(exc)))
        snapshot(trail, "closed one")
    reset()
    proton.finalize()


def session_changes_while_open(out, trail, fake):
    s = proton.scope("across")
    start(out, trail)
    s.__enter__()
    proton.finalize()  # ends while the scope is open
    snapshot(trail, "finalized")
    s.__exit__(None, None, None)
    snapshot(trail, "left after")
    t = proton.scope("late")
    t.__enter__()  # off at entry, on at exit
    start(out.parent / (out.name + "2"), trail)
    t.__exit__(None, None, None)
    snapshot(trail, "late left")
    proton.finalize()


def tracing(out, trail, fake):
    start(out, trail, data="trace")
    with proton.scope("traced"):
        with proton.scope("inside"):
            fake.launch("k", 4)
    proton.finalize()


def bad_arguments(out, trail, fake):
    for args in (("",), (3,), ("x", {"not a metric(zzz)": 1}), ("x", {"bytes": -1})):
        try:
            proton.scope(*args)
        except Exception as exc:  # noqa: BLE001
            trail.append(("bad", args, type(exc).__name__, str(exc)))
    s = proton.scope(name="kw", metrics=None)
    trail.append(("kw", s.name, s.metrics))


def function_pair(out, trail, fake):
    trail.append(("off", proton.enter_scope("off"), proton.exit_scope()))  # profiling off: -1, nothing open
    start(out, trail)
    trail.append(("ids", proton.enter_scope("fa"), proton.enter_scope("fb", triton_op=False, metrics=None)))
    fake.launch("k", 3)
    snapshot(trail, "fa/fb")
    trail.append(("closed", proton.exit_scope("fb"), proton.exit_scope()))
    for call in (lambda: proton.exit_scope(), lambda: (proton.enter_scope("x"), proton.exit_scope("y")),
                 lambda: proton.enter_scope(""), lambda: proton.enter_scope(name="kw"),
                 lambda: proton.exit_scope(name="kw"), lambda: proton.exit_scope(3)):
        try:
            trail.append(("returned", call()))
        except Exception as exc:  # noqa: BLE001
            trail.append(("raised", type(exc).__name__, str(exc)))
        snapshot(trail, "after call")
    proton.enter_scope("m", metrics={"bytes": 3})  # Python: metrics
    with proton.state("s"):
        proton.enter_scope("under_state")  # Python: a state on top
        fake.launch("k", 1)
        proton.exit_scope("under_state")
    proton.exit_scope("m")
    s = proton.scope("obj")
    s.__enter__()
    trail.append(("closed obj", proton.exit_scope()))  # the function closes what the object opened
    s.__exit__(None, None, None)  # nothing left to close
    snapshot(trail, "obj left")
    proton.finalize()
    trail.append(("after", proton.exit_scope() if THREAD.stack else None))


def settled(out, trail, fake):
    """Whatever opens under the thread's context (a scope object, the function pair, a state, an op of a
    launch hook, plugin_api.open_scope) or reads its scopes calls the settlers first."""
    start(out, trail)
    frame = PendingScope()
    register_settler(frame)
    register_settler(frame)  # once only
    try:
        frame.keep()
        with proton.scope("object"):
            fake.launch("in_object", 10)
        frame.close()
        frame.keep()
        proton.enter_scope("function")
        fake.launch("in_function", 10)
        proton.exit_scope("function")
        frame.close()
        frame.keep()
        with proton.state("state"):
            fake.launch("in_state", 10)
        frame.close()
        frame.keep()
        open_op("op")
        fake.launch("in_op", 10)
        close_op()
        frame.close()
        frame.keep()
        open_scope("hook_scope")
        fake.launch("in_hook_scope", 10)
        close_scope(THREAD.stack[-1][0])
        frame.close()
        for read in (open_scopes, scope_depth, innermost_scope):
            frame.keep()
            trail.append((read.__name__, read()))
            frame.close()
        snapshot(trail, "settled")
        trail.append(("opened", frame.opened))
    finally:
        unregister_settler(frame)
    calls = frame.calls
    with proton.scope("after"):
        fake.launch("after", 10)
    trail.append(("calls after unregistering", frame.calls - calls))
    proton.finalize()


@needs_fast
def test_the_settlers_run_before_anything_opens_under_the_thread_s_context(tmp_path, fake, both_paths):
    """The core calls the registered settlers (plugins' frames become scopes) before it reads the thread's
    innermost context: what opens then nests under what they opened, on the C path as on the Python one."""
    counts = same_both_ways(settled, tmp_path, fake)
    assert counts["enter_fast"] >= 2  # the scope object and enter_scope of the C run took the C path
    trail, profile, _ = run(settled, tmp_path, fake, True)
    assert ("open_scopes", ["frame"]) in trail and ("scope_depth", 1) in trail
    assert ("calls after unregistering", 0) in trail
    root = profile[0]

    def under(*path):
        node = root
        for name in path:
            found = [c for c in node["children"] if c["frame"]["name"] == name]
            assert found, (path, [c["frame"]["name"] for c in node["children"]])
            node = found[0]
        return node

    for path in (("object", "in_object"), ("function", "in_function"), ("state", "in_state"), ("op",),
                 ("hook_scope", "in_hook_scope")):
        assert under("frame", *path)["metrics"]["count"] == 1
    assert under("after", "after")["metrics"]["count"] == 1


@needs_fast
@pytest.mark.parametrize("scenario", [nested_and_reused, recursion_and_threads, python_only_cases,
                                      interleaved_generators, session_changes_while_open, tracing, bad_arguments,
                                      function_pair])
def test_c_and_python_paths_leave_the_same_trail(scenario, tmp_path, fake, both_paths):
    same_both_ways(scenario, tmp_path, fake)


@needs_fast
def test_plain_scopes_take_the_c_path_and_the_rest_python(tmp_path, fake, both_paths):
    counts = same_both_ways(nested_and_reused, tmp_path, fake)
    assert counts["enter_fast"] == 12 and counts["exit_fast"] == 12  # every enter and exit of the C run
    assert counts["enter_slow"] == 0 and counts["exit_slow"] == 0
    counts = same_both_ways(python_only_cases, tmp_path, fake)
    # the metrics scope, cpu_timed_scope, the scope under a state, the one under an op and the op itself
    # (enter_scope(triton_op=True)): entered in Python; holds_state, a and b entered in C
    assert counts["enter_slow"] == 5 and counts["enter_fast"] == 3
    # left in Python: cpu_timed_scope, the scopes under a state and under an op, a's mismatched exit (b's entry
    # is the last in opened), exit_scope(triton_op=True); in C: the metrics scope (metrics are added at
    # entry), holds_state (its state is gone when it closes) and b
    assert counts["exit_slow"] == 5 and counts["exit_fast"] == 3
    counts = same_both_ways(function_pair, tmp_path, fake)
    # in C: enter_scope of off (profiling off), fa, fb (plain keywords), x, obj (the object) and exit_scope of
    # fb, fa, m (its state gone), the object's scope (by the function) and, after finalize, the scope the
    # ignored exits left open; the rest in Python
    assert counts["enter_fast"] == 5 and counts["exit_fast"] == 5


@needs_fast
def test_the_c_path_caches_the_id_per_parent_and_creates_new_ones(tmp_path, fake, both_paths):
    start(tmp_path / "p", [])
    s = proton.scope("fresh name never seen 1f3e")
    with proton.scope("p1"):
        with s:
            first = THREAD.current
    with proton.scope("p2"):
        with s:
            second = THREAD.current
    with proton.scope("p1"):
        with s:
            assert THREAD.current == first
    assert first != second
    from proton_core.context import TREE

    assert TREE.path(first)[-2:] == [("scope", "p1"), ("scope", "fresh name never seen 1f3e")]
    assert TREE.path(second)[-2:] == [("scope", "p2"), ("scope", "fresh name never seen 1f3e")]
    proton.finalize()


def test_the_c_path_is_built_where_a_compiler_is(both_paths):
    """The install compiles csrc/scope_fast.c wherever it can (CI does): a silent fallback would cost 2.5x."""
    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is None:
        pytest.skip("no C compiler here: the Python scope path is the one installed")
    if scope_module._pure_python_asked():
        pytest.skip("PROTON_PURE_PYTHON is set")
    assert FAST is not None, "proton_core._scope_fast was not built; reinstall with a C compiler (pip install -e .)"
    assert issubclass(proton.scope, FAST.ScopeBase)


def shape(fn, drop_first=False):
    params = list(inspect.signature(fn).parameters.values())[1 if drop_first else 0:]
    return [(p.name, p.kind, p.default) for p in params]


def test_both_paths_have_the_same_signatures():
    """help() and editors show the same parameters whichever path is installed."""
    assert shape(proton.scope) == shape(scope_module._init, drop_first=True) == shape(proton.cpu_timed_scope)
    assert shape(proton.enter_scope) == shape(scope_module._enter_scope)
    assert shape(proton.exit_scope) == shape(scope_module._exit_scope)
