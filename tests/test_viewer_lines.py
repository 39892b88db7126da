"""proton-view on instruction samples: -m samples / stall_<reason> (and /%), the default columns, and --lines."""

import re

import pytest

import proton_core as proton
from proton_core import viewer

NUM = r"(?:-?\d+\.\d+|-)"
ROW = re.compile(r"^\s*((?:" + NUM + r"\s+)+)\s*[│├└─ ]*(\S.*?)(?: — .*)?$")

SOURCE = ["import triton", "", "    acc += tl.dot(a,   b)   ", "", "    tl.store(c_ptr, acc)", "",
          "    x = tl.exp(x - m)  # " + "y" * 120]


def run(capsys, *argv):
    rc = viewer.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def show(capsys, *argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    return out


def rows(out):
    """{frame name: [values]} of the printed tree (the first frame of each name)."""
    lines = out.splitlines()
    found = {}
    for line in lines[1:]:
        m = ROW.match(line)
        assert m, line
        found.setdefault(m.group(2), [None if x == "-" else float(x) for x in m.group(1).split()])
    return lines[0].split(), found


def blocks(out):
    """--lines output as [(title, header, [[samples, share, reasons, line, source], ...], tail lines)]."""
    parsed = []
    for text in out.strip("\n").split("\n\n"):
        title, header, *body = text.split("\n")
        table = [re.split(r"\s{2,}", row.strip()) for row in body if not row.startswith("...")]
        parsed.append((title, header, table, [row for row in body if row.startswith("...")]))
    return parsed


@pytest.fixture
def sampled(tmp_path, fake):
    """matmul_kernel under fwd and bwd, softmax_kernel under fwd; lines of a real file, a missing one, a SASS offset."""
    src = tmp_path / "kern.py"
    src.write_text("\n".join(SOURCE) + "\n")
    line = lambda n: f"{src}:{n}"  # noqa: E731
    missing = str(tmp_path / "gone.py") + ":9"
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("fwd"):
        fake.launch("matmul_kernel", 3000, inner=[
            ((line(3),), {"samples": 60, "stall_long_scoreboard": 30, "stall_long_scoreboard_not_issued": 28,
                          "stall_wait": 20, "stall_math_pipe_throttle": 6, "stall_barrier": 4}),
            ((line(5),), {"samples": 20, "stall_wait": 15, "stall_barrier": 5}),
            (("sass+0x1a0",), {"samples": 10, "stall_barrier": 10})])
        fake.launch("softmax_kernel", 1000, inner=[((line(7),), {"samples": 15, "stall_barrier": 15})])
    with proton.scope("bwd"):
        fake.launch("matmul_kernel", 2000, inner=[
            ((line(3),), {"samples": 40, "stall_long_scoreboard": 32, "stall_wait": 8}),
            ((missing,), {"samples": 5, "stall_wait": 5})])
    proton.finalize()
    return tmp_path / "p.hatchet", src, missing


def test_samples_and_stall_columns_and_their_percent_forms(capsys, sampled):
    path, src, _ = sampled
    header, found = rows(show(capsys, "-m", "samples,samples/%,stall_wait,stall_wait/%,stall_barrier/%", path))
    assert header == ["samples", "samples/%", "stall_wait", "stall_wait/%", "stall_barrier/%", "name"]
    assert found["ROOT"] == [150.0, 100.0, 48.0, 100.0, 100.0]
    assert found["fwd"] == [105.0, 70.0, 35.0, 72.917, 100.0]
    assert found["bwd"] == [45.0, 30.0, 13.0, 27.083, None]
    assert found["matmul_kernel"] == [90.0, 60.0, 35.0, 72.917, 55.882]  # fwd's: the first printed
    assert found[f"{src}:3"] == [60.0, 40.0, 20.0, 41.667, 11.765]
    assert found["sass+0x1a0"] == [10.0, 6.667, None, None, 29.412]


def test_default_columns_time_with_samples_or_samples_alone(capsys, sampled, tmp_path, fake):
    path, _, _ = sampled
    header, found = rows(show(capsys, path))
    assert header == ["time/ns", "samples", "name"]
    assert found["fwd"] == [4000.0, 105.0] and found["sass+0x1a0"] == [None, 10.0]
    proton.start(str(tmp_path / "only"), backend="fake")  # samples, no kernel records: no time at all
    with proton.scope("s"):
        fake.backend.sample("k", [(("/x.py:1",), {"samples": 4})])
    proton.finalize()
    header, found = rows(show(capsys, tmp_path / "only.hatchet"))
    assert header == ["samples", "name"] and found["s"] == [4.0] and found["/x.py:1"] == [4.0]


def test_list_names_sample_metrics_and_kernels_with_lines(capsys, sampled):
    out = show(capsys, "-l", sampled[0])
    assert "  samples                      inclusive" in out
    assert "  stall_long_scoreboard        inclusive" in out
    derived = [line for line in out.splitlines() if line.startswith("derived metrics available:")][0]
    assert derived.endswith("samples/%, stall_long_scoreboard/%, stall_long_scoreboard_not_issued/%, "
                            "stall_wait/%, stall_math_pipe_throttle/%, stall_barrier/%")
    assert out.splitlines()[-1] == "per-line listing: --lines REGEX, for kernels: matmul_kernel, softmax_kernel"


def test_lines_sums_contexts_sorts_and_names_top_stall_reasons_with_source(capsys, sampled):
    path, src, missing = sampled
    out = show(capsys, "--lines", "matmul", path)
    (title, header, table, tail), = blocks(out)
    assert title == "kernel matmul_kernel — 135 samples, 4 lines, 2 calling contexts"
    assert header.split() == ["samples", "kernel%", "top", "stall", "reasons", "line", "source"]
    assert table == [
        ["100", "74.1%", "long_scoreboard 62%, wait 28%, math_pipe_throttle 6%", f"{src}:3", "acc += tl.dot(a, b)"],
        ["20", "14.8%", "wait 75%, barrier 25%", f"{src}:5", "tl.store(c_ptr, acc)"],
        ["10", "7.4%", "barrier 100%", "sass+0x1a0"],  # no source for an offset
        ["5", "3.7%", "wait 100%", missing],  # the file is gone: no text, no error
    ]
    assert tail == []


def test_lines_blocks_per_kernel_largest_first_long_source_cut_and_top_limit(capsys, sampled):
    path, src, _ = sampled
    out = show(capsys, "--lines", "kernel$", "--lines-top", "2", path)
    (t1, _, table1, tail1), (t2, _, table2, tail2) = blocks(out)
    assert t1.startswith("kernel matmul_kernel — 135 samples") and [r[0] for r in table1] == ["100", "20"]
    assert tail1 == ["... 2 more (15 samples, 11.1%); --lines-top N shows more"]
    assert t2 == "kernel softmax_kernel — 15 samples, 1 line, 1 calling context"
    (row,) = table2
    assert row[:4] == ["15", "100.0%", "barrier 100%", f"{src}:7"]
    assert row[4] == ("x = tl.exp(x - m) # " + "y" * 120)[:77] + "..." and len(row[4]) == 80  # blanks collapsed
    assert tail2 == []


def test_lines_of_a_kernel_node_itself_and_of_a_callee_count_in_the_total(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[((), {"samples": 2, "stall_wait": 2}), (("helper", "/a.py:1"), {"samples": 6}),
                            (("helper",), {"samples": 1}), (("/a.py:1",), {"samples": 2})])
    proton.finalize()
    (title, _, table, _), = blocks(show(capsys, "--lines", "^k$", tmp_path / "p.hatchet"))
    assert title == "kernel k — 11 samples, 1 line, 1 calling context"
    assert table == [["8", "72.7%", "-", "/a.py:1"], ["2", "18.2%", "wait 100%", "(kernel)"],
                     ["1", "9.1%", "-", "helper"]]


def test_lines_count_another_metric_with_m(capsys, tmp_path, fake):
    """The listing is generic: intra-kernel scopes with cycles, say, are listed with -m cycles."""
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[(("load",), {"cycles": 300}), (("mma",), {"cycles": 700})])
    proton.finalize()
    rc, _, err = run(capsys, "--lines", "k", tmp_path / "p.hatchet")
    assert rc == 2 and err.startswith("proton-view: --lines counts 'samples' but the profile has only: ")
    (title, header, table, _), = blocks(show(capsys, "--lines", "k", "-m", "cycles", tmp_path / "p.hatchet"))
    assert title == "kernel k — 1000 cycles, 0 lines, 1 calling context"
    assert header.split()[:2] == ["cycles", "kernel%"]
    assert table == [["700", "70.0%", "-", "mma"], ["300", "30.0%", "-", "load"]]


def test_lines_on_merged_files_and_part_globs(capsys, sampled, tmp_path, fake):
    path, src, _ = sampled
    copy = tmp_path / "again.hatchet"
    copy.write_bytes(path.read_bytes())
    (title, _, table, _), = blocks(show(capsys, "--lines", "matmul", path, copy))
    assert title == "kernel matmul_kernel — 270 samples, 4 lines, 2 calling contexts"
    assert [r[:2] for r in table] == [["200", "74.1%"], ["40", "14.8%"], ["20", "7.4%"], ["10", "3.7%"]]
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=60")
    for n in (1, 2, 3):
        fake.launch("k", inner=[((f"{src}:3",), {"samples": n})])
        proton.data.advance_phase(sid)
    proton.finalize(sid)
    (title, _, table, _), = blocks(show(capsys, "--lines", "k", str(tmp_path / "run.part_*.hatchet")))
    assert title == "kernel k — 6 samples, 1 line, 1 calling context" and table[0][0] == "6"
    (title, _, _, _), = blocks(show(capsys, "--lines", "k", "--phase", "1", str(tmp_path / "run.part_*.hatchet")))
    assert title == "kernel k — 2 samples, 1 line, 1 calling context"


def test_lines_follow_include_and_exclude(capsys, sampled):
    (title, _, table, _), = blocks(show(capsys, "--lines", "matmul", "-e", "^bwd$", sampled[0]))
    assert title == "kernel matmul_kernel — 90 samples, 3 lines, 1 calling context"
    assert [r[0] for r in table] == ["60", "20", "10"]


def test_print_sorted_still_lists_kernels_with_lines(capsys, sampled):
    out = show(capsys, "-m", "samples", "--print-sorted", sampled[0])
    listed = out.split("kernels sorted by samples:")[1].strip().splitlines()[1:]
    rows = [line.split() for line in listed]
    assert len(rows) == 11  # every frame but the root (decision 0223), lines included
    assert [r for r in rows if r[0].endswith("_kernel")] == [["matmul_kernel", "90.000"], ["matmul_kernel", "45.000"],
                                                             ["softmax_kernel", "15.000"]]


def test_lines_errors_are_one_line_and_exit_2(capsys, sampled, tmp_path, fake):
    path = sampled[0]
    rc, out, err = run(capsys, "--lines", "nothing_like_it", path)
    assert rc == 2 and out == ""
    assert err == ("proton-view: --lines 'nothing_like_it' matches no kernel with per-line data; kernels that have "
                   "lines: matmul_kernel, softmax_kernel\n")
    rc, _, err = run(capsys, "--lines", "mat(mul", path)
    assert rc == 2 and err.startswith("proton-view: --lines 'mat(mul' is not a valid regular expression: ")
    assert err.count("\n") == 1
    rc, _, err = run(capsys, "--lines", "matmul", "--html", tmp_path / "x.html", path)
    assert rc == 2 and err == "proton-view: --lines prints a per-line listing; leave out --html\n"
    rc, _, err = run(capsys, "--lines", "matmul", "--lines-top", "0", path)
    assert rc == 2 and err == "proton-view: --lines-top must be 1 or more, not 0\n"
    proton.start(str(tmp_path / "plain"), backend="fake")
    fake.launch("k")
    proton.finalize()
    rc, _, err = run(capsys, "--lines", "k", tmp_path / "plain.hatchet")
    assert rc == 2 and err == (f"proton-view: no kernel in {tmp_path / 'plain.hatchet'} has per-line data "
                               "(record it with mode=\"pcsampling\")\n")


def test_no_match_lists_at_most_five_kernels(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    for n in range(7):
        fake.launch(f"k{n}", inner=[(("/a.py:1",), {"samples": 1})])
    proton.finalize()
    rc, _, err = run(capsys, "--lines", "zzz", tmp_path / "p.hatchet")
    assert rc == 2 and err.endswith("kernels that have lines: k0, k1, k2, k3, k4 (+2 more)\n")
