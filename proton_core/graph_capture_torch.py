"""Sees torch's CUDA graphs being captured and replayed, for :mod:`.graph_metrics`; never imports torch.

``torch.cuda.CUDAGraph`` is where every torch graph passes (``torch.cuda.graph``,
``make_graphed_callables``, ``torch.compile``'s CUDA graph trees): its ``capture_begin``,
``capture_end`` and ``replay`` are wrapped once, in place, when the first session starts (or,
if torch is not imported yet, as soon as ``torch.cuda.graphs`` is).  The wrappers call torch's
own methods first and add a dict lookup per replay; they stay installed for the process, doing
nothing when no graph was captured with metrics.
"""

from __future__ import annotations

import functools

from . import graph_metrics
from .after_import import when_imported

MODULE = "torch.cuda.graphs"
_MARK = "_proton_graph_metrics"


def wrap(cls) -> bool:
    """Wrap ``cls``'s capture_begin/capture_end/replay (once); False when it lacks one of them."""
    if cls.__dict__.get(_MARK):
        return True
    begin, end, replay = (getattr(cls, n, None) for n in ("capture_begin", "capture_end", "replay"))
    if not (callable(begin) and callable(end) and callable(replay)):
        return False

    @functools.wraps(begin)
    def capture_begin(self, *args, **kwargs):
        result = begin(self, *args, **kwargs)
        graph_metrics.capture_began(self)
        return result

    @functools.wraps(end)
    def capture_end(self, *args, **kwargs):
        try:
            result = end(self, *args, **kwargs)
        except BaseException:
            graph_metrics.capture_abandoned(self)
            raise
        graph_metrics.capture_ended(self)
        return result

    @functools.wraps(replay)
    def replay_(self, *args, **kwargs):
        result = replay(self, *args, **kwargs)
        if graph_metrics._GRAPHS:
            graph_metrics.replayed(self)
        return result

    cls.capture_begin, cls.capture_end, cls.replay = capture_begin, capture_end, replay_
    setattr(cls, _MARK, True)
    return True


def _wrap_module(module) -> None:
    cls = getattr(module, "CUDAGraph", None)
    if isinstance(cls, type):
        wrap(cls)


def watch() -> None:
    """Observe torch's CUDA graphs: now if torch is imported, else once it is (idempotent, cheap)."""
    when_imported(MODULE, _wrap_module)
