"""Registers the ``nvtx`` context source, which says plainly that it cannot run yet.

Registering it keeps ``start(hook="nvtx")`` and ``proton-profile plugins`` honest:
users see that NVTX ranges are not bridged yet instead of "unknown hook".
"""

from proton_core import hookimpl
from proton_core.plugin_api import ProtonError

REASON = ("the nvtx plugin is not implemented yet: NVTX ranges do not become scopes; "
          "use proton.scope() for now")


def _unavailable():
    raise ProtonError(f"hook 'nvtx' cannot run: {REASON}")


@hookimpl
def proton_register_contexts(register):
    register("nvtx", _unavailable, description="NVTX ranges as scopes (not implemented yet)")
