"""Registers the ``roctracer`` backend, which says plainly that it cannot run yet.

Registering it keeps ``start(backend="roctracer")`` and ``proton-profile plugins``
honest: users see why AMD profiling is missing instead of "unknown backend".
"""

from proton_core import hookimpl
from proton_core.plugin_api import register_unavailable


@hookimpl
def proton_register_backends(register):
    register_unavailable(register, "roctracer",
                         "the roctracer backend is not implemented yet; on NVIDIA GPUs use backend='cupti'",
                         priority=90, description="AMD GPUs (not implemented yet)")
