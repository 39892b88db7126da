"""Metric names, kinds and values, as the seed's "Metrics naming" table says.

A metric name is ``name [(unit)] [(type)]`` with type ``inc`` (default:
accumulated and propagated to parents), ``exc`` (accumulated, never
propagated) or ``pty`` (a property: the last value is kept, never summed).
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from dataclasses import dataclass, field

from .errors import ProtonError

INCLUSIVE, EXCLUSIVE, PROPERTY = "inc", "exc", "pty"

#: Names the profiler itself writes; users may not use them for their metrics.
RESERVED = frozenset({"time", "count", "device_id", "device_type", "cpu_time", "clamped"})

#: Keys written for kernels, spelled as upstream Proton spells them.
TIME_KEY = "time (ns)"
COUNT_KEY = "count"
DEVICE_ID_KEY = "device_id"
DEVICE_TYPE_KEY = "device_type"

#: The largest value a metric may have: the largest finite double, so every reader (JSON.parse,
#: hatchet, proton-view) can hold it.  Values past it are refused at the call; sums that pass it are
#: written as it, and counted in the node's CLAMPED_KEY (decision 0180).
MAX_VALUE = sys.float_info.max
#: Written on a node whose sums passed MAX_VALUE: how many of its values were clamped to it.
CLAMPED_KEY = "clamped"

_NAME = re.compile(r"^\s*([^\s()]+)\s*(?:\(([^()]*)\))?\s*(?:\((inc|exc|pty)\))?\s*$")


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name; ``key`` is how it is written in the profile."""

    base: str
    unit: str | None
    kind: str
    #: How the user wrote it (surrounding blanks cut): written to the profile as is, so ``-l`` lists
    #: and ``-m`` takes the name the program used.  None: the canonical spelling.
    spelling: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        if self.spelling is not None:
            return self.spelling
        text = self.base if self.unit is None else f"{self.base} ({self.unit})"
        if self.base == "cpu_time":  # upstream writes it without a suffix
            return text
        return text if self.kind == INCLUSIVE else f"{text}({self.kind})"


_cache: dict[str, MetricName] = {}


def parse_name(name: object, *, allow_reserved: bool = False) -> MetricName:
    """Parse and check a metric name; raise ProtonError saying what is wrong."""
    cached = _cache.get(name) if isinstance(name, str) else None
    if cached is not None and (allow_reserved or cached.base.lower() not in RESERVED):
        return cached
    if not isinstance(name, str):
        raise ProtonError(f"metric name {name!r} is not a string: use names like 'flops16' or 'bytes (B)'")
    m = _NAME.match(name)
    if not m:
        raise ProtonError(
            f"metric name {name!r} is malformed: write 'name', 'name (unit)' or 'name (unit)(exc|pty)' "
            "with no spaces in the name"
        )
    unit, kind = m.group(2), m.group(3)
    if kind is None and unit in (INCLUSIVE, EXCLUSIVE, PROPERTY):  # "x (exc)": a type, not a unit
        unit, kind = None, unit
    parsed = MetricName(m.group(1), unit, kind or INCLUSIVE)
    if parsed.base != "cpu_time" and parsed.key != name.strip():
        parsed = MetricName(parsed.base, unit, parsed.kind, spelling=name.strip())
    if parsed.base.lower() in RESERVED and not allow_reserved:  # the viewer matches names case-insensitively
        raise ProtonError(
            f"metric name {name!r} clashes with the reserved name '{parsed.base.lower()}' "
            f"(reserved: {', '.join(sorted(RESERVED))}); pick another name"
        )
    _cache[name] = parsed
    return parsed


def is_tensor(value: object) -> bool:
    """A framework tensor (torch, jax, numpy 0-d array) rather than a number."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, numbers.Number)


def check_value(name: str, value: object):
    """Return ``value`` as accepted: a non-negative int/float up to MAX_VALUE, or a 0-d or 1-d tensor.

    A number past MAX_VALUE (``10**400``, ``inf``) is refused: no JSON reader could hold it.
    Tensors are kept as they are (reading them would synchronise the device);
    they are read, and checked for sign, when the session is flushed.
    """
    kind = type(value)
    if (kind is int or kind is float) and 0 <= value <= MAX_VALUE:  # the common case, no ABC checks
        return value
    if isinstance(value, bool):
        raise ProtonError(f"metric {name!r} has a bool value {value!r}: pass an int or float")
    if isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value) or math.isinf(value):
            raise ProtonError(f"metric {name!r} has value {value}: pass a finite number")
    elif is_tensor(value):
        if len(tuple(value.shape)) > 1:
            raise ProtonError(
                f"metric {name!r} is a tensor of shape {tuple(value.shape)}: pass a 0-d tensor (e.g. t.sum()) or a "
                f"1-d one (read as a list, element by element)"
            )
        if not any(word in str(value.dtype) for word in ("int", "float")):
            raise ProtonError(f"metric {name!r} is a tensor of dtype {value.dtype}: pass an integer or float tensor")
        return value
    else:
        raise ProtonError(
            f"metric {name!r} has a {type(value).__name__} value {value!r}: pass an int, float or 0-d tensor"
        )
    if value < 0:
        raise ProtonError(f"metric {name!r} has the negative value {value}: metrics must be >= 0")
    if value > MAX_VALUE:
        raise ProtonError(f"metric {name!r} has the value {_short(value)}, past the largest a profile holds "
                          f"({MAX_VALUE:.6g}): scale it down (e.g. count in a larger unit)")
    return value


def _short(value) -> str:
    """A huge int as ``about 1e+400`` (its digits could fill the terminal), else as it is."""
    return f"about 1e+{int(math.log10(value))}" if isinstance(value, int) else str(value)


def read_tensor(name: str, value) -> int | float | list:
    """Turn a 0-d tensor into a checked Python number, a 1-d one into a checked list (at flush time)."""
    if len(tuple(getattr(value, "shape", ()))) == 1:
        return check_list(name, list(value.tolist()))
    number = value.item() if hasattr(value, "item") else float(value)
    return check_value(name, number)


def parse_metrics(metrics) -> list[tuple[MetricName, object]]:
    """Validate a ``{name: value}`` dict at the call; return parsed pairs."""
    if metrics is None:
        return []
    if not isinstance(metrics, dict):
        raise ProtonError(f"metrics must be a dict of name -> number, not {type(metrics).__name__}")
    out = []
    for k, v in metrics.items():
        name = parse_name(k)
        kind = type(v)
        out.append((name, check_text(k, name, v) if kind is str else
                    check_list(k, v) if kind is list or kind is tuple else check_value(k, v)))
    return out


def check_list(key: str, values) -> list:
    """A list of numbers, as upstream takes (``{"bar": [1, 2, 3]}``): each checked as a metric value; summed
    element by element where it adds up (the shorter padded with zeros), a property's replaced."""
    if not values:
        raise ProtonError(f"metric {key!r} is an empty list: pass numbers, e.g. [1, 2, 3]")
    out = []
    for i, value in enumerate(values):
        if type(value) is str or isinstance(value, (list, tuple)) or is_tensor(value):
            raise ProtonError(f"metric {key!r} has {value!r} at index {i}: a list metric holds numbers only")
        out.append(check_value(f"{key}[{i}]", value))
    return out


def check_text(key: str, name: MetricName, value: str) -> str:
    """A text value, which upstream takes for properties and exclusive metrics (``{"a (pty)": "1"}``): kept
    as written, the last one set at a node wins (text does not add up).  An inclusive metric must be a number."""
    if name.kind == INCLUSIVE:
        raise ProtonError(f"metric {key!r} has the text value {value!r}: only properties '(pty)' and exclusive "
                          f"metrics '(exc)' may be text; pass a number, or name it {key + ' (pty)'!r}")
    return value

