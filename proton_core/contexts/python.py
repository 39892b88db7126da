"""``context="python"``: paths are the Python frames of each launch.

Frames are spelled ``file:line@function`` as upstream does; frames of the
profiler itself are left out.  ``state`` and Triton ops still apply.
"""

from __future__ import annotations

import sys

from ..context import THREAD, capture_frames, is_internal
from ..plugins import hookimpl
from .base import FRAME, BaseContext, annotations_only


class PythonContext(BaseContext):
    name = "python"
    python_frames = True

    def spell_context(self, context_id):
        return annotations_only(context_id)

    def spell_frame(self, frame):
        filename = frame.rsplit(":", 1)[0]  # "file:line@function": no ':' after the file
        return [] if is_internal(filename) else [(FRAME, frame)]

    def here(self):
        frames = capture_frames(sys._getframe(1))
        return [(FRAME, f) for f in frames] + annotations_only(THREAD.current)


@hookimpl
def proton_register_contexts(register):
    register("python", PythonContext, base=True, description="Python call path (file:line@function) of each launch")
