"""Test helpers for hook="torch" on a CPU (imports torch): the torch plugin's tests, Python and native modes.

A CPU run launches no device kernels, so :class:`KernelEmulator`, a dispatch mode
entered before the session, launches one fake-backend kernel ``cpu_<op>`` per aten
operator that would launch a kernel on a GPU.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: The aten operators that launch a kernel on a GPU in the tests' training steps.
KERNEL_OPS = frozenset({"aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward", "aten::sum",
                        "aten::mse_loss", "aten::mse_loss_backward", "aten::add_", "aten::mul"})


class KernelEmulator(TorchDispatchMode):
    def __init__(self, fake, kernels=KERNEL_OPS):
        super().__init__()
        self.fake = fake
        self.kernels = kernels

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name in self.kernels:
            self.fake.launch("cpu_" + name.split("::")[1], 10)
        return func(*args, **(kwargs or {}))


class Net(torch.nn.Module):
    """Two linear layers around a ReLU: module paths ``Net/fc1``, ``Net/act``, ``Net/fc2``."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
