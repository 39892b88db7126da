"""The merged view's C hot path (proton_core._rank_numbers, csrc/rank_numbers.c) against the Python one.

Every odd file must get the Python reader's answer from the C reader: the same refusal, or the same
numbers, devices, moved device slots and sums; the per-rank figures (min / median / max, slowest,
imbalance) must be the Python passes' to the bit, -0.0, infinities and NaN included.
"""

import math
import random
from array import array

import pytest

from benchmarks import merge_ranks
from proton_core import viewer
from proton_core.viewer import imbalance, read_merged, sameshape
from proton_core.viewer.sameshape import Shape

pytestmark = pytest.mark.skipif(sameshape._C is None, reason="proton_core._rank_numbers is not built")


@pytest.fixture
def run(tmp_path):
    """Three ranks of a ~600-node tree (the benchmark's files); rank 0's table as the full reader reads it."""
    merge_ranks.generate(str(tmp_path), 3, 600)
    first = str(tmp_path / "bench.rank0.hatchet")
    return tmp_path, first, read_merged([first], [])


def _doubles(values):
    if isinstance(values, bytes):
        out = array("d")
        out.frombytes(values)
        return list(out)[:-1]
    return [float(v) for v in values[:-1]]


def _same(x, y) -> bool:
    """Equal to the bit, a NaN equal to a NaN (lists, tuples, arrays of numbers, or numbers)."""
    if isinstance(x, (list, tuple, array)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        return type(x) is type(y) and (repr(x) == repr(y))
    return type(x) is type(y) and x == y


class Recorder:
    """The C reader, its parse() answers noted (>= 0: the C reader took the file's numbers)."""

    def __init__(self, native) -> None:
        self.native, self.parsed = native, []

    def parse(self, data):
        self.parsed.append(self.native.parse(data))
        return self.parsed[-1]

    def __getattr__(self, name):
        return getattr(self.native, name)


def both(first, table, paths, taken=None):
    """Read ``paths`` in turn through a C-backed shape and a Python-only one learnt from ``first``; assert
    each answer is the same (and, per path, whether the C reader took it: ``taken``); the two shapes."""
    fast, slow = Shape.learn(first, table), Shape.learn(first, table)
    assert fast is not None and fast.native is not None
    slow.native = None
    for k, path in enumerate(paths):
        recorder = fast.native = Recorder(fast.native) if fast.native is not None else None
        a, b = fast.read(str(path)), slow.read(str(path))
        if taken is not None and taken[k] is not None:
            assert (recorder is not None and recorder.parsed and recorder.parsed[-1] >= 0) == taken[k], path
        if fast.native is recorder and recorder is not None:
            fast.native = recorder.native
        assert (a is None) == (b is None), path
        if a is not None:
            assert _same(_doubles(a[0]), _doubles(b[0]))
            assert a[1] == b[1] and a[2] == b[2]
    assert fast.files == slow.files
    sums = fast.native.sums() if fast.native is not None else fast.sums
    assert _same(sums, slow.sums)
    return fast, slow


def variant(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_same_shape_reads_alike_and_is_read_in_c(run):
    tmp_path, first, table = run
    paths = [tmp_path / "bench.rank1.hatchet", tmp_path / "bench.rank2.hatchet"]
    fast, _ = both(first, table, paths)
    assert fast.native is not None and fast.files == 2


ODD = {
    "float": (b'"count":', b'"count":2.5e1,"x":1,"count2":'),  # another key set: refused by both
    "exponent": None,
    "nan": (b'"bytes":', b'"bytes":NaN,"b":'),
    "text": (b'"count":6', b'"count":"6'),
    "bool": None,
    "space": (b'"count":', b'"count": '),
    "leading zero": (b'"count":', b'"count":0'),
    "device 01": (b'"device_id":"1"', b'"device_id":"01"'),
    "device moved": (b'"device_id":"1"', b'"device_id":"7"'),
    "negative": (b'"count":1', b'"count":-1'),
    "negative device": (b'"device_id":"1"', b'"device_id":"-1"'),
    "device float": (b'"device_id":"1"', b'"device_id":"1.5"'),
    "hip": (b'"device_type":"CUDA"', b'"device_type":"HIP"'),
    "other device kind": (b'"device_type":"CUDA"', b'"device_type":"MLU"'),
    "renamed kernel": (b'fused_layer_norm', b'fused_layer_nurm'),
    "host non-ascii": (b'"host":"node0"', '"host":"nodé"'.encode()),
    "host bad utf-8": (b'"host":"node0"', b'"host":"node\xff"'),
    "kernel bad utf-8": (b'fused_layer_norm', b'fused_layer_n\xffrm'),
    "escaped mark in metadata": (b'"host":"node0"', b'"host":"\\"metrics\\":{"'),
    "mark in metadata": (b'"host":"node0"', b'"host":{"metrics":{"a":1}}'),
    "children mark in metadata": (b'"host":"node0"', b'"host":{"x":{},"children":[1]}'),
    "other run": (b'"run_id":"bench-run"', b'"run_id":"other-run"'),
    "renamed data": (b'"data":"tree"', b'"data":"trees"'),
}

#: odd files whose numbers the C reader takes (the others: the Python reader decides)
C_TAKES = {"exponent", "device moved", "negative", "negative device", "hip", "other run", "renamed data",
           "escaped mark in metadata"}
#: odd files the C reader leaves to the Python reader, which takes them (the C reader is then set aside)
PYTHON_TAKES = {"bool", "space", "host non-ascii", "device float"}
#: odd files whose marks cut the text where the learnt file has none: whichever reader, the same answer
EITHER = {"mark in metadata", "children mark in metadata"}


@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_files_get_the_python_readers_answer(run, case):
    tmp_path, first, table = run
    data = (tmp_path / "bench.rank1.hatchet").read_bytes()
    if case == "exponent":  # every count a float of the same value: accepted by both, sums turn float
        odd = data.replace(b'"count":1', b'"count":1.0e0')
    elif case == "bool":  # Python adds True as 1 (the C reader leaves the file to it)
        odd = data.replace(b'"count":1,', b'"count":true,', 1)
    else:
        old, new = ODD[case]
        assert old in data, case
        odd = data.replace(old, new, 1)
    assert odd != data
    paths = [tmp_path / "bench.rank2.hatchet", variant(tmp_path, "odd.rank1.hatchet", odd),
             tmp_path / "bench.rank1.hatchet"]
    c_takes = case in C_TAKES
    fast, _ = both(first, table, paths, [True, None if case in EITHER else c_takes,
                                         None if case in EITHER else c_takes or case not in PYTHON_TAKES])
    if c_takes:
        assert fast.native is not None and fast.files == 3


@pytest.mark.parametrize("case", ["truncated", "empty", "tail not json", "no devices", "devices a list",
                                  "extra bracket", "mark in tail", "binary"])
def test_odd_tails_and_files(run, case):
    tmp_path, first, table = run
    data = (tmp_path / "bench.rank1.hatchet").read_bytes()
    odd = {"truncated": data[:len(data) // 2], "empty": b"",
           "tail not json": data[:-3] + b"}x]", "no devices": data[:data.rindex(b",{\"CUDA\"")] + b"]",
           "devices a list": data[:data.rindex(b",{\"CUDA\"")] + b",[1,2]]",
           "extra bracket": data[:-1] + b"]]", "mark in tail": data[:-2] + b',"metrics":{}}]',
           "binary": b"\x1f\x8b" + data[:100]}[case]
    both(first, table, [variant(tmp_path, "odd.rank1.hatchet", odd), tmp_path / "bench.rank2.hatchet"])


def test_missing_file_and_directory(run):
    tmp_path, first, table = run
    (tmp_path / "adir").mkdir()
    both(first, table, [tmp_path / "missing.hatchet", tmp_path / "adir", tmp_path / "bench.rank1.hatchet"])


def test_sums_past_int64_go_to_python_ints(run):
    """Two files whose counts add up past 2**63: the C reader hands over; the sums stay exact."""
    tmp_path, first, table = run
    data = (tmp_path / "bench.rank1.hatchet").read_bytes()
    big = variant(tmp_path, "big.rank1.hatchet", data.replace(b'"count":1,', b'"count":900000000000000000,', 1))
    fast, slow = both(first, table, [big, big, big, big, big, big, big, big, big, big, big])
    assert fast.native is None  # the Python reader took over with the C reader's sums
    assert 9000000000000000000 < max(v for v in slow.sums if type(v) is int) < 2 ** 64
    huge = variant(tmp_path, "huge.rank1.hatchet", data.replace(b'"count":1,', b'"count":123456789012345678901,', 1))
    fast, _ = both(first, table, [tmp_path / "bench.rank2.hatchet", huge])
    assert fast.native is None


def test_ints_then_floats_sum_as_python_adds_them(run):
    tmp_path, first, table = run
    data = (tmp_path / "bench.rank1.hatchet").read_bytes()
    floats = variant(tmp_path, "f.rank1.hatchet", data.replace(b'"count":1', b'"count":1.1'))
    zeros = variant(tmp_path, "z.rank1.hatchet", data.replace(b'"count":1', b'"count":-0.0'))
    paths = [tmp_path / "bench.rank1.hatchet", floats, zeros, tmp_path / "bench.rank2.hatchet", floats]
    fast, _ = both(first, table, paths)
    assert fast.native is not None and fast.files == 5


def test_learnt_file_the_c_reader_cannot_vouch_for(tmp_path):
    """A learnt file with a metric key the Python reader's replacements could touch: no C reader, same answers."""
    merge_ranks.generate(str(tmp_path), 2, 300)
    for rank in range(2):
        path = tmp_path / f"bench.rank{rank}.hatchet"
        path.write_bytes(path.read_bytes().replace(b'"bytes":', b'"by,tes":'))
    first = str(tmp_path / "bench.rank0.hatchet")
    table = read_merged([first], [])
    shape = Shape.learn(first, table)
    assert shape is not None and shape.native is None
    assert shape.read(str(tmp_path / "bench.rank1.hatchet")) is not None


def _stats(columns, ranks, spans, size, scale, shown):
    got = imbalance.over_ranks(columns, ranks, spans, size, scale, shown)
    return [got.low, got.median, got.high, got.slowest, got.imbalance]


@pytest.mark.parametrize("count", [1, 2, 5, 64])
def test_figures_over_ranks_equal_the_python_passes(monkeypatch, count):
    rnd = random.Random(count)
    size = 400
    parent = [-1] + [rnd.randrange(i) for i in range(1, size)]
    kids = [[] for _ in range(size)]
    for i in range(1, size):
        kids[parent[i]].append(i)
    order, stack = [], [0]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(kids[i]))
    order = order[:-7]  # nodes left out of the order keep NaN
    spans = imbalance.Spans(order, parent, size)
    choices = [0.0, -0.0, 1.0, 2.5, 1e300, 1e-300, 3.0, 7.0]
    raw = [array("d", [rnd.choice(choices) if rnd.random() < 0.3 else rnd.uniform(-5, 1e9) for _ in range(size)])
           for _ in range(count)]
    raw[0][5] = math.inf
    shown = [math.nan if i % 11 == 3 else 1.0 for i in range(size)]
    ranks = [r * 3 for r in range(count)]
    fast = [[spans.subtree_sums(c) for c in raw], [spans.own(c) for c in raw]]
    assert all(isinstance(c, array) for c in fast[0] + fast[1])
    figures = [_stats(cols, ranks, spans, size, 0.001, shown) for cols in fast]
    monkeypatch.setattr(imbalance, "_C", None)
    slow = [[spans.subtree_sums(c) for c in raw], [spans.own(c) for c in raw]]
    assert _same(fast, slow)
    assert _same(figures, [_stats(cols, ranks, spans, size, 0.001, shown) for cols in slow])


def test_a_nan_among_the_values_takes_the_python_passes(monkeypatch):
    spans = imbalance.Spans([0, 1, 2], [-1, 0, 0], 3)
    columns = [array("d", [1.0, math.nan, 2.0]), array("d", [3.0, 1.0, -0.0]), array("d", [0.0, 2.0, 0.0])]
    assert sameshape._C.over_ranks(columns, [0, 1, 2], spans.order_q, 3, 1.0, None, math.nan) is None
    fast = _stats(columns, [0, 1, 2], spans, 3, 1.0, None)
    monkeypatch.setattr(imbalance, "_C", None)
    assert _same(fast, _stats(columns, [0, 1, 2], spans, 3, 1.0, None))


def test_view_output_equals_the_pure_python_view(tmp_path, capsys, monkeypatch):
    """The whole view (tree, --sort imbalance, several metrics) with odd ranks among plain ones, byte for byte."""
    merge_ranks.generate(str(tmp_path), 5, 2000)
    p = tmp_path / "bench.rank2.hatchet"
    p.write_bytes(p.read_bytes().replace(b'"count":1', b'"count":1.5').replace(b'"device_id":"1"', b'"device_id":"4"'))
    p = tmp_path / "bench.rank3.hatchet"
    p.write_bytes(p.read_bytes().replace(b'"count":2,', b'"count": 2,', 1))  # the Python reader's, then Python sums
    argvs = [[str(tmp_path)], ["--sort", "imbalance", str(tmp_path)],
             ["-m", "time/us,count,cpu_time/ns", str(tmp_path)], ["-m", "count", str(tmp_path)]]
    fast = []
    for argv in argvs:
        assert viewer.main(argv) == 0
        fast.append(capsys.readouterr())
    monkeypatch.setattr(sameshape, "_C", None)
    monkeypatch.setattr(imbalance, "_C", None)
    for argv, want in zip(argvs, fast):
        assert viewer.main(argv) == 0
        assert capsys.readouterr() == want


def test_a_lone_negative_zero_keeps_its_sign(monkeypatch):
    """accumulate() starts from the first value itself, not 0.0 + it: a one-node tree of -0.0 sums to -0.0."""
    spans = imbalance.Spans([0], [-1], 1)
    fast = spans.subtree_sums(array("d", [-0.0]))
    monkeypatch.setattr(imbalance, "_C", None)
    assert _same(fast, spans.subtree_sums(array("d", [-0.0]))) and repr(fast[0]) == "-0.0"
