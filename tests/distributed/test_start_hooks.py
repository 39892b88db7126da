"""A program's own ``proton.start(ranks=...)``/``PROTON_RANKS`` and ``proton.data.advance_phase`` under a schedule."""

import sys

from distributed_helpers import run, write

ADVANCING = """
    import proton_core as proton
    sid = proton.start("s", backend="host")
    for step in range(4):
        with proton.scope("step", metrics={"items": 1, f"step{step}": 1}):
            pass
        proton.data.advance_phase(sid)
    proton.finalize()
"""


def test_advance_phase_drives_the_schedule(tmp_path):
    from test_schedule_and_kill import steps_in

    write(tmp_path, "prog.py", ADVANCING)
    result = run([sys.executable, "prog.py"], tmp_path, PROTON_SCHEDULE="wait=1,active=1")
    assert result.returncode == 0, result.stderr
    assert steps_in(tmp_path / "s.hatchet") == [1, 3]


def test_a_programs_own_start_honours_ranks(tmp_path):
    write(tmp_path, "prog.py", """
        import proton_core as proton
        print(proton.start("s", backend="host", ranks=[1]), proton.start("t", backend="host"))
        proton.finalize()
    """)
    left_out = run([sys.executable, "prog.py"], tmp_path, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0")
    assert left_out.returncode == 0, left_out.stderr
    assert left_out.stdout.split() == ["None", "0"]  # ranks=[1] leaves rank 0 out; no PROTON_RANKS: t starts
    chosen = run([sys.executable, "prog.py"], tmp_path, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1",
                 PROTON_RANKS="0")
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split() == ["0", "None"]  # ranks= wins over PROTON_RANKS; PROTON_RANKS=0 leaves t out


def test_schedule_and_on_demand_together_are_refused_in_one_line(tmp_path):
    from distributed_helpers import cli

    write(tmp_path, "prog.py", "print('ran')\n")
    result = cli(tmp_path, "--schedule", "wait=1,active=1", "--on-demand", "prog.py")
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.count("\n") == 1 and "--schedule and --on-demand" in result.stderr


def test_the_backend_is_named_though_the_program_never_steps_and_destroys_its_group(tmp_path):
    """A program that calls no proton.step() and destroys its process group before exit: its rank files still
    name the group's backend (noted as the program destroys it)."""
    from test_follow import TRAIN, torchrun_missing

    from distributed_helpers import cli, meta

    reason = torchrun_missing()
    if reason:
        import pytest

        pytest.skip(reason)
    write(tmp_path, "train.py", TRAIN.replace("        proton.step()\n", ""))
    result = cli(tmp_path, "-n", "run", "torchrun", "--standalone", "--nproc-per-node", "2", "train.py",
                 timeout=300, OMP_NUM_THREADS=1)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [meta(tmp_path / f"run.rank{r}.hatchet")["distributed"]["backend"] for r in (0, 1)] == ["gloo", "gloo"]


def test_a_rank_that_recorded_nothing_still_writes_its_file(tmp_path):
    """'A file per rank, always': a rank whose program opened no scope on a machine without a GPU (the host
    backend records nothing then) leaves an empty rank file, so the merged view counts it; a process without a
    rank that recorded nothing leaves none."""
    from distributed_helpers import cli

    ranked = cli(tmp_path, "-n", "out", "python3", "-c", "pass", RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert ranked.returncode == 0, ranked.stderr
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out.rank1.hatchet"]
    assert "profile written to" in ranked.stderr
