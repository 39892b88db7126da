"""Upstream's ``triton.profiler.mode`` objects, accepted by ``start(mode=...)`` as their strings are.

Triton 3.6 describes a mode by a frozen dataclass: ``PCSampling`` for CUPTI instruction sampling,
``Default`` and ``MMA`` (both ``InstrumentationMode``) for the instrumentation backend.  These are
the same classes with the same fields and ``str()``, written with plain strings where Triton's use its
compiled enums, so a program that builds them runs unchanged; ``start`` hands a backend
:meth:`BaseMode.option`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["BaseMode", "PCSampling", "InstrumentationMode", "Default", "MMA", "Optimize"]

METRIC_TYPES = ("cycle",)
BUFFER_STRATEGIES = ("circular", "flush")
BUFFER_TYPES = ("shared", "global")
SAMPLING_STRATEGIES = ("none", "selective")
GRANULARITIES = ("cta", "warp", "warp_2", "warp_4", "warp_8", "warp_group", "warp_group_2", "warp_group_4",
                 "warp_group_8")


class Optimize(Enum):
    """Instrumentation optimizations, spelled as upstream spells them."""

    TIMESHIFT = "time_shift"
    SCHED_STORES = "sched_stores"
    SCHED_BARRIERS = "sched_barriers"
    CLOCK32 = "clock32"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class BaseMode:
    """A profiling mode; ``name`` is the mode string's first word."""

    name: str

    def option(self):
        """What the backend is given for this mode (see proton_core.start)."""
        return str(self)


@dataclass(frozen=True)
class PCSampling(BaseMode):
    """CUPTI instruction sampling (``mode="pcsampling"``).

    ``interval`` is kept and checked as upstream does, and, as upstream, not used for the sampling
    period: ours is set with ``mode="pcsampling:interval=<5..31>"`` (plugins/cupti/README.md).
    """

    name: str = field(default="pcsampling", init=False)
    interval: int = 1000

    def __post_init__(self) -> None:
        if not isinstance(self.interval, int) or self.interval <= 0:
            raise ValueError("Interval must be a positive integer.")

    def __str__(self) -> str:
        return f"{self.name}:interval={self.interval}"

    def option(self) -> str:
        return self.name


def _choose(field_name: str, value, allowed: tuple) -> str:
    text = str(value)
    if text not in allowed:
        raise ValueError(f"Unknown {field_name}: {value}")
    return text


@dataclass(frozen=True)
class InstrumentationMode(BaseMode):
    """Shared settings of the instrumentation modes (``backend="instrumentation"``)."""

    metric_type: str = "cycle"
    sampling_strategy: str = "none"
    sampling_options: str = ""
    granularity: str = "warp"
    buffer_strategy: str = "circular"
    buffer_type: str = "shared"
    buffer_size: int = 0
    optimizations: list = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, allowed in (("metric_type", METRIC_TYPES), ("sampling_strategy", SAMPLING_STRATEGIES),
                              ("granularity", GRANULARITIES), ("buffer_strategy", BUFFER_STRATEGIES),
                              ("buffer_type", BUFFER_TYPES)):
            object.__setattr__(self, name, _choose(name, getattr(self, name), allowed))
        chosen = self.optimizations
        if isinstance(chosen, str):
            chosen = [v.strip() for v in chosen.split(",") if v.strip()]
        known = {o.value: o for o in Optimize}
        picked = []
        for value in chosen:
            if isinstance(value, Optimize):
                picked.append(value)
            elif value in known:
                picked.append(known[value])
            else:
                raise ValueError(f"Unknown optimization: {value}")
        object.__setattr__(self, "optimizations", picked)

    def __str__(self) -> str:
        optimizations = ",".join(str(o) for o in self.optimizations)
        return (f"{self.name}:metric_type={self.metric_type}:sampling_strategy={self.sampling_strategy}"
                f":sampling_options={self.sampling_options}:granularity={self.granularity}"
                f":buffer_strategy={self.buffer_strategy}:buffer_type={self.buffer_type}"
                f":buffer_size={self.buffer_size}:optimizations={optimizations}")

    def option(self):
        """The object itself: the instrumentation backend reads its fields."""
        return self


@dataclass(frozen=True)
class Default(InstrumentationMode):
    """Instrumentation that records each scope's cycles."""

    name: str = field(default="default", init=False)


@dataclass(frozen=True)
class MMA(InstrumentationMode):
    """Upstream's MMA instrumentation mode."""

    name: str = field(default="mma", init=False)
