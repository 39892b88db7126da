"""Registers the triton and jax context sources with Proton's plugin manager.

Factories are looked up lazily so ``proton-profile plugins`` lists the sources on a
machine without any framework installed; a missing framework is reported
when a session asks for it. ``hook="torch"`` is proton-profiler-torch's (all of PyTorch
in one distribution).
"""

from __future__ import annotations

import os

from proton_core import hookimpl
from proton_core.plugin_api import register_internal_path

# The launch hooks run inside the user's call stack: keep their frames out of
# python-context paths.
register_internal_path(os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _triton():
    from .triton_hook import TritonSource

    return TritonSource()


def _jax():
    from .jax_scopes import JaxSource

    return JaxSource()


@hookimpl
def proton_register_contexts(register):
    register("triton", _triton, description="Triton launch_metadata: kernel rename, flops/bytes metrics")
    register("jax", _jax, description="JAX named scopes and source lines of XLA kernels")
