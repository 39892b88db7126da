"""Reading a pprof file back into plain Python: samples with their frames, labels and named values.

The writer's other half (:mod:`proton_core.formats` keeps both directions of a
format): tests check written files with it, and a script can read a pprof
file, ours or another tool's, without knowing pprof's tables.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field


@dataclass
class Frame:
    function: str
    filename: str = ""
    line: int = 0
    address: int = 0


@dataclass
class Sample:
    #: Frames from the outermost to the leaf (pprof stores the leaf first).
    frames: list
    #: {label key: str or int}
    labels: dict
    #: {sample type: value}
    values: dict

    @property
    def path(self) -> tuple:
        """Function names, outermost first."""
        return tuple(f.function for f in self.frames)


@dataclass
class PprofProfile:
    #: [(type, unit)]
    sample_types: list
    samples: list
    comments: list = field(default_factory=list)
    time_nanos: int = 0
    duration_nanos: int = 0
    default_sample_type: str = ""
    period_type: tuple = ("", "")
    period: int = 0

    def total(self, sample_type: str) -> int:
        return sum(s.values.get(sample_type, 0) for s in self.samples)


def parse(data: bytes) -> PprofProfile:
    """A pprof profile from its bytes (gzipped or not)."""
    from . import pprof_schema as schema

    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = schema.Profile.FromString(data)
    strings = list(p.string_table)
    functions = {f.id: f for f in p.function}
    locations = {}
    for loc in p.location:
        frames = []
        for line in reversed(loc.line):  # pprof lists inlined callees first
            fn = functions[line.function_id]
            frames.append(Frame(strings[fn.name], strings[fn.filename], line.line, loc.address))
        locations[loc.id] = frames
    types = [(strings[t.type], strings[t.unit]) for t in p.sample_type]
    samples = []
    for s in p.sample:
        frames = [f for lid in reversed(s.location_id) for f in locations[lid]]
        labels = {strings[lb.key]: (strings[lb.str] if lb.str else lb.num) for lb in s.label}
        samples.append(Sample(frames, labels, {t: v for (t, _), v in zip(types, s.value)}))
    return PprofProfile(types, samples, [strings[c] for c in p.comment], p.time_nanos, p.duration_nanos,
                        strings[p.default_sample_type],
                        (strings[p.period_type.type], strings[p.period_type.unit]), p.period)


def read(path) -> PprofProfile:
    with open(path, "rb") as f:
        return parse(f.read())
