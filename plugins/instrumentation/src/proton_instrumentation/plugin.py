"""Registers the ``instrumentation`` backend, which says plainly that it cannot run yet."""

from proton_core import hookimpl
from proton_core.plugin_api import register_unavailable


@hookimpl
def proton_register_backends(register):
    register_unavailable(register, "instrumentation",
                         "the instrumentation backend is not implemented yet; use backend='cupti' for kernel times",
                         priority=-10, description="intra-kernel cycles (not implemented yet)")
