"""Profile a small PyTorch workload; runs on a GPU (cupti) or a CPU (host-only).

    proton-profile --name quickstart examples/quickstart.py
    proton-view -m time/us,cpu_time/us quickstart.hatchet

Run directly (``python examples/quickstart.py``) it starts and finalizes a
session itself; under the ``proton-profile`` command those calls are ignored.
"""

import torch

import proton_core as proton

device = "cuda" if torch.cuda.is_available() else "cpu"


def mlp_step(model, x, optimizer):
    with proton.cpu_timed_scope("forward"):
        loss = model(x).square().mean()
    with proton.cpu_timed_scope("backward"):
        loss.backward()
    with proton.cpu_timed_scope("optimizer"):
        optimizer.step()
        optimizer.zero_grad()


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(64, 256, device=device)
    proton.start("quickstart")
    for step in range(5):
        with proton.scope("train_step", {"samples": x.shape[0]}):
            mlp_step(model, x, optimizer)
    proton.finalize()


if __name__ == "__main__":
    main()
