"""GPU: a torch MLP training step reads as aten operators (forward and backward) over their kernels.

Run in both modes of hook="torch": native (proton-profiler-torch's RecordFunction callbacks,
required here: PROTON_TORCH_NATIVE=1 fails rather than falling back) and the Python dispatch mode.
"""

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("proton_cupti", reason="proton-profiler-cupti is not installed")
torch = pytest.importorskip("torch")

import proton_core as proton  # noqa: E402
from torchtest import find_all, load, node  # noqa: E402

from proton_torch import hook  # noqa: E402


def kernels_below(literal):
    """(name, metrics) of leaf nodes (kernels) under ``literal``."""
    if not literal["children"]:
        return [(literal["frame"]["name"], literal["metrics"])]
    return [k for c in literal["children"] for k in kernels_below(c)]


def kernel_count(literal):
    return sum(m.get("count", 0) for _, m in kernels_below(literal))


@pytest.fixture
def mlp():
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 256, device="cuda"), torch.randn(128, 64, device="cuda")

    def step(backward_scope=None):
        loss = torch.nn.functional.mse_loss(model(x), y)
        if backward_scope:
            with proton.scope(backward_scope):
                loss.backward()
        else:
            loss.backward()
        opt.step()
        opt.zero_grad()

    step()  # warm up cuBLAS handles outside the profile
    torch.cuda.synchronize()
    return step


def profile(tmp_path, step, mode, **kwargs):
    proton.start(str(tmp_path / "p"), backend="cupti", hook="torch")
    assert hook.current_mode() == mode
    with proton.scope("train_step"):
        step(**kwargs)
        torch.cuda.synchronize()
    proton.finalize()
    return load(tmp_path / "p.hatchet")[0]


@pytest.mark.parametrize("mode", ["native", "python"])
def test_mlp_training_step(tmp_path, mlp, mode, monkeypatch):
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1" if mode == "native" else "0")
    root = profile(tmp_path, mlp, mode)

    # forward: module path, then the GEMM operator (native: inside aten::linear), then its kernel
    fc1 = node(root, "train_step", "Sequential", "0")
    gemm_ops = [n for _, n in find_all(fc1, lambda n: n in ("aten::addmm", "aten::mm"))]
    assert gemm_ops, [c["frame"]["name"] for c in fc1["children"]]
    kernels = [(c["frame"]["name"], c["metrics"]) for c in gemm_ops[0]["children"] if not c["children"]]
    assert kernels and all(m["time (ns)"] > 0 and m["count"] >= 1 for _, m in kernels), kernels

    # backward: autograd nodes with aten::mm and its GEMM kernels under them
    backward = find_all(root, lambda n: n == "AddmmBackward0")
    assert backward, "no AddmmBackward0 node in the profile"
    mm = [n for path, n in find_all(root, lambda n: n == "aten::mm") if "AddmmBackward0" in path]
    assert mm and sum(kernel_count(n) for n in mm) >= 3
    assert find_all(root, lambda n: n == "aten::threshold_backward")
    # every kernel sits under some aten operator
    for path, leaf in find_all(root, lambda n: True):
        if not leaf["children"] and leaf["metrics"].get("count"):
            assert any(p.startswith("aten::") for p in path), path


def test_native_backward_goes_under_the_forward_operator_and_the_backward_scope(tmp_path, mlp, monkeypatch):
    """Autograd runs these nodes on its CUDA device thread: the scope around loss.backward() (published
    around torch's engine call) and the forward operator (sequence numbers) both reach it."""
    from proton_torch import native

    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    C = native.load()
    C.reset_stats()
    root = profile(tmp_path, mlp, "native", backward_scope="backward")
    stats = C.stats()
    # nodes placed under their forward operator: those with kernels (two AddmmBackward0, ReluBackward0, the
    # loss's); the two TBackward0 launch nothing, and a provider never looks them up
    assert stats["linked"] >= 4 and stats["callback_errors"] == 0 and stats["misnested"] == 0, stats
    bwd = node(root, "train_step", "backward")
    for layer, grads in (("0", 1), ("2", 2)):  # the first layer's input needs no grad
        mm = node(bwd, "Sequential", layer, "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm")
        assert kernel_count(mm) >= grads, kernels_below(mm)  # cuBLAS may split a GEMM in two kernels
    relu = node(bwd, "Sequential", "1", "aten::relu", "ReluBackward0", "aten::threshold_backward")
    assert kernel_count(relu) >= 1
    # the forward operators keep only their forward kernels
    fwd = node(root, "train_step", "Sequential", "2", "aten::linear", "aten::addmm")
    assert kernel_count(fwd) >= 1 and not find_all(fwd, lambda n: n.endswith("Backward0"))


def test_native_shapes_in_operator_names(tmp_path, mlp, monkeypatch):
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    monkeypatch.setenv("PROTON_TORCH_SHAPES", "1")
    root = profile(tmp_path, mlp, "native")
    fc1 = node(root, "train_step", "Sequential", "0", "aten::linear[128x256,512x256,512]",
               "aten::addmm[512,128x256,256x512]")
    assert kernel_count(fc1) >= 1


def test_native_decoder_reads_the_same_with_operators_left_unobserved(tmp_path, monkeypatch):
    """A transformers decoder's training step (built from a config) with every operator observed, then with
    those that launch nothing left unobserved: the same kernels under the same paths, backward included
    (its views' nodes, such as attention's reshapes, linked through sequence numbers and sweeps)."""
    transformers = pytest.importorskip("transformers")
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    from proton_torch import native

    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    C = native.load()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                      max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).cuda()
    ids = torch.randint(0, config.vocab_size, (2, 32), device="cuda")

    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    step()
    paths = {}
    for observe_all in ("1", "0"):
        monkeypatch.setenv("PROTON_TORCH_OBSERVE_ALL", observe_all)
        C.reset_stats()
        proton.start(str(tmp_path / observe_all), backend="cupti", hook="torch")
        assert C.stats()["unobserved"] == (observe_all == "0")
        with proton.scope("step"):
            step()
        stats = C.stats()
        proton.finalize()
        assert stats["misnested"] == 0 and stats["callback_errors"] == 0, stats
        root = load(tmp_path / f"{observe_all}.hatchet")[0]
        paths[observe_all] = {path: leaf["metrics"]["count"] for path, leaf in find_all(root, lambda n: True)
                              if not leaf["children"] and leaf["metrics"].get("count")}
    only_all = sorted(set(paths["1"].items()) - set(paths["0"].items()))
    only_unobserved = sorted(set(paths["0"].items()) - set(paths["1"].items()))
    assert not only_all and not only_unobserved, (only_all[:5], only_unobserved[:5])
    assert sum(paths["0"].values()) > 50
    views = ("View", "Transpose", "Expand", "Slice", "UnsafeView", "Select", "Split", "AsStrided", "Unbind")
    assert any(n.endswith("Backward0") and n.startswith(views) for path in paths["0"] for n in path), \
        sorted(paths["0"])[:20]
