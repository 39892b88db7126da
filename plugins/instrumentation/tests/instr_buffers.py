"""A writer for synthetic Triton 3.6 profile buffers, per DESIGN.md §3 (independent of decode.py)."""

import struct

MAGIC = 0xDEADBEEF


def block_bytes(buffer_bytes, num_warps):
    return -(-(buffer_bytes + 40 + 4 * num_warps) // 128) * 128


def record(scope, is_end, cycle, clock32=False):
    hi = 0 if clock32 else (cycle >> 32) & 0x7FF
    return struct.pack("<II", (is_end << 31) | (scope << 23) | hi, cycle & 0xFFFFFFFF)


def cta_block(cta, warps, *, num_warps, buffer_bytes, segments=None, sm=None, t0=0, clock32=False,
              magic=MAGIC):
    """``warps``: {warp id: [(scope, is_end, cycle)]} in program order; the ring keeps the latest ones."""
    segments = list(range(num_warps)) if segments is None else list(segments)
    size = block_bytes(buffer_bytes, num_warps)
    out = bytearray(size)
    struct.pack_into("<IIII", out, 0, magic, cta, cta + 100 if sm is None else sm, buffer_bytes)
    struct.pack_into("<QQQ", out, 16, t0, t0 + 5000, t0 + 6000)
    seg_bytes = buffer_bytes // len(segments)
    cap = seg_bytes // 8
    for k, warp in enumerate(segments):
        recs = warps.get(warp, [])
        struct.pack_into("<I", out, 40 + 4 * warp, 2 * len(recs))
        for n, (scope, is_end, cycle) in enumerate(recs):
            pos = 40 + 4 * num_warps + k * seg_bytes + 8 * (n % cap)
            out[pos:pos + 8] = record(scope, is_end, cycle, clock32)
    return bytes(out)


def launch(ctas, *, num_warps, buffer_bytes, **kw):
    """``ctas``: list (index = CTA id) of {warp: records}; None for a CTA that never ran (zeroed block)."""
    size = block_bytes(buffer_bytes, num_warps)
    return b"".join(bytes(size) if warps is None else
                    cta_block(i, warps, num_warps=num_warps, buffer_bytes=buffer_bytes, t0=1000 * i, **kw)
                    for i, warps in enumerate(ctas))


def scope(scope_id, start, end):
    return [(scope_id, 0, start), (scope_id, 1, end)]
