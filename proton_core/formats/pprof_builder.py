"""The tables of a pprof profile, filled as a call tree is walked, then encoded once (gzipped ``profile.proto``).

pprof names everything by index: strings into one table, functions and
locations by id, each sample by the location ids of its stack (the leaf
first) and one value per sample type.  :class:`Builder` interns all of them, so
a scope or a kernel that appears under many paths is one function and one
location, and a sample added twice with the same stack and labels is one
sample with the values summed.  What the values *mean* (which metric becomes
which sample type) is :mod:`proton_core.formats.pprof`'s business.
"""

from __future__ import annotations

import gzip

#: pprof values are int64.
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
#: The one mapping's file name: bracketed, as pprof names mappings that are no file (``[vdso]``).
MAPPING_NAME = "[proton]"


class Builder:
    def __init__(self) -> None:
        self._strings: dict[str, int] = {"": 0}
        self._functions: dict[tuple, int] = {}
        self._locations: dict[tuple, int] = {}
        #: [(type, unit)], in the order of each sample's values
        self.types: list[tuple[str, str]] = []
        self._type_index: dict[str, int] = {}
        #: (stack, labels) -> {type index: value}
        self.samples: dict[tuple, dict[int, int]] = {}
        #: Values past int64 written as its limit, and values with a fraction rounded: said by the caller.
        self.clamped = 0
        self.rounded = 0

    # ------------------------------------------------------------ interning ----
    def string(self, text: str) -> int:
        found = self._strings.get(text)
        if found is None:
            found = self._strings[text] = len(self._strings)
        return found

    def function(self, name: str, filename: str = "") -> int:
        key = (name, filename)
        found = self._functions.get(key)
        if found is None:
            found = self._functions[key] = len(self._functions) + 1
        return found

    def location(self, function_id: int, line: int = 0, address: int = 0) -> int:
        key = (function_id, line, address)
        found = self._locations.get(key)
        if found is None:
            found = self._locations[key] = len(self._locations) + 1
        return found

    def sample_type(self, type_name: str, unit: str) -> int:
        """The value index of ``type_name`` (added with ``unit`` if new)."""
        found = self._type_index.get(type_name)
        if found is None:
            found = self._type_index[type_name] = len(self.types)
            self.types.append((type_name, unit))
        return found

    def has_type(self, type_name: str) -> bool:
        return type_name in self._type_index

    # -------------------------------------------------------------- samples ----
    def integer(self, value) -> int:
        """``value`` as pprof holds it: an int64, rounded and clamped (each counted)."""
        if type(value) is not int:
            value = float(value)
            if value != value:  # NaN: no number to keep (Proton never writes one; another writer might)
                self.clamped += 1
                return 0
            if value in (float("inf"), float("-inf")):
                self.clamped += 1
                return INT64_MAX if value > 0 else INT64_MIN
            whole = round(value)
            if whole != value:
                self.rounded += 1
            value = int(whole)
        if value > INT64_MAX or value < INT64_MIN:
            self.clamped += 1
            return INT64_MAX if value > 0 else INT64_MIN
        return value

    def add(self, stack: tuple, values: dict[int, int], labels: tuple = ()) -> None:
        """Add ``values`` ({type index: int}) at ``stack`` (location ids, root first) with ``labels``
        (``((key, str), ...)`` or ``((key, int, unit), ...)``)."""
        key = (stack, labels)
        found = self.samples.get(key)
        if found is None:
            self.samples[key] = dict(values)
            return
        for index, value in values.items():
            total = found.get(index, 0) + value
            if total > INT64_MAX:
                self.clamped += 1
                total = INT64_MAX
            found[index] = total

    # ------------------------------------------------------------- encoding ----
    def encode(self, *, time_nanos: int = 0, duration_nanos: int = 0, comments=(), default_type: str = "",
               period_type: tuple[str, str] | None = None, period: int = 0) -> bytes:
        """The profile as gzipped ``profile.proto`` bytes."""
        try:
            from . import pprof_schema as schema  # protobuf loads only where a pprof file is written
        except ImportError:
            from ..errors import ProtonError

            raise ProtonError("pprof output needs the protobuf package: pip install 'protobuf>=4.22,<8'") from None

        profile = schema.Profile()
        for type_name, unit in self.types:
            profile.sample_type.add(type=self.string(type_name), unit=self.string(unit))
        width = len(self.types)
        for (stack, labels), values in self.samples.items():
            sample = profile.sample.add()
            sample.location_id.extend(reversed(stack))
            row = [0] * width
            for index, value in values.items():
                row[index] = value
            sample.value.extend(row)
            for label in labels:
                if len(label) == 2:
                    sample.label.add(key=self.string(label[0]), str=self.string(label[1]))
                else:
                    sample.label.add(key=self.string(label[0]), num=label[1],
                                     num_unit=self.string(label[2]) if label[2] else 0)
        for (name, filename), fid in self._functions.items():
            profile.function.add(id=fid, name=self.string(name), system_name=self.string(name),
                                 filename=self.string(filename))
        # One mapping for every location, marked fully symbolized: readers never look for a binary to
        # symbolize (GPU kernels and Python frames have none) and do not say one is missing.
        profile.mapping.add(id=1, filename=self.string(MAPPING_NAME), has_functions=True, has_filenames=True,
                            has_line_numbers=True)
        for (fid, line, address), lid in self._locations.items():
            location = profile.location.add(id=lid, mapping_id=1, address=address)
            location.line.add(function_id=fid, line=line)
        profile.time_nanos = time_nanos
        profile.duration_nanos = duration_nanos
        if period_type is not None:
            profile.period_type.type = self.string(period_type[0])
            profile.period_type.unit = self.string(period_type[1])
            profile.period = period
        profile.comment.extend(self.string(c) for c in comments)
        if default_type:
            profile.default_sample_type = self.string(default_type)
        profile.string_table.extend(self._strings)  # last: every string above is interned by now
        return gzip.compress(profile.SerializeToString(), compresslevel=6, mtime=0)
