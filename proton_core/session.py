"""The three names other modules have imported from here: each now lives in the module of its concern.

``Session`` (one session's settings, phases and filing) is in
:mod:`proton_core.session_state`, ``MANAGER`` (the registry of sessions) in
:mod:`proton_core.manager`, ``ACTIVITY`` (whether anything records) in
:mod:`proton_core.activity`; epoch routing is :mod:`proton_core.routing`,
writing :mod:`proton_core.output`.
"""

from .activity import ACTIVITY
from .manager import MANAGER
from .session_state import Session

__all__ = ["ACTIVITY", "MANAGER", "Session"]
