"""Whether any session records now, readable as one attribute by per-launch hooks.

Its own module, below sessions and the manager: both write it, and hot paths
(:mod:`proton_core.launch_ops`, plugins through ``plugin_api``) read it
without importing either.
"""

from __future__ import annotations


class Activity:
    """Whether any session records now, as a plain attribute: per-launch hooks read ``ACTIVITY.any``."""

    __slots__ = ("any", "generation")

    def __init__(self) -> None:
        self.any = False
        #: Bumped whenever what per-launch caches hold may be stale (active sessions changed, tallies
        #: retired entries): :mod:`proton_core.launch_ops` checks it at every cached launch.
        self.generation = 0


ACTIVITY = Activity()
