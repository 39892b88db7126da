"""PyTorch operators as Proton contexts from RecordFunction callbacks: the native side of ``hook="torch"``.

``proton_frameworks.torch_ops`` uses it when it loads (:func:`proton_torch.native.load`), else its
Python dispatch mode. Nothing here imports torch at import time.
"""

__version__ = "0.1.0"
