"""What a base context source decides: how a call path is spelled.

A path is a list of ``(kind, name)`` elements; kinds are the core's
``scope``/``state``/``op`` plus ``frame`` (a Python frame) and
``captured_at`` (the CUDA-graph boundary).
"""

from __future__ import annotations

from ..context import METADATA_SCOPE, OP, STATE, TREE, ContextSource

FRAME, CAPTURED = "frame", "captured_at"


class BaseContext(ContextSource):
    #: Whether a context's spelling is its parent context's plus its own name (one element per id): then a
    #: session finds the node of a new context one step below its parent's, whatever the depth.
    incremental = False

    def spell_context(self, context_id: int) -> list[tuple[str, str]]:
        """Elements for a backend's NODE_CONTEXT node."""
        raise NotImplementedError

    def spell_frame(self, frame: str) -> list[tuple[str, str]]:
        """Elements for a backend's NODE_FRAME node."""
        raise NotImplementedError

    def here(self) -> list[tuple[str, str]]:
        """The path at the caller, for metrics attached to a scope."""
        raise NotImplementedError


def annotations_only(context_id: int) -> list[tuple[str, str]]:
    """The state and op elements of a context, and the launch-metadata scope, an annotation like a state (what
    the python context keeps, so what launch_metadata launches is filed under it there too)."""
    return [e for e in TREE.path(context_id) if e[0] in (STATE, OP) or e[1] == METADATA_SCOPE]
