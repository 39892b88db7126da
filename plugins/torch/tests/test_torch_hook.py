"""hook="torch": aten operators and module paths above kernels, checked on CPU.

A CPU run launches no device kernels, so a "kernel emulator" dispatch mode,
entered *before* the session (hence below Proton's mode on the mode stack),
launches one fake-backend kernel ``cpu_<op>`` per aten operator, where a GPU
run would launch the real kernel.
"""

import os
import subprocess
import sys
import textwrap
import threading

import pytest

torch = pytest.importorskip("torch")

import proton_core as proton  # noqa: E402
from proton_core.plugin_api import open_scopes  # noqa: E402
from torchtest import find_all, load, names, node  # noqa: E402

from proton_torch import hook, native  # noqa: E402
from proton_torch.testing import KERNEL_OPS, KernelEmulator, Net  # noqa: E402,F401


def train_step(model, opt):
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    with proton.scope("step"):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


def profile_step(tmp_path, fake, steps=1):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    with KernelEmulator(fake):
        proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
        for _ in range(steps):
            train_step(model, opt)
        proton.finalize()
    return load(tmp_path / "p.hatchet")[0]


def test_forward_ops_sit_under_module_paths_with_their_kernels(tmp_path, fake):
    root = profile_step(tmp_path, fake, steps=2)
    fc1 = node(root, "step", "Net", "fc1", "aten::addmm", "cpu_addmm")["metrics"]
    assert fc1["count"] == 2  # once per step, summed
    assert node(root, "step", "Net", "fc2", "aten::addmm", "cpu_addmm")["metrics"]["count"] == 2
    assert node(root, "step", "Net", "act", "aten::relu", "cpu_relu")["metrics"]["count"] == 2
    assert node(root, "step", "aten::mse_loss", "cpu_mse_loss")["metrics"]["count"] == 2


def test_backward_ops_sit_under_their_autograd_nodes(tmp_path, fake):
    root = profile_step(tmp_path, fake)
    step = node(root, "step")
    mm = node(step, "AddmmBackward0", "aten::mm", "cpu_mm")["metrics"]
    assert mm["count"] == 3  # fc2: grads of its input and weight; fc1: weight only (x needs no grad)
    assert node(step, "ReluBackward0", "aten::threshold_backward", "cpu_threshold_backward")["metrics"]["count"] == 1
    assert node(step, "MseLossBackward0", "aten::mse_loss_backward")
    # every emulated kernel has an aten operator as its parent: nothing is unattributed
    for path, _ in find_all(root, lambda n: n.startswith("cpu_")):
        assert path[-2].startswith("aten::"), path


def test_optimizer_ops_outside_modules(tmp_path, fake):
    root = profile_step(tmp_path, fake)
    # SGD(foreach=False) updates 4 parameters with add_ outside any module or autograd node
    assert node(root, "step", "aten::add_", "cpu_add_")["metrics"]["count"] == 4


def test_sequential_children_are_named_by_index(tmp_path, fake):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    with KernelEmulator(fake):
        proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
        with torch.no_grad():
            model(torch.randn(2, 3))
        proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert node(root, "Sequential", "0", "aten::addmm", "cpu_addmm")["metrics"]["count"] == 1
    assert node(root, "Sequential", "1", "aten::relu")


def test_exception_in_forward_closes_scopes(tmp_path, fake):
    class Boom(torch.nn.Module):
        def forward(self, x):
            torch.mm(x, x)
            raise ValueError("boom")

    proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    with proton.scope("outer"):
        with pytest.raises(ValueError):
            Boom()(torch.randn(2, 2))
        assert open_scopes() == ["outer"]
    proton.finalize()


def test_uninstall_removes_mode_and_module_call_wrapper(tmp_path, fake):
    from torch.nn.modules import module as nn_module

    depth = torch._C._len_torch_dispatch_stack()
    original = torch.nn.Module.__dict__["__call__"]
    hooks = (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks))
    proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    assert torch._C._len_torch_dispatch_stack() == depth + 1
    wrapper = torch.nn.Module.__dict__["__call__"]
    assert wrapper is not original and wrapper.__wrapped__ is original
    (patch,) = hook.MODE.state["handles"]
    assert (patch.pre, patch.post) == (hook.module_pre_hook, hook.module_post_hook)
    # No global module hook: one would send every module call down torch's slow _call_impl path.
    assert (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)) == hooks
    proton.finalize()
    assert torch._C._len_torch_dispatch_stack() == depth
    assert torch.nn.Module.__dict__["__call__"] is original
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # no session: runs plainly
    assert open_scopes() == []


def test_module_scope_closes_when_forward_raises_and_user_hooks_still_run(tmp_path, fake):
    seen = []

    class Boom(torch.nn.Module):
        def forward(self, x):
            seen.append(open_scopes())
            raise ValueError("boom")

    module = Boom()
    handle = module.register_forward_pre_hook(lambda m, args: seen.append("user pre"))
    proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    try:
        module(torch.ones(2))
    except ValueError:
        pass
    assert seen == ["user pre", ["Boom"]]
    assert open_scopes() == []  # closed by the wrapper's finally
    proton.finalize()
    handle.remove()


def test_deactivated_session_opens_no_scopes(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    proton.deactivate(sid)
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(open_scopes())
            return x * 2

    Probe()(torch.ones(2))
    assert seen == [[]]
    proton.finalize()


def test_mode_left_open_by_user_is_disabled_not_an_error(tmp_path, fake):
    depth = torch._C._len_torch_dispatch_stack()
    proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    user_mode = KernelEmulator(fake)
    user_mode.__enter__()
    try:
        proton.finalize()  # our mode is not on top: disabled in place
        with proton.scope("after"):
            pass
        proton.start(str(tmp_path / "q"), backend="fake")
        torch.mm(torch.ones(2, 2), torch.ones(2, 2))
        proton.finalize()
        assert names(load(tmp_path / "q.hatchet")[0]) == ["cpu_mm"]  # no aten scope from the stale mode
    finally:
        user_mode.__exit__(None, None, None)
    assert torch._C._len_torch_dispatch_stack() == depth + 1  # ours, disabled, now on top
    proton.start(str(tmp_path / "r"), backend="fake", hook="torch")  # the next start on this thread...
    proton.finalize()
    assert torch._C._len_torch_dispatch_stack() == depth  # ...exits it: nothing is left for torch.compile to see


def test_two_sessions_share_one_mode(tmp_path, fake):
    depth = torch._C._len_torch_dispatch_stack()
    a = proton.start(str(tmp_path / "a"), backend="fake", hook="torch")
    b = proton.start(str(tmp_path / "b"), backend="fake", hook="torch")
    assert torch._C._len_torch_dispatch_stack() == depth + 1
    proton.finalize(a)
    assert torch._C._len_torch_dispatch_stack() == depth + 1
    proton.finalize(b)
    assert torch._C._len_torch_dispatch_stack() == depth


def test_missing_torch_is_a_one_line_error(tmp_path, fake, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(proton.ProtonError, match="needs PyTorch: pip install torch"):
        proton.start(str(tmp_path / "p"), backend="fake", hook="torch")


# ------------------------------------------------- mode choice (native or Python) ----
def test_python_mode_runs_where_no_backend_offers_a_native_setter(tmp_path, fake):
    """The synthetic (like the host) backend has no native context setter: the Python mode, silently."""
    proton.start(str(tmp_path / "p"), backend="fake", hook="torch")
    assert hook.current_mode() == "python"
    proton.finalize()
    assert hook.current_mode() is None


def test_without_the_native_extension_the_python_mode_says_why_once(tmp_path, fake, monkeypatch, caplog):
    monkeypatch.setattr(native, "built_for", lambda: None)  # as if built where torch was not importable
    monkeypatch.setattr(hook, "_said", set())
    with caplog.at_level("WARNING", logger="proton"):
        for name in ("a", "b"):
            proton.start(str(tmp_path / name), backend="fake", hook="torch")
            assert hook.current_mode() == "python"
            proton.finalize()
    lines = [r.getMessage() for r in caplog.records if "Python dispatch mode" in r.getMessage()]
    assert lines == ["hook='torch' uses its Python dispatch mode (one Python call per operator): "
                     "proton-profiler-torch was built without torch, so without its native extension; "
                     f"install torch first, then {native.REINSTALL}"]
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    with pytest.raises(proton.ProtonError, match="PROTON_TORCH_NATIVE=1, but proton-profiler-torch was built without"):
        proton.start(str(tmp_path / "c"), backend="fake", hook="torch")


def test_python_mode_shapes_option(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("PROTON_TORCH_SHAPES", "1")
    root = profile_step(tmp_path, fake)
    fc1 = node(root, "step", "Net", "fc1")
    assert names(fc1) == ["aten::addmm[16,5x8,8x16]"]  # the same spelling as the native side's
    assert node(fc1, "aten::addmm[16,5x8,8x16]", "cpu_addmm")["metrics"]["count"] == 1
    assert node(root, "step", "AddmmBackward0", "aten::mm[5x4,4x16]", "cpu_mm")


def test_shape_suffix_format():
    assert hook.shapes_suffix((torch.ones(2, 3), 4, [torch.ones(1), None], torch.tensor(1.0)),
                                   torch.Tensor) == "[2x3,(1;-),()]"
    assert hook.shapes_suffix((), torch.Tensor) == "[]"


def test_torch_compile_in_and_after_a_session_keeps_dynamo_s_view_of_module_call(tmp_path):
    """Dynamo first imported during a session records our wrapper as the unpatched __call__; the
    session's end gives it the original back, and a later compile traces a whole graph."""
    program = textwrap.dedent('''
        import torch
        import proton_core as proton
        from proton_core.testing import use_synthetic_backend
        use_synthetic_backend()
        original = torch.nn.Module.__call__
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        proton.start(%r, backend="fake", hook="torch")
        with proton.scope("eager"):
            model(torch.ones(2, 4))
        import torch._dynamo.utils as dyn
        assert dyn.unpatched_nn_module_call is not original  # imported in the session: our wrapper
        proton.finalize()
        import torch._dynamo.variables.nn_module as nnv
        assert dyn.unpatched_nn_module_call is original and nnv.unpatched_nn_module_call is original
        other = torch.nn.Sequential(torch.nn.Linear(4, 2))
        assert torch.compile(other, backend="eager", fullgraph=True)(torch.ones(2, 4)).shape == (2, 2)
        print("ok")
    ''' % str(tmp_path / "p"))
    env = dict(os.environ, PROTON_TORCH_NATIVE="0")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
