"""proton-view on profiles written by the core with the fake and host backends: printed numbers."""

import json
import re
import subprocess
import sys

import pytest

import proton_core as proton
from proton_core.testing import load_profile as load
from proton_core import viewer
from proton_core.viewer import peaks

NUM = r"(?:-?(?:\d+\.\d+|inf)|-)"  # a printed value; "-" where the node has none
LINE = re.compile(r"^\s*((?:" + NUM + r"\s+)+)\s*[│├└─ ]*(?:\[level \d+\] )?(\S.*?)(?: — .*)?$")


def show(capsys, *argv):
    rc = viewer.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def tree(out):
    """(name, values) of each tree line: the lines after the header, up to the kernel list."""
    lines = out.split("kernels sorted by")[0].splitlines()
    assert lines[0].split()[-1] == "name", lines[0]  # the header names every column
    parsed = []
    for line in lines[1:]:
        m = LINE.match(line)
        assert m, f"not a tree line: {line!r}"
        parsed.append((m.group(2), [None if x == "-" else float(x) for x in m.group(1).split()]))
    return parsed


def row(out, name):
    """The numbers printed on the tree line of frame ``name`` (None for a blank)."""
    for frame, values in tree(out):
        if frame == name:
            return values
    raise AssertionError(f"no tree line for {name!r} in:\n{out}")


def names(out):
    return [frame for frame, _ in tree(out)]


@pytest.fixture
def two_kernels(tmp_path, fake):
    """ROOT/outer/{k1: 3000 ns, k2: 1000 ns}, outer carries flops16 and bytes."""
    proton.start(str(tmp_path / "a"), backend="fake")
    with proton.scope("outer", metrics={"flops16": 4e6, "bytes": 2e6}):
        fake.launch("k1", 3000)
        fake.launch("k2", 500)
        fake.launch("k2", 500)
    proton.finalize()
    return tmp_path / "a.hatchet"


def test_time_units_average_and_percent(capsys, two_kernels):
    out = show(capsys, "-m", "time/us,avg_time/ns,time/%,count", two_kernels)
    assert row(out, "outer") == [4.0, 1333.333, 100.0, 3.0]
    assert row(out, "k1") == [3.0, 3000.0, 75.0, 1.0]
    assert row(out, "k2") == [1.0, 500.0, 25.0, 2.0]
    assert row(out, "ROOT")[0] == 4.0
    assert "4.000" in out and "75.000" in out


def test_time_scales(capsys, two_kernels):
    out = show(capsys, "-m", "time/ns,time/ms,time/s", two_kernels)
    assert row(out, "k1") == [3000.0, 0.003, 0.0]


def test_flop_and_byte_rates(capsys, two_kernels):
    # 4e6 flops in 4000 ns = 1e12 flop/s; 2e6 bytes in 4000 ns = 0.5 TB/s
    out = show(capsys, "-m", "tflop16/s,gflop16/s,tbyte/s,gbyte/s", two_kernels)
    assert row(out, "outer") == [1.0, 1000.0, 0.5, 500.0]
    out = show(capsys, "-m", "tflop/s", two_kernels)  # plain flop/s sums the widths present
    assert row(out, "outer") == [1.0]


def test_cpu_time_is_not_summed_into_parents(capsys, tmp_path):
    proton.start(str(tmp_path / "c"), backend="host")
    with proton.cpu_timed_scope("parent"):
        with proton.cpu_timed_scope("child"):
            sum(range(10000))
    proton.finalize()
    root = load(tmp_path / "c.hatchet")[0]
    parent = root["children"][0]
    child = parent["children"][0]
    out = show(capsys, "-m", "cpu_time/ns", tmp_path / "c.hatchet")
    assert row(out, "parent") == [pytest.approx(parent["metrics"]["cpu_time (ns)"], abs=1e-3)]
    assert row(out, "child") == [pytest.approx(child["metrics"]["cpu_time (ns)"], abs=1e-3)]
    out = show(capsys, "-m", "cpu_time/us", tmp_path / "c.hatchet")
    assert row(out, "parent")[0] == pytest.approx(parent["metrics"]["cpu_time (ns)"] / 1000, abs=1e-3)


def test_diff_profile(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "new"), backend="fake")
    with proton.scope("s"):
        fake.launch("k1", 5000)
        fake.launch("only_new", 100)
    proton.finalize()
    proton.start(str(tmp_path / "old"), backend="fake")
    with proton.scope("s"):
        fake.launch("k1", 2000)
        fake.launch("only_old", 300)
    proton.finalize()
    out = show(capsys, "-m", "time/ns", tmp_path / "new.hatchet", "--diff-profile", tmp_path / "old.hatchet")
    assert row(out, "k1") == [3000.0]
    assert row(out, "only_new") == [100.0]
    assert row(out, "only_old") == [-300.0]
    assert row(out, "s") == [2800.0]
    # upstream's single-dash spelling, before the profile as its help shows it
    assert show(capsys, "-m", "time/ns", "-diff", tmp_path / "old.hatchet", tmp_path / "new.hatchet") == out


def test_include_exclude_depth_threshold(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "f"), backend="fake")
    with proton.scope("fwd"):
        fake.launch("matmul", 3000)
        fake.launch("relu", 1000)
    with proton.scope("bwd"):
        fake.launch("matmul_grad", 200)
    proton.finalize()
    path = tmp_path / "f.hatchet"

    out = show(capsys, "-m", "time/ns", "-i", "^relu$", path)
    assert row(out, "fwd") == [1000.0] and row(out, "ROOT") == [1000.0]
    assert "matmul" not in out and "bwd" not in out

    out = show(capsys, "-m", "time/ns", "-e", "matmul", path)
    assert row(out, "ROOT") == [1000.0]
    assert set(names(out)) == {"ROOT", "fwd", "relu", "bwd"}

    # -d counts ROOT as level 1, as upstream's viewer (hatchet's tree depth) does
    out = show(capsys, "-m", "time/ns", "-d", "2", path)
    assert set(names(out)) == {"ROOT", "fwd", "bwd"}
    assert row(out, "fwd") == [4000.0] and row(out, "bwd") == [200.0]
    assert names(show(capsys, "-m", "time/ns", "--depth=1", path)) == ["ROOT"]
    assert set(names(show(capsys, "-m", "time/ns", "-d3", path))) == {"ROOT", "fwd", "bwd", "matmul", "relu",
                                                                     "matmul_grad"}

    out = show(capsys, "-m", "time/ns", "-t", "500", path)
    assert set(names(out)) == {"ROOT", "fwd", "matmul", "relu"}


def test_print_sorted_orders_kernels_by_first_metric(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("a"):
        fake.launch("small", 10)
        fake.launch("large", 900)
    with proton.scope("b"):
        fake.launch("medium", 90)
    proton.finalize()
    out = show(capsys, "-m", "time/%,time/ns", "--print-sorted", tmp_path / "p.hatchet")
    listing = out.split("kernels sorted by time/%:")[1].splitlines()[2:]
    # every frame but the root, as upstream's --print-sorted lists them (decision 0223)
    assert [line.split()[0] for line in listing] == ["a", "large", "b", "medium", "small"]
    assert [float(line.split()[1]) for line in listing] == [91.0, 90.0, 9.0, 9.0, 1.0]
    assert float(listing[1].split()[2]) == 900.0
    shallow = show(capsys, "-m", "time/%,time/ns", "--print-sorted", "-d", "2", tmp_path / "p.hatchet")
    assert "large" not in shallow.split("kernels sorted by")[0]  # -d limits the tree, not the kernel list
    assert shallow.split("kernels sorted by")[1] == out.split("kernels sorted by")[1]


def test_frame_formats(capsys, tmp_path, fake):
    def launcher():
        fake.launch("kern", 10)

    proton.start(str(tmp_path / "py"), backend="fake", context="python")
    launcher()
    proton.finalize()
    path = tmp_path / "py.hatchet"
    full = show(capsys, "-m", "time/ns", "-f", "full", path)
    frame = next(n for n in names(full) if n.endswith("@launcher"))  # upstream's file:line@function
    assert frame.startswith("/") and frame.split(":")[0].endswith("test_viewer.py")
    line = frame.rsplit(":", 1)[1].split("@")[0]
    assert line == str(launcher.__code__.co_firstlineno + 1)
    # what upstream's viewer prints for each -f
    assert f"test_viewer.py:{line}@launcher" in names(show(capsys, "-f", "file_function_line", path))
    assert f"{line}@launcher" in names(show(capsys, "-f", "function_line", path))
    assert "test_viewer.py@launcher" in names(show(capsys, "-f", "file_function", path))
    assert "kern" in names(show(capsys, "-f", "file_function", path))  # kernels are not frames


OLD_SPELLING = [
    {"frame": {"name": "ROOT", "type": "function"}, "metrics": {},
     "children": [
         {"frame": {"name": "/src/train.py:main@12", "type": "function"}, "metrics": {},
          "children": [{"frame": {"name": "/src/model.py:<lambda>@7", "type": "function"}, "metrics": {},
                        "children": [{"frame": {"name": "gemm", "type": "function"},
                                      "metrics": {"time (ns)": 50, "count": 1}, "children": []}]}]},
         {"frame": {"name": "ns::op@3", "type": "function"}, "metrics": {"time (ns)": 1, "count": 1},
          "children": []},
     ]},
    {},
]


@pytest.mark.parametrize("style, frames", [
    ("full", ["/src/train.py:12@main", "/src/model.py:7@<lambda>"]),
    ("file_function_line", ["train.py:12@main", "model.py:7@<lambda>"]),
    ("function_line", ["12@main", "7@<lambda>"]),
    ("file_function", ["train.py@main", "model.py@<lambda>"]),
])
def test_frame_formats_read_the_old_spelling(capsys, tmp_path, style, frames):
    """Profiles written before the switch (file:function@line) come out in upstream's spelling."""
    path = tmp_path / "old.hatchet"
    path.write_text(json.dumps(OLD_SPELLING))
    assert sorted(names(show(capsys, "-f", style, path))) == sorted(["ROOT", *frames, "gemm", "ns::op@3"])


def test_diff_matches_old_and_new_spellings(capsys, tmp_path):
    new = json.loads(json.dumps(OLD_SPELLING))
    train = new[0]["children"][0]
    train["frame"]["name"] = "/src/train.py:12@main"
    train["children"][0]["frame"]["name"] = "/src/model.py:7@<lambda>"
    train["children"][0]["children"][0]["metrics"]["time (ns)"] = 80
    (tmp_path / "old.hatchet").write_text(json.dumps(OLD_SPELLING))
    (tmp_path / "new.hatchet").write_text(json.dumps(new))
    out = show(capsys, "-m", "time/ns", "-diff", tmp_path / "old.hatchet", tmp_path / "new.hatchet")
    assert row(out, "/src/model.py:7@<lambda>") == [30.0] and row(out, "gemm") == [30.0]


def test_list_metrics(capsys, two_kernels):
    out = show(capsys, "-l", two_kernels)
    assert re.search(r"time \(ns\)\s+inclusive", out)
    assert re.search(r"flops16\s+inclusive", out)
    assert "[g|t]flop16/s" in out and "util" in out


UPSTREAM = [
    {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"time (ns)": 0, "count": 0, "some_new_metric": 5},
     "children": [
         {"frame": {"name": "matmul_kernel", "type": "function"},
          "metrics": {"time (ns)": 2000000, "count": 2, "device_id": "0", "device_type": "CUDA",
                      "flops16": 1.0e12, "bytes": 1.0e9, "flops8": 0, "note": "ignored text"},
          "children": []},
         {"frame": {"name": "__proton_launch_metadata", "type": "function"},
          "metrics": {"time (ns)": 7, "count": 1, "device_id": "0", "device_type": "CUDA"}},
         {"frame": {"name": "gemm", "type": "python"},
          "metrics": {"time (ns)": 1000000, "count": 1, "device_id": "0", "device_type": "HIP",
                      "flops16": 1.3074e12},
          "children": []},
     ]},
    {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                    "bus_width": 5120}},
     "HIP": {"0": {"arch": "gfx942:sramecc+:xnack-", "num_sms": 304, "clock_rate": 2100000,
                   "memory_clock_rate": 1300000, "bus_width": 8192}},
     "extra": "field"},
]


def test_upstream_file_and_util(capsys, tmp_path):
    path = tmp_path / "upstream.hatchet"
    path.write_text(json.dumps(UPSTREAM))
    out = show(capsys, "-m", "time/ms,util", path)
    assert "__proton_launch_metadata" not in out
    # H100 SXM: 756.5 TFLOP/s scaled by 132/114 SMs and 1980/1755 MHz
    peak16 = 756.5e12 * 132 / 114 * 1980000 / 1755000
    assert peak16 == pytest.approx(988.2e12, rel=1e-3)
    time_ms, util = row(out, "matmul_kernel")
    assert time_ms == 2.0
    assert util == pytest.approx(1.0e12 / peak16 / 2e-3, abs=1e-3)
    assert row(out, "gemm") == [1.0, pytest.approx(1.0, abs=1e-3)]  # MI300X: 1307.4 TFLOP/s fp16
    assert row(out, "ROOT")[0] == 3.0


def test_peak_bandwidth_and_tables():
    h100 = {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000, "bus_width": 5120}
    assert peaks.peak_bandwidth("CUDA", h100) == pytest.approx(3.352e12, rel=1e-3)
    assert peaks.peak_flops("CUDA", h100, 8) == pytest.approx(1979e12, rel=2e-3)
    a100 = {"arch": "80", "num_sms": 108, "clock_rate": 1410000}
    assert peaks.peak_flops("CUDA", a100, 16) == 312e12
    mi250x_gcd = {"arch": "gfx90a", "num_sms": 110, "clock_rate": 1700000}
    assert peaks.peak_flops("HIP", mi250x_gcd, 16) == pytest.approx(1024 * 110 * 1700000e3 / 2)  # upstream's formula
    for key in [("CUDA", "80"), ("CUDA", "89"), ("CUDA", "90"), ("CUDA", "100"), ("HIP", "gfx90a"), ("HIP", "gfx942")]:
        assert key in peaks.PEAKS


# ----------------------------------------------------------------- bad input ----
def bad(capsys, *argv):
    rc = viewer.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bad_inputs_are_one_line_exit_2(capsys, tmp_path, two_kernels):
    assert "no such file" in bad(capsys, "-m", "time/s", tmp_path / "missing.hatchet")
    (tmp_path / "text.hatchet").write_text("this is not json")
    assert "not JSON" in bad(capsys, tmp_path / "text.hatchet")
    (tmp_path / "bin.hatchet").write_bytes(b"\xff\xfe\x00\x01")
    assert "not JSON" in bad(capsys, tmp_path / "bin.hatchet")
    (tmp_path / "list.hatchet").write_text("[1, 2, 3]")
    assert "not a Proton profile" in bad(capsys, tmp_path / "list.hatchet")
    (tmp_path / "node.hatchet").write_text('[{"frame": {"name": "ROOT"}, "children": [{"metrics": {}}]}, {}]')
    assert "not a Proton profile" in bad(capsys, tmp_path / "node.hatchet")
    assert "unknown metric 'nosuch'" in bad(capsys, "-m", "nosuch", two_kernels)
    assert "needs 'flops32'" in bad(capsys, "-m", "flop32/s", two_kernels)
    assert "not a valid regular expression" in bad(capsys, "-i", "(", two_kernels)
    assert "-d/--depth" in bad(capsys, "-d", "-1", two_kernels)
    assert "-d/--depth counts ROOT as level 1" in bad(capsys, "-d", "0", two_kernels)


@pytest.mark.parametrize("argv, message", [
    (["-d", "x", "p.hatchet"], "argument -d/--depth: invalid int value: 'x'"),
    (["-f", "short", "p.hatchet"], "argument -f/--format: invalid choice: 'short'"),
    ([], "the following arguments are required: profile"),
    (["--bogus", "p.hatchet"], "unrecognized arguments: --bogus"),
])
def test_bad_command_lines_are_one_line_exit_2(capsys, argv, message):
    err = bad(capsys, *argv)
    assert err.startswith("proton-view: ") and message in err


def test_version(capsys):
    from proton_core._version import __version__

    assert viewer.main(["--version"]) == 0
    assert capsys.readouterr().out == f"proton-view {__version__}\n"


def test_bad_input_missing_metric_for_derived_form(capsys, tmp_path):
    proton.start(str(tmp_path / "h"), backend="host")
    with proton.cpu_timed_scope("s"):
        pass
    proton.finalize()
    assert "needs 'time'" in bad(capsys, "-m", "time/ms", tmp_path / "h.hatchet")
    assert "needs 'flops16'" in bad(capsys, "-m", "flop16/s", tmp_path / "h.hatchet")


def test_util_unknown_arch_is_one_line(capsys, tmp_path):
    doc = json.loads(json.dumps(UPSTREAM))
    doc[1]["CUDA"]["0"]["arch"] = "75"
    path = tmp_path / "t4.hatchet"
    path.write_text(json.dumps(doc))
    assert "no peak FLOP/s table for CUDA arch '75'" in bad(capsys, "-m", "util", path)


def test_the_terminal_view_needs_no_hatchet(tmp_path, two_kernels):
    """The tree is drawn by the viewer itself; llnl-hatchet is only for load_graphframe, which says how to get it."""
    shadow = tmp_path / "shadow" / "hatchet"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    env = {"PYTHONPATH": str(tmp_path / "shadow"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "proton_core.viewer", "-m", "time/ns", str(two_kernels)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert row(proc.stdout, "k1") == [3000.0]
    code = f"from proton_core.viewer import load_graphframe; load_graphframe({str(two_kernels)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "llnl-hatchet is not installed: pip install proton-profiler[viewer]" in proc.stderr


# ------------------------------------------------------------- part files ----
@pytest.fixture
def parts(tmp_path, fake):
    """Three phases of a periodic-flushing run: 1, 2 and 4 launches of k under 'step'."""
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing")
    for n in (1, 2, 4):
        with proton.scope("step", {"tokens": n}):
            for _ in range(n):
                fake.launch("k", 100)
        proton.data.advance_phase(sid)
    assert len(proton.finalize(sid)) == 3
    return tmp_path


def test_part_files_show_merged_from_a_glob_or_a_list(capsys, parts):
    merged = show(capsys, "-m", "count,tokens", str(parts / "run.part_*.hatchet"))
    assert row(merged, "k")[0] == 7 and row(merged, "step")[1] == 7
    listed = show(capsys, "-m", "count", parts / "run.part_0.hatchet", parts / "run.part_2.hatchet")
    assert row(listed, "k")[0] == 5


def test_one_phase_alone(capsys, parts):
    out = show(capsys, "-m", "count", "--phase", "1", str(parts / "run.part_*.hatchet"))
    assert row(out, "k")[0] == 2
    assert "part_7" in bad(capsys, "--phase", "7", str(parts / "run.part_*.hatchet"))
    assert "no file matches" in bad(capsys, str(parts / "nothing_*.hatchet"))


def test_a_host_only_profile_opens_on_cpu_time(tmp_path, capsys):
    """Without -m, a profile with no kernel time shows cpu_time (what covers it), not the first metric
    (flops, which two nodes carry), as --html and load_graphframe open on it."""
    proton.start(str(tmp_path / "h"), backend="host")
    with proton.cpu_timed_scope("step"):
        with proton.scope("fwd", {"flops": 10}):
            pass
        with proton.cpu_timed_scope("bwd"):
            pass
    proton.finalize()
    out = show(capsys, str(tmp_path / "h.hatchet"))
    assert "cpu_time" in out.splitlines()[0] and "flops" not in out.splitlines()[0], out
