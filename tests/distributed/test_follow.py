"""The whole job from one command: proton-profile runs a launcher, every Python process under it profiles
itself (real processes: torchrun with gloo, hand-set Slurm variables, subprocess children)."""

import importlib.util
import os
import shutil
import sys

import pytest

from distributed_helpers import cli, meta, names, root, write

SCOPED = """
    import os, sys
    import proton_core as proton
    with proton.scope(sys.argv[1] if len(sys.argv) > 1 else "work", metrics={"items": 1}):
        pass
"""

TRAIN = """
    import torch
    import torch.distributed as dist
    import proton_core as proton
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(3):
        with proton.scope("step", metrics={"items": 1}):
            t = torch.ones(4) * rank
            with proton.scope("allreduce", metrics={"calls": 1}):
                dist.all_reduce(t)
        proton.step()
    assert t[0].item() == 1.0
    dist.destroy_process_group()
"""


def torchrun_missing() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch.distributed

    if not torch.distributed.is_available():
        return "torch.distributed is unavailable in this torch build"
    if shutil.which("torchrun") is None:
        return "torchrun is not on PATH"
    return None


@pytest.mark.skipif(torchrun_missing() is not None, reason=str(torchrun_missing()))
def test_torchrun_gloo_two_rank_files(tmp_path):
    write(tmp_path, "train.py", TRAIN)
    result = cli(tmp_path, "-n", "run", "torchrun", "--standalone", "--nproc-per-node", "2", "train.py",
                 timeout=300, OMP_NUM_THREADS=1)
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(p.name for p in tmp_path.glob("run*"))
    assert files == ["run.rank0.hatchet", "run.rank1.hatchet"]  # torchrun's agent and the CLI wrote nothing
    run_ids = set()
    for rank in (0, 1):
        path = tmp_path / f"run.rank{rank}.hatchet"
        found = meta(path)
        record = found["distributed"]
        assert (record["rank"], record["world_size"], record["local_rank"], record["launcher"], record["backend"]) \
            == (rank, 2, rank, "torchrun", "gloo")
        assert found["final"] is True and found["part"] is None
        run_ids.add(record["run_id"])
        (step,) = root(path)["children"]
        assert step["frame"]["name"] == "step" and step["metrics"]["items"] == 3
        assert [c["frame"]["name"] for c in step["children"]] == ["allreduce"]
        assert step["children"][0]["metrics"]["calls"] == 3
    assert len(run_ids) == 1  # one job, one run id, without communication


def test_exit_status_passes_through(tmp_path):
    result = cli(tmp_path, "-n", "out", "python3", "-c", "import sys; sys.exit(3)")
    assert result.returncode == 3, result.stderr
    assert list(tmp_path.glob("out*")) == []  # a process that recorded nothing writes nothing


def test_command_children_named_by_pid(tmp_path):
    write(tmp_path, "prog.py", SCOPED)
    result = cli(tmp_path, "-n", "out", sys.executable, "prog.py", "child")
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("out*")
    assert path.name.startswith("out.pid") and path.name.endswith(".hatchet")
    assert names(path) == {"child"} and "distributed" not in meta(path)


PARENT = """
    import subprocess, sys
    import proton_core as proton
    with proton.scope("parent", metrics={"items": 1}):
        subprocess.run([sys.executable, "prog.py", "child"], check=True)
"""


def test_script_children_followed_and_no_follow(tmp_path):
    write(tmp_path, "prog.py", SCOPED)
    write(tmp_path, "parent.py", PARENT)
    result = cli(tmp_path, "-n", "out", "parent.py")
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in tmp_path.glob("out*"))
    assert len(files) == 2 and "out.hatchet" in files
    (child,) = [f for f in files if f.startswith("out.pid")]
    assert names(tmp_path / "out.hatchet") == {"parent"} and names(tmp_path / child) == {"child"}
    for path in tmp_path.glob("out*"):
        path.unlink()
    result = cli(tmp_path, "-n", "out", "--no-follow", "parent.py")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out.hatchet"]


def test_nested_proton_profile_profiles_once(tmp_path):
    write(tmp_path, "prog.py", SCOPED)
    result = cli(tmp_path, "-n", "outer", sys.executable, "-m", "proton_core", "-n", "inner", "prog.py")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("*.hatchet")) == ["inner.hatchet"]


SLURM_JOB = """
    import os, subprocess, sys
    children = []
    for rank in range(2):
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank), SLURM_NODEID="0",
                   SLURM_JOB_ID="4242", SLURM_STEP_ID="0")
        children.append(subprocess.Popen([sys.executable, "prog.py", f"task{rank}"], env=env))
    sys.exit(max(c.wait() for c in children))
"""


def test_slurm_tasks_by_hand(tmp_path):
    write(tmp_path, "prog.py", SCOPED)
    write(tmp_path, "srun_like.py", SLURM_JOB)
    result = cli(tmp_path, "-n", "job", sys.executable, "srun_like.py")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("job*")) == ["job.rank0.hatchet", "job.rank1.hatchet"]
    run_ids = set()
    for rank in (0, 1):
        path = tmp_path / f"job.rank{rank}.hatchet"
        record = meta(path)["distributed"]
        assert (record["rank"], record["world_size"], record["local_rank"], record["node_rank"], record["launcher"]) \
            == (rank, 2, rank, 0, "slurm")
        assert names(path) == {f"task{rank}"}
        run_ids.add(record["run_id"])
    assert len(run_ids) == 1 and run_ids.pop().startswith("proton-")  # the one proton-profile gave the job


def test_ranks_selects(tmp_path):
    write(tmp_path, "prog.py", SCOPED)
    write(tmp_path, "srun_like.py", SLURM_JOB)
    result = cli(tmp_path, "-n", "job", "--ranks", "1", sys.executable, "srun_like.py")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("job*")) == ["job.rank1.hatchet"]


def test_ranks_wrong_is_one_line(tmp_path):
    result = cli(tmp_path, "--ranks", "a,b", sys.executable, "-c", "pass")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "proton: ranks 'a,b': 'a' is not a rank or range; give e.g. 0,3 or 0-3"]


def test_on_demand_travels(tmp_path):
    write(tmp_path, "show.py", """
        import os, subprocess, sys
        print("parent", os.environ.get("PROTON_ON_DEMAND"))
        subprocess.run([sys.executable, "-c", "import os; print('child', os.environ.get('PROTON_ON_DEMAND'))"])
    """)
    result = cli(tmp_path, "--on-demand", "show.py")
    assert result.returncode == 0, result.stderr
    assert "parent 1" in result.stdout and "child 1" in result.stdout


def test_ctl_dispatch(tmp_path):
    result = cli(tmp_path, "ctl", "status", "--pid", str(os.getpid()))
    assert "Traceback" not in result.stderr
    if importlib.util.find_spec("proton_core.control.cli") is None:
        assert result.returncode == 2
        assert result.stderr.strip() == "proton: ctl needs proton_core.control, which this installation lacks"


def test_existing_sitecustomize_still_runs(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    write(tmp_path, "prog.py", """
        import os
        import proton_core as proton
        with proton.scope(os.environ.get("SITE_RAN", "no"), metrics={"items": 1}):
            pass
    """)
    result = cli(tmp_path, "-n", "out", sys.executable, "prog.py", PYTHONPATH=str(site))
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("out.pid*.hatchet")
    assert names(path) == {"yes"}  # the hidden sitecustomize ran, then the process profiled itself


def test_launchers_recognised():
    from proton_core.follow import launchers

    py = sys.executable
    assert launchers.is_launcher([py, "/usr/bin/torchrun", "--nproc-per-node", "2", "t.py"])
    assert launchers.is_launcher([py, "-u", "-m", "torch.distributed.run", "t.py"])
    assert launchers.is_launcher([py, "-X", "dev", "-m", "proton_core", "t.py"])
    assert launchers.is_launcher([py, "-c", "from multiprocessing.resource_tracker import main;main(5)"])
    assert not launchers.is_launcher([py, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"])
    worker = os.path.join("site-packages", "torch", "_inductor", "compile_worker", "__main__.py")
    assert launchers.is_helper([py, worker, "--workers=4"]) and launchers.is_launcher([py, worker])
    assert not launchers.is_helper([py, "/usr/bin/torchrun", "t.py"])  # a launcher's children are followed
    assert not launchers.is_launcher([py, "train.py"])
    assert not launchers.is_launcher([py, "-m", "my_package.train"])


def test_followed_trace_process_writes_its_events(tmp_path):
    write(tmp_path, "prog.py", """
        import proton_core as proton
        with proton.scope("only_a_scope"):
            pass
    """)
    result = cli(tmp_path, "-n", "out", "-d", "trace", sys.executable, "prog.py")
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("out.pid*.chrome_trace")  # events only, an empty tree: still data
    assert "only_a_scope" in path.read_text()
