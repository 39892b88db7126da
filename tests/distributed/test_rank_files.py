"""A file per rank: the rank from torchrun, Slurm or MPI variables names the file and fills the metadata."""

import json
import sys

import pytest

from proton_core.distributed import identity, naming, run_id

from distributed_helpers import meta, names, run, write

PROGRAM = """
    import sys
    import proton_core as proton
    proton.start(sys.argv[1], backend="host", data=sys.argv[2])
    with proton.scope("step", metrics={"items": 1}):
        pass
    proton.finalize()
"""

SCHEMA = {"rank": int, "world_size": int, "local_rank": (int, type(None)), "node_rank": (int, type(None)),
          "host": str, "pid": int, "device": (int, type(None)), "run_id": str, "launcher": str,
          "backend": (str, type(None))}


def check_schema(record):
    assert set(record) == set(SCHEMA)
    for key, kind in SCHEMA.items():
        assert isinstance(record[key], kind), key


@pytest.mark.parametrize("env, rank, world, local, node, launcher, job", [
    ({"RANK": 3, "WORLD_SIZE": 4, "LOCAL_RANK": 1, "GROUP_RANK": 1, "TORCHELASTIC_RUN_ID": "abc"},
     3, 4, 1, 1, "torchrun", "torchrun-abc"),
    ({"SLURM_PROCID": 5, "SLURM_NTASKS": 8, "SLURM_LOCALID": 1, "SLURM_NODEID": 2, "SLURM_JOB_ID": 77,
      "SLURM_STEP_ID": 0}, 5, 8, 1, 2, "slurm", "slurm-77.0"),
    ({"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 3, "OMPI_COMM_WORLD_LOCAL_RANK": 0,
      "OMPI_MCA_ess_base_jobid": 991, "SLURM_PROCID": 0, "SLURM_NTASKS": 1}, 2, 3, 0, None, "mpi", "mpi-991"),
    ({"PMI_RANK": 1, "PMI_SIZE": 2, "MPI_LOCALRANKID": 1, "PROTON_RUN_ID": "mine"}, 1, 2, 1, None, "mpi", "mine"),
    ({"RANK": 0, "WORLD_SIZE": 2}, 0, 2, None, None, "env", None),
])
def test_rank_file_and_metadata(tmp_path, env, rank, world, local, node, launcher, job):
    program = write(tmp_path, "prog.py", PROGRAM)
    result = run([sys.executable, program, tmp_path / "train", "tree"], tmp_path, **env)
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"train.rank{rank}.hatchet"
    assert path.exists() and not (tmp_path / "train.hatchet").exists()
    assert names(path) == {"step"}
    found = meta(path)
    record = found["distributed"]
    check_schema(record)
    assert (record["rank"], record["world_size"], record["local_rank"], record["node_rank"], record["launcher"]) \
        == (rank, world, local, node, launcher)
    assert record["pid"] != 0 and record["host"]
    if job is not None:
        assert record["run_id"] == job
    assert found["part"] is None and found["final"] is True


def test_single_process_unchanged(tmp_path):
    program = write(tmp_path, "prog.py", PROGRAM)
    result = run([sys.executable, program, tmp_path / "train", "tree"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("train*")) == ["train.hatchet"]
    found = meta(tmp_path / "train.hatchet")
    assert "distributed" not in found and "part" not in found and "final" not in found


def test_chrome_trace_distributed_info_and_base_time(tmp_path):
    import time

    program = write(tmp_path, "prog.py", PROGRAM)
    before = time.time_ns()
    result = run([sys.executable, program, tmp_path / "t", "trace"], tmp_path, RANK=1, WORLD_SIZE=2)
    after = time.time_ns()
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "t.rank1.chrome_trace").read_text()
    assert text.startswith('{"distributedInfo": {"backend": null, "rank": 1, "world_size": 2}')  # HTA's regex
    doc = json.loads(text)
    assert doc["distributedInfo"] == {"backend": None, "rank": 1, "world_size": 2}
    assert before <= doc["baseTimeNanoseconds"] <= after  # the first event's time on the wall clock
    assert doc["protonMetadata"]["distributed"]["rank"] == 1
    (scope,) = [e for e in doc["traceEvents"] if e.get("cat") == "scope"]
    assert scope["ts"] == 0.0  # times count from the base


def test_single_process_trace_has_base_time_only(tmp_path):
    program = write(tmp_path, "prog.py", PROGRAM)
    assert run([sys.executable, program, tmp_path / "t", "trace"], tmp_path).returncode == 0
    doc = json.loads((tmp_path / "t.chrome_trace").read_text())
    assert "distributedInfo" not in doc and doc["baseTimeNanoseconds"] > 1_600_000_000 * 10**9


def test_hta_loads_rank_traces(tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis)")
    pytest.importorskip("psutil", reason="HTA needs psutil")
    program = write(tmp_path, "prog.py", PROGRAM)
    traces = tmp_path / "traces"
    traces.mkdir()
    for rank in (0, 1):
        result = run([sys.executable, program, traces / "run", "trace"], tmp_path, RANK=rank, WORLD_SIZE=2)
        assert result.returncode == 0, result.stderr
        (traces / f"run.rank{rank}.chrome_trace").rename(traces / f"run.rank{rank}.json")
    check = run([sys.executable, "-c", "import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
                 "t = TraceAnalysis(trace_dir=sys.argv[1]).t\nprint(sorted(t.get_ranks()))\n"
                 "print(sorted(set(t.symbol_table.get_sym_table())))", traces], tmp_path)
    assert check.returncode == 0, check.stderr
    lines = check.stdout.strip().splitlines()
    assert lines[-2] == "[0, 1]" and "'step'" in lines[-1]


def test_identity_order_and_group(monkeypatch):
    assert identity.from_environment({}) is None
    both = identity.from_environment({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert (both.rank, both.launcher) == (1, "env")  # torchrun's variables win over the allocation's
    srun_mpi = identity.from_environment({"PMI_RANK": "3", "PMI_SIZE": "4", "SLURM_PROCID": "3", "SLURM_NTASKS": "4"})
    assert (srun_mpi.rank, srun_mpi.launcher) == (3, "slurm")
    monkeypatch.setattr(identity, "process_group", lambda: (6, 8, "gloo"))
    monkeypatch.delenv("RANK", raising=False)
    found = identity.current({"RANK": "2", "WORLD_SIZE": "8"})
    assert (found.rank, found.world_size, found.backend) == (6, 8, "gloo")  # the initialised group wins


def test_run_id_sources():
    assert run_id.run_id({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "h", "MASTER_PORT": "1"}) == "rendezvous-h:1"
    assert run_id.run_id({"SLURM_JOB_ID": "5"}) == "slurm-5"
    assert run_id.run_id({"PROTON_RUN_ID": "x", "SLURM_JOB_ID": "5"}) == "x"


def test_naming():
    assert naming.for_rank("out/train", "hatchet", 3) == "out/train.rank3"
    assert naming.for_rank("train.hatchet", "hatchet", 3) == "train.rank3.hatchet"
    assert naming.for_rank("train.rank3", "hatchet", 3) == "train.rank3"
    assert naming.for_rank("train", "hatchet", None) == "train"
    assert naming.for_pid("train", "hatchet", 42) == "train.pid42"
