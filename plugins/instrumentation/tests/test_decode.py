import struct

import pytest

from instr_buffers import block_bytes, cta_block, launch, scope
from proton_core.plugin_api import ProtonError
from proton_instrumentation.decode import (Counters, CtaHeader, Interval, Record, cta_block_bytes, decode_launch,
                                           pair_intervals, unwrap_clock)

W, B = 4, 256  # 4 warps, 64 bytes = 8 records per segment
S = block_bytes(B, W)


def decode(data, **kw):
    kw.setdefault("num_warps", W)
    kw.setdefault("cta_bytes", S)
    return decode_launch(data, kernel="k", **kw)


def test_block_size_matches_design_examples():
    assert cta_block_bytes(8192, 4) == 8320 and cta_block_bytes(65536, 4) == 65664
    assert cta_block_bytes(1024, 4) == 1152 and cta_block_bytes(256, 4) == 384 == S


def test_two_scopes_several_warps_and_ctas():
    warps = {w: scope(0, 100, 110) + scope(1, 200, 240) for w in range(W)}
    res = decode(launch([warps, warps, warps], num_warps=W, buffer_bytes=B))
    assert res.counters == Counters(records=3 * 4 * 4)
    assert len(res.intervals) == 24
    assert res.intervals[:2] == [Interval(0, 0, 0, 100, 110, 0, None), Interval(0, 0, 1, 200, 240, 0, None)]
    assert {(iv.cta, iv.warp) for iv in res.intervals} == {(c, w) for c in range(3) for w in range(W)}
    assert res.ctas[1] == CtaHeader(cta=1, sm=101, buffer_bytes=B, start_ns=1000, copy_start_ns=6000,
                                    copy_end_ns=7000)
    assert res.records[(2, 3)] == [Record(0, False, 100), Record(0, True, 110), Record(1, False, 200),
                                   Record(1, True, 240)]
    assert res.problems() == []


def test_nesting_depth_and_parent():
    recs = [(0, 0, 10), (1, 0, 20), (2, 0, 25), (2, 1, 30), (1, 1, 40), (1, 0, 50), (1, 1, 55), (0, 1, 60)]
    res = decode(launch([{0: recs}], num_warps=W, buffer_bytes=B))
    assert res.intervals == [Interval(0, 0, 0, 10, 60, 0, None), Interval(0, 0, 1, 20, 40, 1, 0),
                             Interval(0, 0, 2, 25, 30, 2, 1), Interval(0, 0, 1, 50, 55, 1, 0)]
    assert res.counters.unclosed == res.counters.truncated == res.counters.unmatched == 0


def test_clock_wraps_32_bits_with_high_bits():
    lo = (5 << 32) | 0xFFFFFF00
    recs = [(0, 0, lo), (0, 1, lo + 0x200)]  # the low word wraps, the tag's high bits go 5 -> 6
    res = decode(launch([{1: recs}], num_warps=W, buffer_bytes=B))
    assert res.intervals == [Interval(0, 1, 0, lo, lo + 0x200, 0, None)]
    assert res.intervals[0].cycles == 0x200


def test_clock32_wrap_is_unwrapped():
    recs = [(0, 0, 0xFFFFFFF0), (0, 1, 0x1_0000_0010), (1, 0, 0x1_0000_0020), (1, 1, 0x1_0000_0030)]
    res = decode(launch([{0: recs}], num_warps=W, buffer_bytes=B, clock32=True), clock_bits=32)
    assert [iv.cycles for iv in res.intervals] == [0x20, 0x10]
    assert res.intervals[1].start == 0x1_0000_0020


def test_43_bit_clock_wraps():
    top = (1 << 43) - 8
    res = decode(launch([{0: [(0, 0, top), (0, 1, (1 << 43) + 8)]}], num_warps=W, buffer_bytes=B))
    assert res.intervals[0].cycles == 16
    assert unwrap_clock([5, 3, 1, 2], 4) == [5, 19, 33, 34]


def test_full_ring_keeps_latest_and_counts_truncated():
    # warp 0: outer scope 0 around 5 iterations of scope 1 = 12 records in an 8-record ring
    recs = [(0, 0, 0)] + [r for i in range(5) for r in scope(1, 10 * i + 1, 10 * i + 5)] + [(0, 1, 100)]
    res = decode(launch([{0: recs, 1: scope(1, 7, 9)}], num_warps=W, buffer_bytes=B))
    c = res.counters
    assert (c.records, c.overwritten, c.wrapped_warps, c.truncated, c.unmatched, c.unclosed) == (10, 4, 1, 2, 0, 0)
    # kept: iteration 1's end (its start overwritten), iterations 2..4, the outer end (start overwritten)
    assert [(iv.warp, iv.scope_id, iv.start, iv.end) for iv in res.intervals] == \
        [(0, 1, 21, 25), (0, 1, 31, 35), (0, 1, 41, 45), (1, 1, 7, 9)]
    assert res.records[(0, 0)][0] == Record(1, True, 15) and res.records[(0, 0)][-1] == Record(0, True, 100)
    assert c.unmatched == 0
    assert res.problems()[0] == ("kernel k: instrumentation buffer too small, 1 warp(s) kept only their latest "
                                 "records (4 of 14 overwritten, 2 scope end(s) lost their start); raise buffer_size")


def test_exact_fit_is_not_wrapped():
    recs = [r for i in range(4) for r in scope(3, 10 * i, 10 * i + 4)]  # 8 records, capacity 8
    res = decode(launch([{2: recs}], num_warps=W, buffer_bytes=B))
    assert res.counters == Counters(records=8)
    assert [iv.start for iv in res.intervals] == [0, 10, 20, 30]


def test_unclosed_and_unmatched():
    res = decode(launch([{0: [(0, 0, 1), (1, 0, 2), (1, 1, 3)], 1: [(2, 1, 5)], 2: [(0, 0, 1), (1, 0, 2), (0, 1, 9)]}],
                        num_warps=W, buffer_bytes=B))
    c = res.counters
    assert (c.unclosed, c.unmatched, c.truncated) == (2, 2, 0)  # 0 in warp 0, 1 in warp 2; end of 2; 0 over 1
    assert [(iv.warp, iv.scope_id, iv.start, iv.end) for iv in res.intervals] == [(0, 1, 2, 3, ), (2, 0, 1, 9)]
    assert res.problems() == ["kernel k: 2 scope end record(s) without a matching start",
                              "kernel k: 2 scope start record(s) without an end"]


def test_cta_that_never_ran_and_warp_that_recorded_nothing():
    res = decode(launch([{0: scope(0, 1, 2)}, None, {}], num_warps=W, buffer_bytes=B))
    assert res.counters.missing_ctas == 1 and [c.cta for c in res.ctas] == [0, 2]
    assert len(res.intervals) == 1 and res.records == {(0, 0): [Record(0, False, 1), Record(0, True, 2)]}
    assert "1 CTA(s) wrote no profile header" in res.problems()[0]


def test_selective_segments():
    b = 128  # 2 segments of 64 bytes
    data = launch([{1: scope(0, 1, 4), 3: scope(0, 2, 8)}], num_warps=W, buffer_bytes=b, segments=(1, 3))
    res = decode(data, cta_bytes=block_bytes(b, W), segments=(1, 3))
    assert [(iv.warp, iv.cycles) for iv in res.intervals] == [(1, 3), (3, 6)]


def _one_line(err):
    assert "\n" not in str(err.value)
    return str(err.value)


def test_short_buffer_is_one_line_error():
    data = launch([{0: scope(0, 1, 2)}] * 2, num_warps=W, buffer_bytes=B)
    with pytest.raises(ProtonError) as err:
        decode(data[:-10])
    assert _one_line(err) == ("kernel k: profile buffer has 758 bytes, not a whole number of 384-byte CTA blocks "
                              "(truncated copy?)")
    with pytest.raises(ProtonError) as err:
        decode(data[:S], n_cta=2)
    assert _one_line(err) == ("kernel k: profile buffer is truncated: 384 bytes for 2 CTA blocks of 384 bytes "
                              "(768 needed)")
    with pytest.raises(ProtonError, match="kernel k: profile buffer has 0 bytes"):
        decode(b"")
    assert len(decode(memoryview(data)[:S], n_cta=1).intervals) == 1


def test_bad_magic_is_one_line_error():
    data = cta_block(0, {}, num_warps=W, buffer_bytes=B) + cta_block(1, {}, num_warps=W, buffer_bytes=B,
                                                                      magic=0x12345678)
    with pytest.raises(ProtonError) as err:
        decode(data)
    assert _one_line(err) == ("kernel k: profile buffer: CTA block 1 starts with 0x12345678, not the preamble "
                              "0xDEADBEEF (layout of another Triton version, or a buffer not written by this kernel)")


def test_layout_mismatch_errors():
    block = bytearray(cta_block(0, {}, num_warps=W, buffer_bytes=B))
    with pytest.raises(ProtonError, match="CTA block 0 holds 256 record bytes for 40 segments and 40 warps, which does not make a 384-byte"):
        decode(bytes(block), num_warps=40)
    struct.pack_into("<I", block, 4, 7)
    with pytest.raises(ProtonError, match="CTA block 0 says it belongs to CTA 7"):
        decode(bytes(block))


def test_pair_intervals_alone():
    recs = {(0, 0): [Record(4, False, 1), Record(4, True, 3)], (0, 1): [Record(4, True, 2)]}
    ivs, c = pair_intervals(recs, {(0, 1): 3})
    assert ivs == [Interval(0, 0, 4, 1, 3, 0, None)] and c.truncated == 1 and c.unmatched == 0
