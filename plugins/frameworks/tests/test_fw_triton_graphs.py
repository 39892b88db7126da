"""hook="triton" while a CUDA graph is captured: launch_metadata's metrics count at every replay (decision 0320).

Both hook implementations (Python, and the native one where built): a launch whose metadata was cached
before the capture must not take its cached step during it, and one cached after must count again.
"""

import pytest

import proton_core as proton
from fwtest import install_fake_triton, load, node
from proton_frameworks import triton_hook
from proton_frameworks.testing import LazyDict

try:
    from proton_frameworks import _triton_fast
except ImportError:
    _triton_fast = None

IMPLS = ["python", pytest.param("native", marks=pytest.mark.skipif(
    _triton_fast is None, reason="proton_frameworks._triton_fast is not built"))]
CAPTURED = "<captured_at>"


@pytest.fixture(params=IMPLS)
def hooks(request, monkeypatch):
    install_fake_triton(monkeypatch)
    if request.param == "native":
        return _triton_fast.launch_enter, _triton_fast.launch_exit
    return triton_hook.launch_enter, triton_hook.launch_exit


def launch(fake, hooks, fn, x=None):
    meta = LazyDict({"name": "foo", "function": 1, "stream": 0})
    meta.add(fn, ((1, 1, 1), {"num_warps": 4}, {"x": x}))
    hooks[0](meta)
    fake.launch("foo")
    hooks[1](meta)


def plain(grid, metadata, args):
    return {"name": "foo_test", "bytes": 16, "flops": 4}


def test_plain_metadata_counts_per_replay_and_never_at_the_capture(tmp_path, fake, hooks):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    for _ in range(3):
        launch(fake, hooks, plain)  # warm: the cached step answers from the second launch on
    with fake.backend.capturing() as graph:
        for _ in range(10):
            launch(fake, hooks, plain)
    launch(fake, hooks, plain)  # cached again after the capture
    with proton.scope("test0"):
        for _ in range(2):
            fake.backend.replay(graph)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    warm = node(root, "foo_test")["metrics"]
    assert (warm["bytes"], warm["flops"], warm["count"]) == (4 * 16, 4 * 4, 4)
    replayed = node(root, "test0", CAPTURED, "foo_test")["metrics"]
    assert (replayed["bytes"], replayed["flops"], replayed["count"]) == (2 * 160, 2 * 40, 20)


def test_tensor_metadata_counts_per_replay(tmp_path, fake, hooks):
    torch = pytest.importorskip("torch")

    def with_tensor(grid, metadata, args):
        x = args["x"]
        return {"name": "foo_test", "bytes": x.numel() * x.element_size(), "flops": x.sum()}

    x = torch.ones((2, 2))
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    with fake.backend.capturing() as graph:
        for _ in range(10):
            launch(fake, hooks, with_tensor, x)
    with proton.scope("test0"):
        fake.backend.replay(graph)
    proton.finalize()
    foo = node(load(tmp_path / "p.hatchet")[0], "test0", CAPTURED, "foo_test")["metrics"]
    assert (foo["bytes"], foo["flops"], foo["count"]) == (160, 40.0, 10)
