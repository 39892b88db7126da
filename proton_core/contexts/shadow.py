"""``context="shadow"``: paths are the user's scopes, state and ops."""

from __future__ import annotations

from ..context import THREAD, TREE
from ..plugins import hookimpl
from .base import BaseContext


class ShadowContext(BaseContext):
    name = "shadow"
    incremental = True  # spell_context(id) is TREE.path(id): the parent's path and the id's own element

    def spell_context(self, context_id):
        return TREE.path(context_id)

    def spell_frame(self, frame):
        return []

    def here(self):
        return TREE.path(THREAD.current)


@hookimpl
def proton_register_contexts(register):
    register("shadow", ShadowContext, base=True, description="annotated scopes (proton.scope, state, ops)")
