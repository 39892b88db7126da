"""GPU: a torch MLP training step reads as aten operators (forward and backward) over their kernels."""

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("proton_cupti", reason="proton-profiler-cupti is not installed")
torch = pytest.importorskip("torch")

import proton_core as proton  # noqa: E402
from fwtest import find_all, load, node  # noqa: E402


def kernels_below(literal):
    """(name, metrics) of leaf nodes (kernels) under ``literal``."""
    if not literal["children"]:
        return [(literal["frame"]["name"], literal["metrics"])]
    return [k for c in literal["children"] for k in kernels_below(c)]


def test_mlp_training_step(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 256, device="cuda"), torch.randn(128, 64, device="cuda")

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    step()  # warm up cuBLAS handles outside the profile
    torch.cuda.synchronize()
    proton.start(str(tmp_path / "p"), backend="cupti", hook="torch")
    with proton.scope("train_step"):
        step()
        torch.cuda.synchronize()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")

    # forward: module path, then the GEMM operator, then its kernel
    fc1 = node(root, "train_step", "Sequential", "0")
    gemm_ops = [c for c in fc1["children"] if c["frame"]["name"] in ("aten::addmm", "aten::mm")]
    assert gemm_ops, [c["frame"]["name"] for c in fc1["children"]]
    kernels = kernels_below(gemm_ops[0])
    assert kernels and all(m["time (ns)"] > 0 and m["count"] >= 1 for _, m in kernels), kernels

    # backward: autograd nodes (on autograd's thread) with aten::mm and its GEMM kernels under them
    backward = find_all(root, lambda n: n == "AddmmBackward0")
    assert backward, "no AddmmBackward0 node in the profile"
    mm = [n for path, n in find_all(root, lambda n: n == "aten::mm") if "AddmmBackward0" in path]
    assert mm and sum(m["count"] for node_ in mm for _, m in kernels_below(node_)) >= 3
    assert find_all(root, lambda n: n == "aten::threshold_backward")
    # every kernel sits under some aten operator
    for path, leaf in find_all(root, lambda n: True):
        if not leaf["children"] and leaf["metrics"].get("count"):
            assert any(p.startswith("aten::") for p in path), path
