"""``context="python"``: paths are the Python frames of each launch.

Frames are spelled ``file:line@function`` as upstream does; frames of the
profiler itself are left out, and so are those of what started the user's
program (``proton-profile``'s script, ``runpy``) while the CLI runs it: a
path begins at the user's script.  ``state`` and Triton ops still apply.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ..context import THREAD, capture_frames, is_internal
from ..plugins import hookimpl
from .base import FRAME, BaseContext, annotations_only

#: Files (as frames name them) of what started the program being profiled; set by :func:`launched_by`.
_launcher_files: frozenset[str] = frozenset()


@contextmanager
def launched_by(files):
    """While the CLI runs a program: frames of ``files`` (its launcher's) are left out of paths."""
    global _launcher_files
    before = _launcher_files
    _launcher_files = before | frozenset(files)
    try:
        yield
    finally:
        _launcher_files = before


def frame_file(frame: str) -> str:
    """The file of a ``file:line@function`` frame (no ':' follows the file)."""
    return frame.rsplit(":", 1)[0]


def hidden(filename: str) -> bool:
    """Whether frames of ``filename`` stay out of paths: the profiler's own, or the program's launcher's."""
    return filename in _launcher_files or is_internal(filename)


class PythonContext(BaseContext):
    name = "python"
    python_frames = True

    def spell_context(self, context_id):
        return annotations_only(context_id)

    def spell_frame(self, frame):
        return [] if hidden(frame_file(frame)) else [(FRAME, frame)]

    def here(self):
        frames = capture_frames(sys._getframe(1))
        if _launcher_files:
            frames = [f for f in frames if frame_file(f) not in _launcher_files]
        return [(FRAME, f) for f in frames] + annotations_only(THREAD.current)


@hookimpl
def proton_register_contexts(register):
    register("python", PythonContext, base=True, description="Python call path (file:line@function) of each launch")
