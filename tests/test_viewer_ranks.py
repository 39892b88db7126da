"""proton-view over a distributed run's rank files: merged numbers, imbalance, --rank, runs mixed, ranks missing
or killed.

tests/data/ranks/run.rank{0..3}.hatchet were written by Proton (fake backend) with the "distributed" metadata
added: ROOT / step / fwd / gemm (100, 200, 300, 1000 ns on ranks 0-3), step / bwd / ag (500 ns on each).
"""

import json
import os
import shutil
from pathlib import Path

import pytest

import proton_core as proton
from proton_core import viewer

DATA = Path(__file__).parent / "data" / "ranks"


def run_view(capsys, *argv):
    code = viewer.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict:
    """name -> [numbers..., slowest] of the merged tree's lines."""
    found = {}
    for line in out.splitlines()[1:]:
        cells = line.split("  ")
        cells = [c.strip() for c in cells if c.strip()]
        name = cells[-1].split(" — ")[0].lstrip("│├└─ ")
        found[name] = [float(c) for c in cells[:5]] + [cells[5]]
    return found


def write_rank(tmp_path, fake, rank, world, launches, run_id="job1", part=None, final=None, name="run"):
    """A rank file as the ranks writer leaves it: Proton's own file plus metadata["distributed"]."""
    proton.start(str(tmp_path / f"scratch{rank}_{part}"), backend="fake")
    with proton.scope("step"):
        for scope, kernels in launches.items():
            with proton.scope(scope):
                for kernel, ns in kernels:
                    fake.launch(kernel, ns)
    proton.finalize()
    scratch = tmp_path / f"scratch{rank}_{part}.hatchet"
    doc = json.loads(scratch.read_text())
    scratch.unlink()
    meta = doc[0]["metadata"]
    meta["distributed"] = {"rank": rank, "world_size": world, "local_rank": rank, "node_rank": 0, "host": "h",
                           "pid": 1000 + rank, "device": rank, "run_id": run_id, "launcher": "torchrun",
                           "backend": "gloo"}
    if part is not None:
        meta["part"], meta["final"] = part, bool(final)
    suffix = f".part_{part}" if part is not None else ""
    path = tmp_path / f"{name}.rank{rank}{suffix}.hatchet"
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


def test_merged_numbers_are_exact(capsys):
    code, out, err = run_view(capsys, *sorted(DATA.glob("run.rank*.hatchet")))
    assert code == 0, err
    assert out.splitlines()[0].split() == ["time/ns", "rank", "min", "rank", "median", "rank", "max", "imbalance",
                                           "slowest", "name"]
    got = rows(out)
    assert got["ROOT"] == [3600, 600, 750, 1500, 0.4, "3"]
    assert got["step"] == [3600, 600, 750, 1500, 0.4, "3"]
    assert got["fwd"] == got["gemm"] == [1600, 100, 250, 1000, 0.6, "3"]  # (1000 - 400) / 1000
    assert got["bwd"] == got["ag"] == [2000, 500, 500, 500, 0.0, "0"]
    assert "4 ranks of 4, run job1" in out
    assert err == ""


def test_directory_and_prefix_name_the_same_run(capsys):
    by_files = run_view(capsys, *sorted(DATA.glob("run.rank*.hatchet")))[1]
    assert run_view(capsys, DATA)[1] == by_files
    assert run_view(capsys, DATA / "run")[1] == by_files


def test_sort_imbalance_lists_most_imbalanced_first(capsys):
    code, out, err = run_view(capsys, "--sort", "imbalance", DATA)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("frames sorted by imbalance of time/ns")
    paths = [line.split("  ")[-1].strip() for line in lines[2:]]
    assert paths == ["step > fwd", "step > fwd > gemm", "step", "step > bwd", "step > bwd > ag"]
    assert lines[2].split()[4:6] == ["0.600", "3"]


def test_rank_shows_one_rank(capsys):
    code, out, err = run_view(capsys, "--rank", "2", DATA)
    assert code == 0, err
    values = {line.split()[-1]: float(line.split()[0]) for line in out.splitlines()[1:] if " — " not in line}
    assert values == {"step": 800.0, "fwd": 300.0, "gemm": 300.0, "bwd": 500.0, "ag": 500.0}
    assert "rank min" not in out
    code, out, err = run_view(capsys, "--rank", "7", DATA)
    assert code == 2 and err == "proton-view: --rank 7: no file of rank 7 among these (ranks 0, 1, 2, 3)\n"


def test_metrics_other_than_time(capsys):
    code, out, err = run_view(capsys, "-m", "time/us,count", DATA)
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert header[:2] == ["time/us", "count"]
    gemm = next(line for line in out.splitlines() if line.endswith("gemm")).split()
    assert [float(v) for v in gemm[:6]] == [1.6, 4, 0.1, 0.25, 1.0, 0.6]


def test_runs_mixed_are_refused_unless_forced(tmp_path, fake, capsys):
    for rank, run_id in ((0, "jobA"), (1, "jobB")):
        write_rank(tmp_path, fake, rank, 2, {"fwd": [("gemm", 100 * (rank + 1))]}, run_id=run_id)
    code, out, err = run_view(capsys, tmp_path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "different runs" in err and "--force" in err
    assert "jobA" in err and "jobB" in err
    code, out, err = run_view(capsys, "--force", tmp_path)
    assert code == 0, err
    assert rows(out)["gemm"][:4] == [300, 100, 150, 200]
    assert "2 runs added up (--force)" in out


def test_missing_rank_is_named(tmp_path, fake, capsys):
    for rank in (0, 1, 3):
        write_rank(tmp_path, fake, rank, 4, {"fwd": [("gemm", 100)]})
    code, out, err = run_view(capsys, tmp_path / "run")
    assert code == 0
    assert "proton-view: warning: rank 2 of 4 is missing: merged 3 of 4 ranks\n" in err
    assert rows(out)["gemm"][0] == 300


def test_parts_of_a_rank_are_summed_and_a_killed_rank_is_reported(tmp_path, fake, capsys):
    # rank 0 finished (its last part final); rank 1 was killed after part 1 (no final part)
    write_rank(tmp_path, fake, 0, 2, {"fwd": [("gemm", 100)]}, part=0, final=False)
    write_rank(tmp_path, fake, 0, 2, {"fwd": [("gemm", 100)]}, part=1, final=True)
    write_rank(tmp_path, fake, 1, 2, {"fwd": [("gemm", 300)]}, part=0, final=False)
    last = write_rank(tmp_path, fake, 1, 2, {"fwd": [("gemm", 300)], "bwd": [("ag", 50)]}, part=1, final=False)
    os.utime(last, (1_700_000_000, 1_700_000_000))
    code, out, err = run_view(capsys, tmp_path)
    assert code == 0, err
    got = rows(out)
    assert got["gemm"] == [800, 200, 400, 600, 0.333, "1"]  # parts summed per rank: 200 and 600; (600 - 400) / 600
    assert got["ag"][:4] == [50, 0, 25, 50]  # rank 0 never ran it: 0 there
    assert ("proton-view: warning: rank 1 stopped early: last part 1 written at 2023-11-14 22:13:20 UTC "
            "(run.rank1.part_1.hatchet), last in step > bwd\n") in err
    assert "rank 0 stopped" not in err


def test_rank_number_from_the_name_where_metadata_lacks_it(tmp_path, capsys):
    for path in sorted(DATA.glob("run.rank*.hatchet")):
        doc = json.loads(path.read_text())
        del doc[0]["metadata"]["distributed"]
        (tmp_path / path.name).write_text(json.dumps(doc))
    code, out, err = run_view(capsys, tmp_path)
    assert code == 0, err
    assert rows(out)["gemm"] == [1600, 100, 250, 1000, 0.6, "3"]


def test_files_that_are_not_rank_files_are_summed_as_before(tmp_path, capsys):
    a, b = tmp_path / "a.hatchet", tmp_path / "b.hatchet"
    shutil.copy(DATA / "run.rank0.hatchet", a)
    shutil.copy(DATA / "run.rank3.hatchet", b)
    code, out, err = run_view(capsys, a, b)
    assert code == 0, err
    assert out.splitlines()[0].split() == ["time/ns", "name"]
    assert out.splitlines()[3].split()[0] == "1100.000"  # fwd: 100 + 1000
    code, out, err = run_view(capsys, "--sort", "imbalance", a)
    assert code == 2 and "is for a distributed run's rank files" in err


def test_rank_files_beside_other_files_are_refused(tmp_path, capsys):
    shutil.copy(DATA / "run.rank0.hatchet", tmp_path / "run.rank0.hatchet")
    shutil.copy(DATA / "run.rank1.hatchet", tmp_path / "other.hatchet")
    code, out, err = run_view(capsys, tmp_path / "run.rank0.hatchet", tmp_path / "other.hatchet")
    assert code == 2 and err.count("\n") == 1 and "no rank file" in err


def test_html_carries_per_rank_values(tmp_path, capsys):
    out = tmp_path / "ranks.html"
    code, printed, err = run_view(capsys, "--html", out, DATA)
    assert code == 0, err
    text = out.read_text()
    start = text.index('<script id="proton-data" type="application/json">') + len(
        '<script id="proton-data" type="application/json">')
    data = json.loads(text[start:text.index("</script>", start)])
    ranks = data["ranks"]
    assert ranks["ranks"] == [0, 1, 2, 3] and ranks["metric"] == "time/ns"
    gemm = data["names"].index("gemm")
    i = data["name"].index(gemm)
    assert [values[i] for values in ranks["values"]] == [100, 200, 300, 1000]
    assert 'id="proton-ranks-script"' in text


def test_percent_is_of_each_ranks_own_total(capsys):
    code, out, err = run_view(capsys, "-m", "time/%", DATA)
    assert code == 0, err
    gemm = next(line for line in out.splitlines() if line.endswith("gemm")).split()
    # ranks spend 100/600, 200/700, 300/800, 1000/1500 of their own time in gemm
    assert [float(v) for v in gemm[1:4]] == [16.667, 33.036, 66.667]


def test_ranks_of_other_shapes_merge_exactly(tmp_path, fake, capsys):
    write_rank(tmp_path, fake, 0, 3, {"fwd": [("gemm", 100)]})
    write_rank(tmp_path, fake, 1, 3, {"fwd": [("gemm", 200), ("extra", 7)]})  # a kernel rank 0 never ran
    write_rank(tmp_path, fake, 2, 3, {"fwd": [("gemm", 300)]})  # rank 0's shape: read by its numbers
    code, out, err = run_view(capsys, tmp_path)
    assert code == 0, err
    got = rows(out)
    assert got["gemm"] == [600, 100, 200, 300, 0.333, "2"]
    assert got["extra"] == [7, 0, 0, 7, 0.667, "1"]
    assert got["fwd"] == [607, 100, 207, 300, 0.326, "2"]


def test_numbers_read_fast_equal_the_full_readers(tmp_path, capsys, monkeypatch):
    """Same-shaped ranks are read by their numbers (sameshape); the output is the full reader's, to the byte."""
    from benchmarks import merge_ranks
    from proton_core.viewer import rankmerge

    merge_ranks.generate(str(tmp_path), 4, 3000)
    for rank in range(4):  # each rank on its own device, as under torchrun
        path = tmp_path / f"bench.rank{rank}.hatchet"
        path.write_text(path.read_text().replace('"device_id":"1"', f'"device_id":"{rank + 1}"'))
    learnt = []
    real = rankmerge.Shape.learn
    monkeypatch.setattr(rankmerge.Shape, "learn", lambda *a: learnt.append(real(*a)) or learnt[-1])
    fast = run_view(capsys, "-m", "time/us,count,cpu_time/ns", tmp_path)
    assert fast[0] == 0 and len(learnt) == 1 and learnt[0].files == 3
    monkeypatch.setattr(rankmerge, "MAX_SHAPES", 0)
    slow = run_view(capsys, "-m", "time/us,count,cpu_time/ns", tmp_path)
    assert slow == fast
    assert run_view(capsys, "--sort", "imbalance", tmp_path)[1].splitlines()[2].split()[5] == "1"


def test_a_directory_gives_its_rank_profiles_only(tmp_path, capsys):
    for path in DATA.glob("run.rank*.hatchet"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "run.rank0.chrome_trace").write_text("{}")  # another sink's file of the same rank
    (tmp_path / ".run.rank1.hatchet.123.tmp").write_text("")  # a writer's temporary file
    (tmp_path / "notes.txt").write_text("")
    code, out, err = run_view(capsys, tmp_path)
    assert code == 0, err
    assert rows(out)["gemm"][0] == 1600


def test_phase_of_rank_parts(tmp_path, fake, capsys):
    write_rank(tmp_path, fake, 0, 2, {"fwd": [("gemm", 100)]}, part=0, final=False)
    write_rank(tmp_path, fake, 0, 2, {"fwd": [("gemm", 10)]}, part=1, final=True)
    write_rank(tmp_path, fake, 1, 2, {"fwd": [("gemm", 300)]}, part=0, final=False)
    code, out, err = run_view(capsys, "--phase", "0", tmp_path)
    assert code == 0, err
    assert rows(out)["gemm"][:4] == [400, 100, 200, 300]
    assert err.count("stopped early") == 1 and "rank 1 stopped early: last part 0" in err
    code, out, err = run_view(capsys, "--rank", "1", "--sort", "imbalance", tmp_path)
    assert code == 2 and "leave out --rank" in err


def test_a_rank_in_hatchet_msgpack_beside_json_ones(tmp_path, capsys):
    from proton_core.formats import msgpack_io

    for path in DATA.glob("run.rank*.hatchet"):
        shutil.copy(path, tmp_path / path.name)
    doc = json.loads((DATA / "run.rank2.hatchet").read_text())
    (tmp_path / "run.rank2.hatchet").write_bytes(msgpack_io.packb(doc))  # the same rank, as the msgpack sink writes
    code, out, err = run_view(capsys, tmp_path)
    assert code == 0, err
    assert rows(out)["gemm"] == [1600, 100, 250, 1000, 0.6, "3"]
