"""Instrumentation mode: parse upstream Proton's mode strings into one frozen, checked value.

Accepted (DESIGN.md §1, §6): ``"default"`` optionally followed by ``:key=value`` options::

    default:granularity=warp_group:buffer_type=global:buffer_size=4096:optimizations=clock32

========================  ============================================  =========
key                       values                                        default
========================  ============================================  =========
``metric_type``           ``cycle``                                     cycle
``granularity``           ``warp``, ``warp_2/4/8``, ``warp_group``,      warp
                          ``warp_group_2/4/8``, ``cta``
``buffer_strategy``       ``circular``                                  circular
``buffer_type``           ``shared``, ``global``                        shared
``buffer_size``           bytes, 0 (auto) or a power of two             0
``sampling_strategy``     ``none``, ``selective``                       none
``sampling_options``      warp ids, ``,``-separated (selective only)    (none)
``optimizations``         ``clock32``, ``sched_stores``,                (none)
                          ``sched_barriers``, ``,``-separated
========================  ============================================  =========

Triton 3.6 compiles only ``warp`` granularity (``granularity must be warp for now``): the mode keeps the
granularity the user asked for in :attr:`InstrumentationMode.granularity`, always compiles with
:attr:`InstrumentationMode.compile_granularity` (``"warp"``), and the decoder folds warps into
:attr:`InstrumentationMode.fold_warps`-sized groups (None: the whole CTA).

To check on the GPU / against the 3.6 wheel: the spellings of ``optimizations`` other than
``clock32`` (``sched_stores``, ``sched_barriers``, guessed from the pass names
``add_schedule_buffer_store``/``add_sched_barriers``); whether ``flush`` or ``local`` buffers exist in
3.6 (not accepted here: DESIGN.md says only ``circular`` compiles); upstream's exact string grammar
(we accept ``key=value`` pairs in any order, each at most once).
"""

from __future__ import annotations

from dataclasses import dataclass

from proton_core.plugin_api import ProtonError

#: Prefix of our compile-cache key, so a cubin built by upstream proton (other pass arguments) is never reused.
CACHE_KEY_PREFIX = "proton-plugin/1:"

MODE_NAMES = ("default",)
METRIC_TYPES = ("cycle",)
BUFFER_STRATEGIES = ("circular",)
BUFFER_TYPES = ("shared", "global")
SAMPLING_STRATEGIES = ("none", "selective")
OPTIMIZATIONS = ("clock32", "sched_stores", "sched_barriers")

#: granularity -> warps folded into one unit (None: the whole CTA)
GRANULARITIES = {
    "warp": 1, "warp_2": 2, "warp_4": 4, "warp_8": 8,
    "warp_group": 4, "warp_group_2": 8, "warp_group_4": 16, "warp_group_8": 32,
    "cta": None,
}

#: the options in canonical (cache key) order
KEYS = ("metric_type", "granularity", "buffer_strategy", "buffer_type", "buffer_size", "sampling_strategy",
        "sampling_options", "optimizations")


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _bad(key: str, value, valid) -> ProtonError:
    return ProtonError(f"instrumentation mode option {key}={value!r} is not valid: use one of {valid}")


@dataclass(frozen=True)
class InstrumentationMode:
    """One checked instrumentation mode (build it with :func:`parse_mode`)."""

    name: str = "default"
    metric_type: str = "cycle"
    #: what the user asked for; the decoder folds to it (see :attr:`fold_warps`)
    granularity: str = "warp"
    buffer_strategy: str = "circular"
    buffer_type: str = "shared"
    #: total record-buffer bytes per CTA (all segments); 0 lets the pass size it
    buffer_size: int = 0
    sampling_strategy: str = "none"
    #: sorted distinct warp ids that record (selective sampling only)
    sampling_options: tuple[int, ...] = ()
    optimizations: tuple[str, ...] = ()

    # What goes to the compiler (3.6: warp only) and what the decoder must do.
    @property
    def compile_granularity(self) -> str:
        return "warp"

    @property
    def fold_warps(self) -> int | None:
        """Warps per unit the decoder folds records into: 1 (no folding), 2..32, or None (whole CTA)."""
        return GRANULARITIES[self.granularity]

    @property
    def clock_extension(self) -> bool:
        """Records carry 11 high clock bits (a 43-bit clock) unless ``clock32`` is asked for."""
        return "clock32" not in self.optimizations

    @property
    def clock_bits(self) -> int:
        return 43 if self.clock_extension else 32

    def segments(self, num_warps: int) -> tuple[int, ...]:
        """Warp ids that own a record segment, in segment order."""
        if self.sampling_strategy == "selective":
            bad = [w for w in self.sampling_options if w >= num_warps]
            if bad:
                raise ProtonError(f"instrumentation mode option sampling_options={self._opts()!r} names warp {bad[0]}, "
                                  f"but the kernel has {num_warps} warps (valid: 0..{num_warps - 1})")
            return self.sampling_options
        return tuple(range(num_warps))

    def check_warps(self, num_warps: int) -> None:
        """The compile-time check the pass makes: each segment's share of buffer_size is a power of two."""
        nseg = len(self.segments(num_warps))
        if self.buffer_size and (self.buffer_size % nseg or not _is_pow2(self.buffer_size // nseg)
                                 or self.buffer_size // nseg < 8):
            raise ProtonError(f"instrumentation mode option buffer_size={self.buffer_size} gives "
                              f"{self.buffer_size / nseg:g} bytes to each of {nseg} segments: use a size whose share "
                              "per segment is a power of two of at least 8 bytes (one record)")

    def _opts(self) -> str:
        return ",".join(str(w) for w in self.sampling_options)

    def canonical(self) -> str:
        """Every option, in a fixed order: equal modes give equal strings."""
        values = {
            "metric_type": self.metric_type, "granularity": self.granularity,
            "buffer_strategy": self.buffer_strategy, "buffer_type": self.buffer_type,
            "buffer_size": str(self.buffer_size), "sampling_strategy": self.sampling_strategy,
            "sampling_options": self._opts(), "optimizations": ",".join(self.optimizations),
        }
        return ":".join([self.name] + [f"{k}={values[k]}" for k in KEYS])

    def __str__(self) -> str:
        """The canonical string, so the core's mode check (``str(mode)`` starts with ``default``) accepts it."""
        return self.canonical()

    def cache_key(self) -> str:
        """The string for ``knobs.compilation.instrumentation_mode``: Triton's only cache key for this
        (pass arguments are not in the key, DESIGN.md §2), so it encodes every option."""
        return CACHE_KEY_PREFIX + self.canonical()


def _int_list(key: str, text: str, valid: str) -> tuple[int, ...]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    try:
        values = [int(t) for t in items]
    except ValueError:
        raise _bad(key, text, valid) from None
    if any(v < 0 for v in values) or not values:
        raise _bad(key, text, valid)
    return tuple(sorted(set(values)))


def _check(mode: InstrumentationMode) -> InstrumentationMode:
    if mode.name not in MODE_NAMES:
        raise ProtonError(f"instrumentation mode {mode.name!r} is not known: use one of {MODE_NAMES}")
    for key, valid in (("metric_type", METRIC_TYPES), ("buffer_strategy", BUFFER_STRATEGIES),
                       ("buffer_type", BUFFER_TYPES), ("sampling_strategy", SAMPLING_STRATEGIES),
                       ("granularity", tuple(GRANULARITIES))):
        if getattr(mode, key) not in valid:
            raise _bad(key, getattr(mode, key), valid)
    size = mode.buffer_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 0 or (size and not _is_pow2(size)):
        raise _bad("buffer_size", size, "0 (auto) or a power of two in bytes, e.g. 4096")
    for opt in mode.optimizations:
        if opt not in OPTIMIZATIONS:
            raise _bad("optimizations", opt, OPTIMIZATIONS)
    if mode.sampling_strategy == "selective" and not mode.sampling_options:
        raise _bad("sampling_options", "", "warp ids such as '0,2' (required by sampling_strategy=selective)")
    if mode.sampling_strategy == "none" and mode.sampling_options:
        raise _bad("sampling_options", mode._opts(), "nothing unless sampling_strategy=selective")
    return mode


def _from_string(text: str) -> InstrumentationMode:
    parts = [p.strip() for p in text.strip().split(":")]
    name, fields = parts[0].lower(), {}
    if name not in MODE_NAMES:
        raise ProtonError(f"instrumentation mode {parts[0]!r} is not known: use one of {MODE_NAMES}, "
                          "e.g. 'default:granularity=warp_group:buffer_size=4096'")
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq or key not in KEYS:
            raise ProtonError(f"instrumentation mode option {part!r} is not known: write key=value with key one of {KEYS}")
        if key in fields:
            raise ProtonError(f"instrumentation mode option {key} is given twice in {text!r}: give it once")
        if key == "buffer_size":
            try:
                fields[key] = int(value, 0)
            except ValueError:
                raise _bad(key, value, "0 (auto) or a power of two in bytes, e.g. 4096") from None
        elif key == "sampling_options":
            fields[key] = _int_list(key, value, "warp ids such as '0,2'")
        elif key == "optimizations":
            fields[key] = tuple(sorted({o.strip().lower() for o in value.split(",") if o.strip()}))
        else:
            fields[key] = value.lower()
    return InstrumentationMode(name=name, **fields)


def _from_object(obj) -> InstrumentationMode:
    """Duck-typed mode objects (upstream ``proton.mode.Default(...)``): the fields of the same names."""
    fields = {}
    for key in KEYS:
        if not hasattr(obj, key):
            continue
        value = getattr(obj, key)
        value = getattr(value, "name", value)  # an enum member
        if key == "sampling_options":
            text = value if isinstance(value, str) else ",".join(str(v) for v in value or ())
            fields[key] = _int_list(key, text, "warp ids such as '0,2'") if text.strip() else ()
        elif key == "optimizations":
            items = value.split(",") if isinstance(value, str) else [getattr(v, "name", v) for v in value or ()]
            fields[key] = tuple(sorted({str(o).strip().lower() for o in items if str(o).strip()}))
        elif key == "buffer_size":
            fields[key] = value
        else:
            fields[key] = str(value).lower()
    name = getattr(obj, "name", None)
    name = name if isinstance(name, str) else type(obj).__name__
    return InstrumentationMode(name=name.lower(), **fields)


def parse_mode(mode=None) -> InstrumentationMode:
    """``None``/``"default"``/``"default:key=value:..."``/an :class:`InstrumentationMode`/a mode object
    → a checked :class:`InstrumentationMode`; anything wrong raises one ProtonError line."""
    if mode is None:
        return InstrumentationMode()
    if isinstance(mode, InstrumentationMode):
        return _check(mode)
    if isinstance(mode, str):
        return _check(_from_string(mode))
    return _check(_from_object(mode))
