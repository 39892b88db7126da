"""The scope engine's contract, run against each of its implementations.

Native plugins (nvtx, torch, the Triton hooks) call the core through its C API (``scope_api.h``, the
capsule ``proton_core._scope_fast._C_API``); Python code calls the same operations in ``plugin_api``.
The Python functions are the reference: each scenario below runs through them, through the C table
(``_scope_fast.capi``, which calls the very function pointers an extension gets), and through the C table
with the engine forced pure (every call handed to the Python functions, as ``PROTON_PURE_PYTHON=1`` does).
Every return value, every context id published to the backends, the thread's stack after each step and
the written profile must be the same; the engine's counters prove which path ran.
"""

import json

import pytest

import proton_core as proton
import proton_core.scope  # noqa: F401  (the module: proton_core.scope is also the class)
import sys
from proton_core.context import THREAD
from proton_core.native_api import reserve_context_ids
from proton_core.plugin_api import (close_op, close_scope, innermost_scope, is_active, metric_name, open_counted_op,
                                    open_op, open_scope, register_settler, unregister_settler)
from proton_core.session import MANAGER
from proton_core.testing import PendingScope

scope_module = sys.modules["proton_core.scope"]
try:
    from proton_core import _scope_fast
except ImportError:  # no compiler at install: only the reference exists
    _scope_fast = None

needs_capi = pytest.mark.skipif(_scope_fast is None, reason="proton_core._scope_fast (the C API) is not built here")


class Python:
    """The reference: plugin_api's functions."""

    open_scope = staticmethod(open_scope)
    close_scope = staticmethod(close_scope)
    open_op = staticmethod(open_op)
    innermost_scope = staticmethod(innermost_scope)
    is_active = staticmethod(is_active)

    @staticmethod
    def close_op():
        """The launch hooks' exit: closes the op if one is open, else does nothing (publishes nothing)."""
        if THREAD.op is not None:
            close_op()
    @staticmethod
    def open_launch_op(data):
        return open_counted_op(tuple(data.items()))

    @staticmethod
    def current():
        return THREAD.current

    @staticmethod
    def reserve_ids(owner, resolve):
        return reserve_context_ids(owner, resolve)


class CAPI:
    """The C table, as an extension calls it."""

    def __getattr__(self, name):
        return lambda *args: _scope_fast.capi(name, *args)


@pytest.fixture(params=["python", pytest.param("capi", marks=needs_capi), pytest.param("capi-pure", marks=needs_capi)])
def engine(request):
    if request.param == "python":
        yield Python()
        return
    if request.param == "capi-pure":
        _scope_fast.configure_engine(scope_module.engine_objects(pure=True))
    try:
        yield CAPI()
    finally:
        _scope_fast.configure_engine(scope_module.engine_objects(pure=False))


def start(tmp_path, trail, **kwargs):
    sid = proton.start(str(tmp_path / "p"), backend="fake", **kwargs)
    MANAGER.setters = (*MANAGER.setters, trail.append)  # every context id published, in order
    return sid


def stack():
    return [(c, n) for c, n, _ in THREAD.stack]


def written(tmp_path, name="p.hatchet"):
    root = json.loads((tmp_path / name).read_text())[0]

    def shape(node):
        kids = sorted((shape(c) for c in node.get("children", [])), key=repr)
        return (node["frame"]["name"], node["metrics"].get("count"), kids)

    return shape(root)


def run_nesting(engine, tmp_path, fake):
    """Scopes nest with proton.scope, under a state and an op; a misnested close changes nothing."""
    trail, out = [], []
    start(tmp_path, trail)
    out.append(engine.is_active())
    with proton.scope("step"):
        a = engine.open_scope("range")
        out.append((a == engine.current(), engine.innermost_scope() == a, stack()))
        fake.launch("k1", 10)
        b = engine.open_scope("inner")
        out.append(engine.close_scope(a))  # not innermost: False, nothing changes
        out.append(stack())
        out.append(engine.close_scope(b))
        with proton.state("fwd"):
            c = engine.open_scope("under_state")
            fake.launch("k2", 10)
            out.append((engine.current() != c, engine.close_scope(c)))  # the state stays on top of the scope
        engine.open_op("gemm")
        fake.launch("k3", 10)
        engine.close_op()
        engine.close_op()  # no op open: nothing
        out.append(engine.close_scope(a))
        out.append((engine.current(), engine.innermost_scope()))
    proton.finalize()
    out.append(engine.is_active())
    return trail, out, written(tmp_path)


def run_deactivated_and_tracing(engine, tmp_path, fake):
    """A deactivated session still nests (nothing recorded); a tracing session gets each scope's event."""
    trail, out = [], []
    sid = start(tmp_path, trail, data="trace")
    proton.deactivate(sid)
    a = engine.open_scope("quiet")
    out.append((engine.is_active(), stack()))
    proton.activate(sid)
    b = engine.open_scope("loud")
    fake.launch("k", 5)
    out.append((engine.close_scope(b), engine.close_scope(a), stack()))
    proton.finalize(output_format="hatchet")
    trace = json.loads((tmp_path / "p.hatchet").read_text())
    return trail, out, written(tmp_path), len(trace)


def run_launch_ops(engine, tmp_path, fake):
    """The cached launch step: declined until opened the general way, then counted at each launch."""
    trail, out = [], []
    start(tmp_path, trail)
    numbers = ((metric_name("flops16"), 7),)
    data = {"name": "matmul_64", "flops16": 7}
    with proton.scope("step"):
        for i in range(5):
            done = engine.open_launch_op(data)
            out.append(done)
            if not done:  # what the Triton hook's general path does
                assert open_counted_op(tuple(data.items()), data["name"], numbers)
            out.append(THREAD.op)
            fake.launch("matmul_kernel", 10)
            engine.close_op()
        with pytest.raises(TypeError):
            engine.open_launch_op({"name": "x", "shape": [1, 2]})  # unhashable: the caller's general path
        with proton.state("s"):
            out.append(engine.open_launch_op(data))  # another context: not cached there
    proton.finalize()
    return trail, out, written(tmp_path)


def run_settlers(engine, tmp_path, fake):
    """A plugin's pending frames settle before anything opens under them."""
    trail, out = [], []
    start(tmp_path, trail)
    pending = PendingScope("module")
    register_settler(pending)
    try:
        pending.keep()
        a = engine.open_scope("range")
        fake.launch("k", 1)
        out.append([n for _, n in stack()])
        out.append(engine.close_scope(a))
        pending.close()
        pending.keep()
        engine.open_op("op")  # an op opens under the settled frame too
        fake.launch("k", 1)
        engine.close_op()
        out.append([n for _, n in stack()])
        pending.close()
    finally:
        unregister_settler(pending)
    proton.finalize()
    return trail, out, written(tmp_path)


SCENARIOS = [run_nesting, run_deactivated_and_tracing, run_launch_ops, run_settlers]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_each_implementation_matches_the_reference(scenario, engine, tmp_path, fake):
    ref_dir, dir_ = tmp_path / "ref", tmp_path / "impl"
    ref_dir.mkdir()
    dir_.mkdir()
    got = scenario(engine, dir_, fake)
    from proton_core.testing import reset

    reset()
    want = scenario(Python(), ref_dir, fake)
    assert got == want


@needs_capi
def test_the_table_takes_plain_cases_natively(tmp_path, fake):
    """Regression guard: the C table must not hand the plain cases to Python (right results, only slowly)."""
    before = _scope_fast.engine_counts()
    start(tmp_path, [])
    data = {"name": "op", "flops16": 1}
    for _ in range(4):
        a = _scope_fast.capi("open_scope", "r")
        if not _scope_fast.capi("open_launch_op", data):
            assert open_counted_op(tuple(data.items()), "op", ((metric_name("flops16"), 1),))
        _scope_fast.capi("close_op")
        assert _scope_fast.capi("close_scope", a)
    proton.finalize()
    after = _scope_fast.engine_counts()
    taken = {k: after[k] - before[k] for k in after}
    assert taken["scope_fast"] == 8 and taken["scope_slow"] == 0
    assert taken["close_op_fast"] == 4 and taken["launch_recalled"] + taken["launch_fast"] == 3


def test_reserved_ranges(engine):
    """Each owner gets a range of its own far above the core's ids; the same owner gets its range again."""
    first = engine.reserve_ids("contract-a", lambda i: None)
    second = engine.reserve_ids("contract-b", lambda i: (0, f"b{i}"))
    assert first >= 1 << 40 and second >= 1 << 40 and abs(second - first) >= 1 << 40
    assert engine.reserve_ids("contract-a", lambda i: None) == first
    from proton_core.plugin_api import context_names

    assert context_names(second + 3) == [f"b{second + 3}"]  # named through the owner's resolve


@needs_capi
def test_context_kind(tmp_path, fake):
    start(tmp_path, [])
    with proton.scope("s"):
        scope_id = THREAD.current
        with proton.state("st"):
            state_id = THREAD.current
        op_id = open_op("op")
        close_op()
    proton.finalize()
    kind = lambda i: _scope_fast.capi("context_kind", i)  # noqa: E731
    assert [kind(0), kind(scope_id), kind(state_id), kind(op_id), kind(1 << 41)] == [1, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="never handed out"):
        kind((1 << 39))


@needs_capi
def test_bad_arguments_raise_at_the_call():
    with pytest.raises(TypeError, match="non-empty str"):
        _scope_fast.capi("open_scope", "")
    with pytest.raises(TypeError, match="must be a dict"):
        _scope_fast.capi("open_launch_op", [("name", "x")])
