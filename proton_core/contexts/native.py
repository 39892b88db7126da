"""``context="native"``: the user's scopes, then the native call stack of each launch below them.

A program without Python in it (a CUDA binary under ``proton-profile``) has no Python frames: besides its
NVTX ranges, the only call path it has is its native stack.  A backend that can (the cupti one) captures
the launching thread's return addresses at each launch and files them below the thread's scope context
(NODE_FRAME nodes, named ``function (library)`` or ``library+0xoffset`` only at flush); this source spells
them after the scopes, states and ops, as the shadow source spells those.  Off unless a session asks for
it: the capture costs microseconds per launch (``benchmarks/native_stack_cost.py``).  Decision 0315.
"""

from __future__ import annotations

from ..context import THREAD, TREE
from ..errors import ProtonError
from ..plugins import hookimpl
from .base import FRAME, BaseContext

#: The backend method that turns native stacks on and off for a session: ``(session_id, on)``.
BACKEND_METHOD = "native_frames"


class NativeContext(BaseContext):
    name = "native"
    incremental = True  # spell_context(id) is TREE.path(id), as the shadow source's
    #: Launches need their native call stacks: ``install`` tells the session's backend.
    native_frames = True

    def spell_context(self, context_id):
        return TREE.path(context_id)

    def spell_frame(self, frame):
        return [(FRAME, frame)] if frame else []  # "": the CUDA runtime linked into the program, left out

    def here(self):
        return TREE.path(THREAD.current)

    def install(self, session) -> None:
        """Native stacks on in the session's backend, or one ProtonError line where it has none.  Idempotent."""
        switch = getattr(session.backend_state.backend, BACKEND_METHOD, None)
        if switch is None:
            raise ProtonError(unsupported(session.backend))
        switch(session.id, True)

    def uninstall(self, session) -> None:
        """Native stacks off for this session (on while another session wants them).  Idempotent."""
        switch = getattr(session.backend_state.backend, BACKEND_METHOD, None)
        if switch is not None:
            switch(session.id, False)


def unsupported(backend: str) -> str:
    """The one line said when a session's backend cannot capture native stacks."""
    return (f"context='native' needs native call stacks at each launch, which the {backend!r} backend cannot "
            "capture; use backend='cupti' (NVIDIA GPUs), or context='shadow' or 'python'")


@hookimpl
def proton_register_contexts(register):
    register("native", NativeContext, base=True,
             description="annotated scopes, then the native call stack of each launch (cupti backend)")
