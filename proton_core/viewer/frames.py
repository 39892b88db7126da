"""Python frames' spelling: ``file:line@function`` (upstream since Triton 3.6) and what ``-f`` makes of it."""

from __future__ import annotations

import os
import re

#: A Python function name as frames spell it: an identifier or ``<module>``, ``<lambda>``, ...
_FUNC = r"(?P<func>[^\W\d][\w.]*|<[^<>:@/]+>)"
#: Frames as upstream spells them since Triton 3.6 (``file:line@function``), then as before (``file:function@line``).
FRAMES = (
    re.compile(rf"^(?P<file>.*[^:]):(?P<line>\d+)@{_FUNC}$"),
    re.compile(rf"^(?P<file>.*[^:]):{_FUNC}@(?P<line>\d+)$"),
)
#: What ``-f`` makes of a frame, as upstream's viewer prints it.
STYLES = {
    "full": "{file}:{line}@{func}",
    "file_function_line": "{base}:{line}@{func}",
    "function_line": "{line}@{func}",
    "file_function": "{base}@{func}",
}


def parse_frame(name: str):
    """(file, line, function) of a Python frame in either spelling, or None for other names."""
    for pattern in FRAMES:
        m = pattern.match(name)
        if m:
            return m["file"], m["line"], m["func"]
    return None


def respell(name: str, style: str) -> str:
    """``name`` in ``style`` if it is a Python frame; scopes and kernels are left alone."""
    frame = parse_frame(name)
    if frame is None:
        return name
    file, line, func = frame
    return STYLES[style].format(file=file, base=os.path.basename(file), line=line, func=func)


def format_frames(table, style: str) -> None:
    """Respell every frame of ``table`` in place; each distinct name is parsed once, and nothing is
    rewritten when no name is a frame (scopes and kernels only, the common case)."""
    changed = {name: new for name in set(table.names) if (new := respell(name, style)) != name}
    if changed:
        table.names = [changed.get(name, name) for name in table.names]
