"""On two GPUs: a DDP training step of a small transformers model with NCCL under
``proton-profile torchrun --nproc-per-node 2``: a file per rank, kernels on each rank's own device, NCCL
kernels under the scopes that launched them.

Run on the GPU machine (2 GPUs):
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/distributed/test_ddp_gpu.py
"""

import importlib.util
import shutil

import pytest

from distributed_helpers import cli, meta, root, write

pytestmark = pytest.mark.gpu

TRAIN = """
    import os
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import GPT2Config, GPT2LMHeadModel
    import proton_core as proton

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=64)
    model = DDP(GPT2LMHeadModel(config).cuda())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, 1000, (4, 32), device="cuda")
    for step in range(3):
        with proton.scope("forward"):
            loss = model(tokens, labels=tokens).loss
        with proton.scope("backward"):  # DDP's gradient all-reduce runs in here
            loss.backward()
        with proton.scope("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
        proton.step()
    torch.cuda.synchronize()
    dist.destroy_process_group()
"""


def missing() -> str | None:
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed"
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return "needs 2 CUDA GPUs"
    if shutil.which("torchrun") is None:
        return "torchrun is not on PATH"
    return None


def kernels(node, path=()):
    """(scope path, kernel name, count) of every kernel node under ``node``."""
    out = []
    for child in node.get("children", []):
        name = child["frame"]["name"]
        if "device_id" in child["metrics"] and "count" in child["metrics"] and path:  # a kernel node
            out.append((path, name, child["metrics"]["count"]))
        out += kernels(child, path + (name,))
    return out


def test_ddp_gpt2_two_ranks_nccl(tmp_path):
    reason = missing()
    if reason:
        pytest.skip(reason)
    write(tmp_path, "train.py", TRAIN)
    result = cli(tmp_path, "-n", "ddp", "-b", "cupti", "torchrun", "--standalone", "--nproc-per-node", "2", "train.py",
                 timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert sorted(p.name for p in tmp_path.glob("ddp*")) == ["ddp.rank0.hatchet", "ddp.rank1.hatchet"]
    counts = []
    for rank in (0, 1):
        path = tmp_path / f"ddp.rank{rank}.hatchet"
        record = meta(path)["distributed"]
        assert (record["rank"], record["world_size"], record["backend"], record["device"]) == (rank, 2, "nccl", rank)
        found = kernels(root(path))
        assert found, "no kernels recorded"
        total = sum(c for _, _, c in found)
        counts.append(total)
        nccl = [(p, n, c) for p, n, c in found if "nccl" in n.lower()]
        assert nccl, "no NCCL kernel recorded"
        # DDP's gradient all-reduce is launched in backward; the broadcast and all-gather of its set-up run
        # inside NCCL's own communicator-init range (an NVTX range NCCL opens), before the first step
        assert any(p[0] == "backward" for p, _, _ in nccl), nccl
        assert all(p[0] == "backward" or p[0].startswith("NCCL::ncclCommInit") for p, _, _ in nccl), nccl
        print(f"rank {rank}: {total} kernels, {sum(c for _, _, c in nccl)} NCCL")
    assert counts[0] == counts[1]  # the same program on both ranks launches the same kernels
