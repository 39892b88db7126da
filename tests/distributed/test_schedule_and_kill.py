"""What to capture (the step schedule, ranks) and ranks that die (SIGKILL after periodic parts), in real processes."""

import json
import sys

import pytest

from proton_core.distributed import schedule
from proton_core.errors import ProtonError

from distributed_helpers import cli, meta, root, write

STEPS = """
    import proton_core as proton
    for step in range(6):
        with proton.scope("step", metrics={"items": 1, f"step{step}": 1}):
            pass
        proton.step()
"""


def steps_in(path) -> list[int]:
    (node,) = root(path)["children"]
    return sorted(int(k[4:]) for k in node["metrics"] if k.startswith("step") and k[4:].isdigit())


def test_schedule_windows_are_parts(tmp_path):
    write(tmp_path, "prog.py", STEPS)
    result = cli(tmp_path, "-n", "s", "-m", "periodic_flushing", "--schedule",
                 "skip_first=1,wait=1,warmup=0,active=2,repeat=2", "prog.py")
    assert result.returncode == 0, result.stderr
    parts = sorted(tmp_path.glob("s.part_*.hatchet"))
    with_data = [p for p in parts if root(p)["children"]]
    assert [steps_in(p) for p in with_data] == [[2, 3], [5]]  # window 1: steps 2-3; window 2: step 5 (run ended)


def test_schedule_without_parts_sums_active_steps(tmp_path):
    write(tmp_path, "prog.py", STEPS)
    result = cli(tmp_path, "-n", "s", "--schedule", "wait=1,warmup=1,active=1", "prog.py")
    assert result.returncode == 0, result.stderr
    assert steps_in(tmp_path / "s.hatchet") == [2, 5]


def test_schedule_from_environment_without_cli(tmp_path):
    write(tmp_path, "prog.py", """
        import proton_core as proton
        proton.start("s", backend="host")
        for step in range(4):
            with proton.scope("step", metrics={"items": 1, f"step{step}": 1}):
                pass
            proton.step()
        proton.finalize()
    """)
    from distributed_helpers import run

    result = run([sys.executable, "prog.py"], tmp_path, PROTON_SCHEDULE="wait=1,active=1")
    assert result.returncode == 0, result.stderr
    assert steps_in(tmp_path / "s.hatchet") == [1, 3]


def test_schedule_parse():
    assert schedule.parse("skip_first=1:wait=2,active=3") == schedule.Schedule(1, 2, 0, 3, 0)
    s = schedule.Schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=1)
    assert [s.window(i) for i in range(8)] == [None, None, None, 0, 0, None, None, None]
    for bad in ("active=0", "wait=-1", "often=2", "wait=x"):
        with pytest.raises(ProtonError) as info:
            schedule.parse(bad)
        assert "\n" not in str(info.value)


KILLED = """
    import os, signal, sys, time
    import proton_core as proton
    rank = int(os.environ["RANK"])
    for step in range(3):
        with proton.scope(f"step{step}", metrics={"items": 1}):
            pass
        proton.data.advance_phase()
    time.sleep(1.5)  # the writer (poll=0.1) writes the three complete parts
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
"""

LAUNCH = """
    import os, subprocess, sys
    procs = [subprocess.Popen([sys.executable, "prog.py"], env=dict(os.environ, RANK=str(r), WORLD_SIZE="2"))
             for r in range(2)]
    print([p.wait() for p in procs])
"""


def test_killed_rank_leaves_its_parts(tmp_path):
    write(tmp_path, "prog.py", KILLED)
    write(tmp_path, "launch.py", LAUNCH)
    result = cli(tmp_path, "-n", "k", "-m", "periodic_flushing:poll=0.1", sys.executable, "launch.py")
    assert result.returncode == 0, result.stderr
    assert "[0, -9]" in result.stdout
    killed = sorted(tmp_path.glob("k.rank1.part_*.hatchet"))
    assert [p.name for p in killed] == [f"k.rank1.part_{n}.hatchet" for n in range(3)]
    for n, path in enumerate(killed):
        found = meta(path)
        assert found["final"] is False and found["part"] == n and found["distributed"]["rank"] == 1
        assert [c["frame"]["name"] for c in root(path)["children"]] == [f"step{n}"]
    finished = sorted(tmp_path.glob("k.rank0.part_*.hatchet"), key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    assert [meta(p)["final"] for p in finished] == [False] * (len(finished) - 1) + [True]
    assert json.loads(finished[0].read_text())[0]["children"][0]["frame"]["name"] == "step0"


def test_ranks_selection():
    from proton_core.distributed import selection

    env = {"RANK": "3", "WORLD_SIZE": "4"}
    assert selection.parse("0-2,5") == {0, 1, 2, 5}
    assert selection.selected(env) is True  # no list: every rank
    assert selection.selected({**env, "PROTON_RANKS": "0,3"}) is True
    assert selection.selected({**env, "PROTON_RANKS": "0,1"}) is False
    assert selection.selected(env, ranks=[1, 2]) is False and selection.selected(env, ranks="3") is True
    assert selection.selected({"PROTON_RANKS": "0"}) is True  # no rank: the list names none of us
    for bad in ("", "x", "3-1", "-1"):
        with pytest.raises(ProtonError):
            selection.parse(bad)


def test_trace_parts_of_scopes_only_are_written(tmp_path):
    """A periodic trace phase holding only host scopes (its tree is empty) is data: written, not skipped."""
    from distributed_helpers import run

    write(tmp_path, "prog.py", """
        import proton_core as proton
        proton.start("tp", backend="host", data="trace", mode="periodic_flushing")
        for i in range(3):
            with proton.scope(f"x{i}"):
                pass
            proton.data.advance_phase()
        proton.finalize()
    """)
    result = run([sys.executable, "prog.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    for i in range(3):
        assert f'"x{i}"' in (tmp_path / f"tp.part_{i}.chrome_trace").read_text()
