"""Decode one launch's profile scratch buffer (Triton 3.6 layout, DESIGN.md §3). Pure Python, no GPU.

The buffer holds one block of ``cta_bytes`` (metadata ``profile_scratch_size``) per CTA, CTA ``b`` at
``b * cta_bytes``. Each block, little-endian u32 words::

    0   0xDEADBEEF preamble           4   linear CTA id          8   %smid
    12  B, record bytes of all segments
    16  u64 globaltimer at entry      24  u64 before the copy    32  u64 after the copy
    40  u32 x W: words written by each warp (2 per record, keeps counting past the ring's size)
    40+4W  nseg segments of B/nseg bytes, one per recording warp, of 8-byte records:
           word0 tag: bit 31 end, bits 30..23 scope id, bits 10..0 clock high bits; word1 clock low 32 bits

Record ``n`` of a warp sits at word ``2n mod segWords``: once full, the segment holds the latest
``segWords/2`` records, the oldest at ``index mod segWords``.

A block whose preamble is 0 belongs to a CTA that never ran (the allocator zeroes the buffer): it is
counted in ``missing_ctas``, not an error. Any other preamble, a CTA id that is not the block's
index, a B that does not give ``cta_bytes``, or a buffer shorter than ``n_cta`` blocks raise one
:class:`ProtonError` line naming the kernel.

To check on the GPU (read from LLVM IR on CPU or guessed, not yet seen in a real buffer):
- that segments start right after the index words (offset ``40 + 4W``, no extra alignment);
- that the index slot of a warp is indexed by warp id (not by segment) under selective sampling;
- that the tag's high clock bits are ``clock64 >> 32`` masked to 11 bits, so that
  ``(hi << 32) | lo`` is the low 43 bits of ``clock64`` (with ``clock32``: hi = 0);
- that ``index`` counts words (2 per record), and that ``B`` (offset 12) is the sum of all segments;
- that records of a warp are stored in program order, so a decrease of the reconstructed clock
  means one wrap of the 43-bit (or 32-bit) counter, i.e. consecutive records of a warp are less
  than 2**43 (2**32 with clock32, about 2 s) cycles apart.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from proton_core.plugin_api import ProtonError

PREAMBLE = 0xDEADBEEF
HEADER_BYTES = 40
RECORD_BYTES = 8
BLOCK_ALIGN = 128
END_BIT = 1 << 31
SCOPE_SHIFT, SCOPE_MASK = 23, 0xFF
CLOCK_HI_MASK = 0x7FF


def cta_block_bytes(buffer_bytes: int, num_warps: int) -> int:
    """``S = align(B + 40 + 4W, 128)``: the bytes one CTA's block takes."""
    raw = buffer_bytes + HEADER_BYTES + 4 * num_warps
    return (raw + BLOCK_ALIGN - 1) // BLOCK_ALIGN * BLOCK_ALIGN


@dataclass(frozen=True)
class Record:
    scope_id: int
    is_end: bool
    cycle: int  # reconstructed, monotonic within a warp


@dataclass(frozen=True)
class Interval:
    cta: int
    warp: int  # a warp id; after folding, the unit index (warp group), or -1 for the whole CTA
    scope_id: int
    start: int
    end: int
    depth: int  # dynamic nesting depth in its warp (0: outermost open scope)
    parent: int | None  # scope id dynamically enclosing it, None at depth 0

    @property
    def cycles(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class CtaHeader:
    cta: int
    sm: int
    buffer_bytes: int
    start_ns: int  # globaltimer at kernel entry
    copy_start_ns: int
    copy_end_ns: int


@dataclass
class Counters:
    records: int = 0  #: records decoded (kept in the buffers)
    overwritten: int = 0  #: records the circular buffers overwrote (written - kept)
    truncated: int = 0  #: ends without a start in a warp whose oldest records were overwritten
    unmatched: int = 0  #: ends without a start in a warp that lost nothing (or closing a scope out of order)
    unclosed: int = 0  #: starts without an end
    missing_ctas: int = 0  #: blocks with no preamble (the CTA never ran or never wrote)
    wrapped_warps: int = 0  #: warps whose ring wrapped

    def add(self, other: "Counters") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class DecodeResult:
    kernel: str
    intervals: list[Interval]
    ctas: list[CtaHeader]
    #: (cta, warp) -> records in time order
    records: dict[tuple[int, int], list[Record]] = field(repr=False)
    counters: Counters

    def problems(self) -> list[str]:
        """One line per kind of loss, for the backend to warn with (empty: all records paired)."""
        c, out = self.counters, []
        if c.overwritten:
            out.append(f"kernel {self.kernel}: instrumentation buffer too small, {c.wrapped_warps} warp(s) kept only "
                       f"their latest records ({c.overwritten} of {c.overwritten + c.records} overwritten, "
                       f"{c.truncated} scope end(s) lost their start); raise buffer_size")
        if c.unmatched:
            out.append(f"kernel {self.kernel}: {c.unmatched} scope end record(s) without a matching start")
        if c.unclosed:
            out.append(f"kernel {self.kernel}: {c.unclosed} scope start record(s) without an end")
        if c.missing_ctas:
            out.append(f"kernel {self.kernel}: {c.missing_ctas} CTA(s) wrote no profile header")
        return out


def _u32(buf: memoryview, off: int) -> int:
    return struct.unpack_from("<I", buf, off)[0]


def _u64(buf: memoryview, off: int) -> int:
    return struct.unpack_from("<Q", buf, off)[0]


def unwrap_clock(raw: list[int], bits: int) -> list[int]:
    """Monotonic cycles from ``bits``-wide counter values in time order: each decrease is one wrap."""
    out, base, prev, span = [], 0, None, 1 << bits
    for value in raw:
        if prev is not None and value < prev:
            base += span
        out.append(base + value)
        prev = value
    return out


def read_records(data, *, kernel: str, num_warps: int, cta_bytes: int, segments=None, clock_bits: int = 43,
                 n_cta: int | None = None):
    """Records per (cta, warp) in time order, the CTA headers and the counters (pairing not done).

    ``segments``: the warp ids that own a segment, in order (default: all ``num_warps``);
    ``n_cta``: the grid size, when known (then a shorter buffer is an error, a longer one is cut).
    """
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    segs = tuple(range(num_warps)) if segments is None else tuple(segments)
    where = f"kernel {kernel}: profile buffer"
    if cta_bytes <= 0 or not segs:
        raise ProtonError(f"{where}: nothing to decode (cta_bytes={cta_bytes}, {len(segs)} recording warps)")
    if n_cta is None:
        if len(buf) == 0 or len(buf) % cta_bytes:
            raise ProtonError(f"{where} has {len(buf)} bytes, not a whole number of {cta_bytes}-byte CTA blocks "
                              "(truncated copy?)")
        n_cta = len(buf) // cta_bytes
    elif len(buf) < n_cta * cta_bytes:
        raise ProtonError(f"{where} is truncated: {len(buf)} bytes for {n_cta} CTA blocks of {cta_bytes} bytes "
                          f"({n_cta * cta_bytes} needed)")
    counters, ctas, records = Counters(), [], {}
    lost: dict[tuple[int, int], int] = {}
    for b in range(n_cta):
        base = b * cta_bytes
        magic = _u32(buf, base)
        if magic == 0:
            counters.missing_ctas += 1
            continue
        if magic != PREAMBLE:
            raise ProtonError(f"{where}: CTA block {b} starts with 0x{magic:08x}, not the preamble 0x{PREAMBLE:08X} "
                              "(layout of another Triton version, or a buffer not written by this kernel)")
        cta, sm, nbytes = _u32(buf, base + 4), _u32(buf, base + 8), _u32(buf, base + 12)
        if cta != b:
            raise ProtonError(f"{where}: CTA block {b} says it belongs to CTA {cta} (layout mismatch)")
        if cta_block_bytes(nbytes, num_warps) != cta_bytes or nbytes % len(segs) or nbytes < RECORD_BYTES * len(segs):
            raise ProtonError(f"{where}: CTA block {b} holds {nbytes} record bytes for {len(segs)} segments and "
                              f"{num_warps} warps, which does not make a {cta_bytes}-byte block (layout mismatch)")
        ctas.append(CtaHeader(cta, sm, nbytes, _u64(buf, base + 16), _u64(buf, base + 24), _u64(buf, base + 32)))
        seg_bytes = nbytes // len(segs)
        seg_words = seg_bytes // 4
        capacity = seg_words // 2
        seg0 = base + HEADER_BYTES + 4 * num_warps
        for k, warp in enumerate(segs):
            index = _u32(buf, base + HEADER_BYTES + 4 * warp)
            written = index // 2
            kept = min(written, capacity)
            first = written % capacity if written > capacity else 0
            if written > capacity:
                counters.wrapped_warps += 1
                counters.overwritten += written - capacity
                lost[(cta, warp)] = written - capacity
            if not kept:
                continue
            seg = seg0 + k * seg_bytes
            tags, raw = [], []
            for i in range(kept):
                tag, lo = struct.unpack_from("<II", buf, seg + RECORD_BYTES * ((first + i) % capacity))
                tags.append(tag)
                raw.append(((tag & CLOCK_HI_MASK) << 32 | lo) & ((1 << clock_bits) - 1))
            cycles = unwrap_clock(raw, clock_bits)
            records[(cta, warp)] = [Record((t >> SCOPE_SHIFT) & SCOPE_MASK, bool(t & END_BIT), c)
                                    for t, c in zip(tags, cycles)]
            counters.records += kept
    return records, ctas, counters, lost


def pair_intervals(records: dict[tuple[int, int], list[Record]], lost=None) -> tuple[list[Interval], Counters]:
    """Start/end records → intervals, with a stack per warp (nesting).

    An end whose scope is not open is counted (``truncated`` when the warp lost records to the ring,
    ``unmatched`` otherwise) and skipped; an end closing a scope below the top closes the scopes above
    it as ``unclosed``; scopes still open at the end count as ``unclosed``.
    """
    lost = lost or {}
    counters, out = Counters(), []
    for (cta, warp), recs in records.items():
        stack: list[tuple[int, int]] = []
        for rec in recs:
            if not rec.is_end:
                stack.append((rec.scope_id, rec.cycle))
                continue
            pos = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == rec.scope_id), None)
            if pos is None:
                if lost.get((cta, warp)):
                    counters.truncated += 1
                else:
                    counters.unmatched += 1
                continue
            if pos != len(stack) - 1:
                counters.unclosed += len(stack) - 1 - pos
                counters.unmatched += 1
                del stack[pos + 1:]
            scope_id, start = stack.pop()
            parent = stack[-1][0] if stack else None
            out.append(Interval(cta, warp, scope_id, start, rec.cycle, len(stack), parent))
        counters.unclosed += len(stack)
    out.sort(key=lambda iv: (iv.cta, iv.warp, iv.start, -iv.end))
    return out, counters


def decode_launch(data, *, kernel: str, num_warps: int, cta_bytes: int, segments=None, clock_bits: int = 43,
                  n_cta: int | None = None) -> DecodeResult:
    """Decode one launch's buffer (see :func:`read_records`) and pair its records into intervals."""
    records, ctas, counters, lost = read_records(data, kernel=kernel, num_warps=num_warps, cta_bytes=cta_bytes,
                                                 segments=segments, clock_bits=clock_bits, n_cta=n_cta)
    intervals, paired = pair_intervals(records, lost)
    counters.add(paired)
    return DecodeResult(kernel, intervals, ctas, records, counters)
