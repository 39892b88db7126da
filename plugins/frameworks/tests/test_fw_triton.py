"""hook="triton": launch_metadata renames kernels and adds metrics; hooks chain and restore."""

import sys
import types

import pytest

import proton_core as proton
from fwtest import install_fake_triton, load, names, node
from proton_core.plugin_api import current_op
from proton_frameworks import triton_hook
from proton_frameworks.triton_hook import launch_enter, launch_exit
from proton_frameworks.testing import LazyDict


def matmul_metadata(grid, metadata, args):
    m, n, k = args["M"], args["N"], args["K"]
    return {"name": f"matmul_{m}x{n}x{k}", "flops16": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}


def meta_for(kernel, fn=None, args=None):
    """What CompiledKernel.launch_metadata builds for one launch."""
    lazy = LazyDict({"name": kernel, "function": 1234, "stream": 0})
    if fn is not None:
        lazy.add(fn, ((1, 1, 1), {"num_warps": 4}, args or {}))
    return lazy


def launch(fake, kernel, fn=None, args=None, ns=100, enter=launch_enter, leave=launch_exit):
    """One Triton launch: enter hook, the kernel (fake backend), exit hook."""
    meta = meta_for(kernel, fn, args)
    enter(meta)
    fake.launch(kernel, ns)
    leave(meta)


@pytest.fixture
def fake_triton(monkeypatch):
    """A Triton 3.6-shaped module (knobs.runtime HookChains) in place of any real one."""
    return install_fake_triton(monkeypatch)


def test_launch_metadata_renames_and_sums_metrics(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    args = {"M": 64, "N": 32, "K": 16}
    with proton.scope("step"):
        for _ in range(3):
            launch(fake, "matmul_kernel", matmul_metadata, args, ns=100)
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    step = node(root, "step")
    assert names(step) == ["matmul_64x32x16"]  # renamed: no node keeps the raw kernel name
    m = step["children"][0]["metrics"]
    assert m["count"] == 3 and m["time (ns)"] == 300
    assert m["flops16"] == 3 * 2 * 64 * 32 * 16
    assert m["bytes"] == 3 * 2 * (64 * 16 + 16 * 32 + 64 * 32)


def test_different_metadata_names_split_nodes(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    launch(fake, "matmul_kernel", matmul_metadata, {"M": 8, "N": 8, "K": 8})
    launch(fake, "matmul_kernel", matmul_metadata, {"M": 16, "N": 8, "K": 8})
    launch(fake, "matmul_kernel", matmul_metadata, {"M": 16, "N": 8, "K": 8})
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "matmul_8x8x8")["metrics"]["flops16"] == 2 * 8 * 8 * 8
    big = node(root, "matmul_16x8x8")["metrics"]
    assert (big["count"], big["flops16"]) == (2, 2 * 2 * 16 * 8 * 8)


def test_other_numeric_keys_become_metrics_and_others_are_ignored(tmp_path, fake, fake_triton):
    def fn(grid, metadata, args):
        return {"name": "k", "flops8": 5, "flops32": 2.5, "flops64": 1, "my_counter": 7, "note": "text",
                "flag": True, "missing": None}

    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    launch(fake, "raw", fn)
    launch(fake, "raw", fn)
    proton.finalize()
    m = node(load(tmp_path / "p.hatchet")[0], "k")["metrics"]
    assert (m["flops8"], m["flops32"], m["flops64"], m["my_counter"]) == (10, 5.0, 2, 14)
    assert not {"note", "flag", "missing", "function", "stream"} & set(m)


def test_kernels_without_metadata_and_non_triton_kernels_are_untouched(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    launch(fake, "plain_triton_kernel")  # no launch_metadata function
    launch(fake, "matmul_kernel", matmul_metadata, {"M": 2, "N": 2, "K": 2})
    fake.launch("cublas_gemm", 10)  # not launched by Triton: after the exit hook
    assert current_op() is None
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert sorted(names(root)) == ["cublas_gemm", "matmul_2x2x2", "plain_triton_kernel"]
    assert "flops16" not in node(root, "cublas_gemm")["metrics"]


def test_metadata_already_evaluated_by_another_hook_still_counts(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    meta = meta_for("matmul_kernel", matmul_metadata, {"M": 4, "N": 4, "K": 4})
    meta.get()  # another tool's hook ran first and emptied extras
    launch_enter(meta)
    fake.launch("matmul_kernel")
    launch_exit(meta)
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "matmul_4x4x4")["metrics"]["flops16"] == 128


def test_no_metadata_evaluated_while_no_session_is_active(tmp_path, fake, fake_triton):
    calls = []

    def fn(grid, metadata, args):
        calls.append(1)
        return {"name": "k", "flops16": 1}

    sid = proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    proton.deactivate(sid)
    launch(fake, "raw", fn)
    assert calls == []
    proton.activate(sid)
    launch(fake, "raw", fn)
    assert calls == [1]
    proton.finalize()


def test_bad_metadata_raises_one_line_error_naming_the_kernel(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    bad = meta_for("k", lambda g, m, a: {"name": "gemm", "flops16": -1})
    with pytest.raises(proton.ProtonError, match=r"launch_metadata of Triton kernel 'gemm'.*negative") as exc:
        launch_enter(bad)
    assert "\n" not in str(exc.value)
    assert current_op() is None
    with pytest.raises(proton.ProtonError, match="'count'.*reserved"):
        launch_enter(meta_for("k", lambda g, m, a: {"name": "gemm", "count": 3}))


def test_hookchain_install_keeps_user_hooks_and_removes_ours(tmp_path, fake, fake_triton):
    seen = []
    user_enter = lambda meta: seen.append(("enter", meta.data["name"]))  # noqa: E731
    user_exit = lambda meta: seen.append(("exit", meta.data["name"]))  # noqa: E731
    fake_triton.launch_enter_hook.add(user_enter)
    fake_triton.launch_exit_hook.add(user_exit)
    a = proton.start(str(tmp_path / "a"), backend="fake", hook="triton")
    b = proton.start(str(tmp_path / "b"), backend="fake", hook="triton")
    ours_enter, _ = triton_hook.hooks()  # the native hooks where built (test_triton_fast.py), else these
    assert fake_triton.launch_enter_hook.calls == [user_enter, ours_enter]  # added once for two sessions
    launch(fake, "matmul_kernel", matmul_metadata, {"M": 2, "N": 2, "K": 1},
           enter=fake_triton.launch_enter_hook, leave=fake_triton.launch_exit_hook)
    proton.finalize(a)
    assert ours_enter in fake_triton.launch_enter_hook.calls  # b still needs it
    proton.finalize(b)
    assert fake_triton.launch_enter_hook.calls == [user_enter]
    assert fake_triton.launch_exit_hook.calls == [user_exit]
    assert seen == [("enter", "matmul_kernel"), ("exit", "matmul_2x2x1")]
    for name in ("a", "b"):
        assert node(load(tmp_path / f"{name}.hatchet")[0], "matmul_2x2x1")["metrics"]["flops16"] == 8


def _old_triton(monkeypatch, version, owner_kind):
    triton = types.ModuleType("triton")
    triton.__version__ = version
    monkeypatch.setitem(sys.modules, "triton", triton)
    compiler = types.ModuleType("triton.compiler.compiler")
    monkeypatch.setitem(sys.modules, "triton.compiler", types.ModuleType("triton.compiler"))
    monkeypatch.setitem(sys.modules, "triton.compiler.compiler", compiler)
    if owner_kind == "knobs":  # 3.3-3.5: a single callable (or None) in knobs.runtime
        knobs = types.ModuleType("triton.knobs")
        knobs.runtime = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
        monkeypatch.setitem(sys.modules, "triton.knobs", knobs)
        return knobs.runtime
    monkeypatch.setitem(sys.modules, "triton.knobs", None)
    kernel = type("CompiledKernel", (), {})
    if owner_kind == "class":  # 3.0-3.2: class attributes of CompiledKernel
        kernel.launch_enter_hook = None
        kernel.launch_exit_hook = None
        compiler.LazyDict = LazyDict
    compiler.CompiledKernel = kernel
    return kernel


@pytest.mark.parametrize("kind", ["knobs", "class"])
def test_single_callable_slots_chain_user_hook_and_restore_it(tmp_path, fake, monkeypatch, kind):
    owner = _old_triton(monkeypatch, "3.3.1" if kind == "knobs" else "3.1.0", kind)
    seen = []
    user_enter = lambda meta: seen.append(("user_enter", current_op()))  # noqa: E731
    user_exit = lambda meta: seen.append(("user_exit", current_op()))  # noqa: E731
    owner.launch_enter_hook, owner.launch_exit_hook = user_enter, user_exit
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    assert owner.launch_enter_hook is not user_enter
    launch(fake, "mm", matmul_metadata, {"M": 1, "N": 1, "K": 1},
           enter=owner.launch_enter_hook, leave=owner.launch_exit_hook)
    proton.finalize()
    # theirs runs outside ours: before our enter, after our exit
    assert seen == [("user_enter", None), ("user_exit", None)]
    assert owner.launch_enter_hook is user_enter and owner.launch_exit_hook is user_exit
    assert names(load(tmp_path / "p.hatchet")[0]) == ["matmul_1x1x1"]


def test_empty_single_slot_is_set_and_cleared(tmp_path, fake, monkeypatch):
    owner = _old_triton(monkeypatch, "3.4.0", "knobs")
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    assert (owner.launch_enter_hook, owner.launch_exit_hook) == triton_hook.hooks()
    proton.finalize()
    assert owner.launch_enter_hook is None and owner.launch_exit_hook is None


def test_unsupported_triton_is_a_one_line_error_and_leaves_no_session(tmp_path, fake, monkeypatch):
    _old_triton(monkeypatch, "2.1.0", "none")
    with pytest.raises(proton.ProtonError, match=r"needs Triton 3\.0 or newer.*triton 2\.1\.0") as exc:
        proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    assert "\n" not in str(exc.value)
    from proton_core.testing import open_session_ids
    assert not open_session_ids()
    assert triton_hook.HOOKS.users == 0


def test_missing_triton_is_a_one_line_error(tmp_path, fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(proton.ProtonError, match="needs Triton: pip install triton"):
        proton.start(str(tmp_path / "p"), backend="fake", hook="triton")


def test_real_triton_hookchain_and_lazydict(tmp_path, fake):
    """With Triton installed, its own knobs and LazyDict work with our hooks."""
    pytest.importorskip("triton")
    from triton import knobs
    from triton.compiler.compiler import LazyDict as RealLazyDict

    if not hasattr(knobs.runtime.launch_enter_hook, "calls"):
        pytest.skip("this Triton has single-callable hooks (covered with stand-ins above)")
    before = list(knobs.runtime.launch_enter_hook.calls)
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    assert triton_hook.hooks()[0] in knobs.runtime.launch_enter_hook.calls
    for _ in range(2):
        meta = RealLazyDict({"name": "matmul_kernel", "function": 0, "stream": 0})
        meta.add(matmul_metadata, ((4, 1, 1), None, {"M": 32, "N": 32, "K": 32}))
        knobs.runtime.launch_enter_hook(meta)
        fake.launch("matmul_kernel", 50)
        knobs.runtime.launch_exit_hook(meta)
    proton.finalize()
    assert knobs.runtime.launch_enter_hook.calls == before
    m = node(load(tmp_path / "p.hatchet")[0], "matmul_32x32x32")["metrics"]
    assert (m["count"], m["flops16"]) == (2, 2 * 2 * 32 ** 3)


def test_metrics_land_per_session_per_phase_and_tensors_still_count(tmp_path, fake, fake_triton):
    """The per-launch fast path (node looked up once per context) against the general one."""
    torch = pytest.importorskip("torch")
    shadow = proton.start(str(tmp_path / "s"), backend="fake", hook="triton", mode="periodic_flushing:poll=100")
    python = proton.start(str(tmp_path / "py"), backend="fake", hook="triton", context="python")
    args = {"M": 2, "N": 2, "K": 1}
    with proton.scope("step"):
        launch(fake, "matmul_kernel", matmul_metadata, args)
        proton.data.advance_phase(shadow)
        launch(fake, "matmul_kernel", matmul_metadata, args)
        with proton.state("warm"):  # another context: another node, not the cached one
            launch(fake, "matmul_kernel", matmul_metadata, args)
        launch(fake, "matmul_kernel", lambda g, m, a: {"name": "matmul_2x2x1", "flops16": torch.tensor(8)})
    paths = proton.finalize(shadow)
    proton.finalize(python)
    parts = sorted(p for p in paths if ".part_" in p)
    assert node(load(parts[0])[0], "step", "matmul_2x2x1")["metrics"]["flops16"] == 8
    later = load(parts[1])[0]
    assert node(later, "step", "matmul_2x2x1")["metrics"]["flops16"] == 16  # one plain, one tensor
    assert node(later, "step", "warm", "matmul_2x2x1")["metrics"]["flops16"] == 8
    py_total = sum(n["metrics"].get("flops16", 0) for n in _walk(load(tmp_path / "py.hatchet")[0]))
    assert py_total == 4 * 8


def _walk(literal):
    yield literal
    for c in literal["children"]:
        yield from _walk(c)


def test_keys_that_are_not_metrics_never_fail_a_launch(tmp_path, fake, fake_triton):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    for _ in range(2):
        launch(fake, "k", lambda g, m, a: {"name": "gemm", "flops16": 4, "tile shape!": "128x128", "grid?": None})
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "gemm")["metrics"]["flops16"] == 8
