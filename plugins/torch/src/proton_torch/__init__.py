"""``hook="torch"``: PyTorch operators and nn.Module paths as Proton contexts, all of it in one distribution.

:mod:`proton_torch.hook` is the context source (its Python dispatch mode, the module hooks), registered
by :mod:`proton_torch.plugin`; :mod:`proton_torch.ops` drives the native RecordFunction observer
(``_C``, loaded through :func:`proton_torch.native.load`) where it was built for the installed torch.
Nothing here imports torch at import time.
"""

__version__ = "0.1.0"
