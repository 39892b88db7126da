"""Every file the writer writes is strict JSON, and every viewer command reads it (issue 40 item 5, decision 0180).

The rule: a metric value past the largest double (``10**400``, ``inf``, NaN) is refused at the call in
one line; sums past it are written as the largest double and counted in the node's ``clamped``.
Property-based: generated extreme values go through start / scope(metrics) / finalize, the file is
parsed with a ``parse_constant`` that raises (no NaN/Infinity), and proton-view's -m, -l and --html
read it without a traceback.
"""

import json
import math
import re
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proton_core as proton
from proton_core import viewer
from proton_core.errors import ProtonError
from proton_core.metrics import MAX_VALUE, check_value, read_tensor

MAX = sys.float_info.max


def strict_loads(text: str):
    """json.loads as JSON.parse reads: NaN, Infinity and -Infinity are errors."""

    def refuse(word):
        raise ValueError(f"non-standard JSON constant {word}")

    return json.loads(text, parse_constant=refuse)


class Scalar:
    """A stand-in for a 0-d framework tensor, read at finalize."""

    def __init__(self, value):
        self.value, self.shape, self.dtype = value, (), "float64"

    def item(self):
        return self.value


def nodes(literal):
    stack = [literal]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("children", []))


def html_data(path) -> dict:
    page = path.read_text()
    found = re.search(r'<script id="proton-data" type="application/json">(.*?)</script>', page, re.S)
    return strict_loads(found.group(1))


# ------------------------------------------------------------------- the rule at the call ----
@pytest.mark.parametrize("value", [10**400, 2**1024, float("inf"), float("nan"), 10**5000],
                         ids=["1e400", "2^1024", "inf", "nan", "1e5000"])
def test_a_value_past_a_double_is_refused_in_one_line(value):
    with pytest.raises(ProtonError) as err:
        check_value("x", value)
    assert "\n" not in str(err.value) and "'x'" in str(err.value)
    assert len(str(err.value)) < 200  # 10**5000's digits are not printed


def test_the_largest_double_and_subnormals_are_accepted():
    assert check_value("x", MAX) == MAX
    assert check_value("x", 2**1023) == 2**1023
    assert check_value("x", 5e-324) == 5e-324
    with pytest.raises(ProtonError):
        read_tensor("x", Scalar(math.inf))


def test_scope_with_a_huge_int_raises_at_the_call(tmp_path):
    proton.start(str(tmp_path / "p"))
    with pytest.raises(ProtonError, match="past the largest"):
        with proton.scope("a", {"x": 10**400}):
            pass
    proton.finalize()
    assert strict_loads((tmp_path / "p.hatchet").read_text())


# ----------------------------------------------------------------- sums past a double ----
def test_sums_past_a_double_are_clamped_and_counted(tmp_path, capsys):
    proton.start(str(tmp_path / "p"))
    for name in ("a", "b"):
        for _ in range(2):
            with proton.scope(name, {"x": 1e308, "n": 2**1023, "t": Scalar(1e308), "p (pty)": MAX}):
                pass
    proton.finalize()
    doc = strict_loads((tmp_path / "p.hatchet").read_text())  # was: "x": Infinity
    by_name = {n["frame"]["name"]: n["metrics"] for n in nodes(doc[0])}
    for name in ("a", "b"):
        assert by_name[name] == {"x": MAX, "n": MAX, "t": MAX, "p": MAX, "clamped": 3}  # keys as upstream writes
    path = str(tmp_path / "p.hatchet")
    for args in (["-m", "x,n,x/%"], ["-l"], ["--html", str(tmp_path / "o.html")],
                 ["--speedscope", str(tmp_path / "o.json")]):
        assert viewer.main(args + [path]) == 0, args  # the root's sum (2 * MAX) was an OverflowError/ValueError
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "inf" not in out.out
    assert html_data(tmp_path / "o.html")
    strict_loads((tmp_path / "o.json").read_text())


def test_files_merged_past_a_double_still_export(tmp_path, capsys):
    paths = []
    for run in ("r1", "r2"):
        proton.start(str(tmp_path / run))
        with proton.scope("a", {"x": MAX, "y (exc)": MAX}):
            pass
        proton.finalize()
        paths.append(str(tmp_path / f"{run}.hatchet"))
    for args in (["-m", "x,y (exc)"], ["--html", str(tmp_path / "o.html")], ["--speedscope", str(tmp_path / "o.json")]):
        assert viewer.main(args + paths) == 0, (args, capsys.readouterr().err)  # y summed over files: inf
    assert "Traceback" not in capsys.readouterr().err
    data = html_data(tmp_path / "o.html")
    assert MAX in [v for tip in data["tip"] for v in tip]


def test_clamped_is_reserved():
    from proton_core.metrics import parse_name

    with pytest.raises(ProtonError, match="reserved"):
        parse_name("clamped")


# ------------------------------------------------------------------ upstream files ----
def test_viewer_reads_an_upstream_file_with_nonfinite_values_saying_so_in_one_line(tmp_path, capsys):
    path = tmp_path / "up.hatchet"
    # count marked on the root, as upstream's writer marks it: something --html can draw (the other keys,
    # unmarked, are per node in another writer's file)
    path.write_text('[{"frame":{"name":"ROOT","type":"function"},"metrics":{"count":0},"children":['
                    '{"frame":{"name":"a","type":"function"},"metrics":{"x":Infinity,"y":NaN,"z":1' + "0" * 400
                    + ',"w":3,"count":1},"children":[]}]},{}]')
    for args in (["-m", "z"], ["-m", "w"], ["-l"], ["--html", str(tmp_path / "o.html")]):
        code = viewer.main(args + [str(path)])
        err = capsys.readouterr().err
        assert "Traceback" not in err and "OverflowError" not in err
        warned = [line for line in err.splitlines() if "not a finite number" in line]
        assert len(warned) == 1 and "3 metric values" in warned[0], (args, err)
        assert code == (2 if args == ["-m", "z"] else 0), (args, err)


def test_triton_launch_metadata_past_a_double_takes_the_checking_path():
    triton_hook = pytest.importorskip("proton_frameworks.triton_hook")
    from proton_core.metrics import parse_name

    triton_hook._PLANS.clear()
    assert triton_hook._check(("flops",), {"flops": 10**400}) is False  # was accepted as a plain number
    assert triton_hook._check(("flops",), {"flops": MAX}) == ((parse_name("flops"), MAX),)


# --------------------------------------------------------------- property-based ----
VALID = st.one_of(
    st.integers(min_value=0, max_value=2**1024 - 2**970),  # up to the largest double, as an int
    st.floats(min_value=1e306, max_value=MAX),  # near the top: sums overflow
    st.floats(min_value=0, max_value=1e-300, allow_subnormal=True),  # subnormals
    st.sampled_from([0, 0.0, MAX, 2**1023, 5e-324]),
)
INVALID = st.one_of(
    st.integers(min_value=2**1024, max_value=2**4000),
    st.sampled_from([math.inf, math.nan, 10**400]),
)
KINDS = st.sampled_from(["", " (exc)", " (pty)"])
CALL = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), KINDS, st.one_of(VALID, INVALID),
                 st.booleans(), st.integers(1, 3))
_runs = iter(range(10**9))
_lock = threading.Lock()



@settings(max_examples=40, deadline=None, database=None,  # no .hypothesis folder left in the checkout
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(calls=st.lists(CALL, min_size=1, max_size=6))
def test_generated_extreme_values_write_strict_json_every_viewer_command_reads(tmp_path, capsys, calls):
    with _lock:
        run = next(_runs)
    stem = tmp_path / f"gen{run}"
    expected: dict = {}  # (scope, metric key) -> the exact value summed (or last, for properties)
    proton.start(str(stem))
    try:
        for scope, index, kind, value, as_tensor, times in calls:
            valid = value == value and 0 <= value <= MAX_VALUE
            # tensors get their own names: they are read at finalize, so a property's "last" value
            # mixed from tensors and numbers follows the read order, not the call order
            key = f"m{index}{'t' if as_tensor and valid else ''}{kind}"
            arg = Scalar(float(value)) if as_tensor and valid else value
            for _ in range(times):
                if not valid:
                    with pytest.raises(ProtonError) as err:
                        with proton.scope(scope, {key: arg}):
                            pass
                    assert "\n" not in str(err.value)
                    continue
                with proton.scope(scope, {key: arg}):
                    pass
                got = float(value) if as_tensor else value
                old = expected.get((scope, key))
                if kind == " (pty)" or old is None:
                    expected[(scope, key)] = got
                else:
                    try:
                        expected[(scope, key)] = old + got  # Python's own sum: ints exact, floats may reach inf
                    except OverflowError:  # an int past a double plus a float
                        expected[(scope, key)] = math.inf
    finally:
        proton.finalize()
    path = stem.with_suffix(".hatchet")
    doc = strict_loads(path.read_text())  # never NaN/Infinity
    names = doc[0].get("metadata", {}).get("metric_keys", {})  # file key -> the name the program used
    written = {n["frame"]["name"]: {names.get(k, k): v for k, v in n["metrics"].items()} for n in nodes(doc[0])}
    for scope in {s for s, _ in expected}:
        metrics = written[scope]
        over = 0
        for (s, key), value in expected.items():
            if s != scope:
                continue
            if value > MAX:
                over += 1
                assert metrics[key] == MAX, (key, value)
            else:
                assert metrics[key] == pytest.approx(value, rel=1e-9), (key, value)
        assert metrics.get("clamped", 0) == over
    for metrics in written.values():
        for value in metrics.values():
            assert isinstance(value, str) or (math.isfinite(value) and abs(value) <= MAX)
    keys = sorted({key for _, key in expected})
    html = stem.with_suffix(".html")
    drawable = any("(" not in key for key in keys)  # the flame graph draws inclusive metrics only
    commands = [["-l"]] + ([["-m", ",".join(keys)]] if keys else []) + ([["--html", str(html)]] if drawable else [])
    for args in commands:
        code = viewer.main(args + [str(path)])
        out = capsys.readouterr()
        assert code == 0, (args, out.err)
        assert "Traceback" not in out.err and "warning: " + str(path) not in out.err
    if drawable:
        html_data(html)
