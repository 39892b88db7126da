"""A whole job at once: every process of a run starts and stops together; runs are kept apart."""

import os
import subprocess
import sys

import pytest

from proton_core.control import cli, run_id
from proton_core.testing import child_names, load_profile


def test_one_command_starts_and_stops_every_process_of_a_run(start_job, ctl, ctl_dir):
    ranks = [start_job("rank0", run="job7"), start_job("rank1", run="job7")]
    other = start_job("other", run="job8")
    for job in ranks + [other]:
        job.set_label("before")
        job.set_label("window")
    status, out, err = ctl("start", "--run", "job7")
    assert status == 0, err
    assert sorted(out) == sorted(f"pid {j.pid}: session 0 '{n}' recording window 1 (phase 1)"
                                 for j, n in zip(ranks, ["rank0", "rank1"]))
    for job in ranks + [other]:
        job.wait_iterations("window", 3)
    status, out, err = ctl("stop", "--run", "job7")
    assert status == 0 and len(out) == 2, err
    status, out, _ = ctl("status")
    assert len(out) == 3
    assert sum("1 window written" in line for line in out) == 2
    assert [line for line in out if line.startswith(f"pid {other.pid}:")][0].startswith(
        f"pid {other.pid}: idle: session 0 'other', 0 windows written (run job8")
    # two runs are there: start/stop need to be told which
    status, _, err = ctl("start")
    assert status == 2 and err == ["proton: ctl: processes of 2 runs serve control (job7, job8): "
                                   "name one with --run RUN_ID or --pid P"]
    for job in ranks + [other]:
        job.set_label("after")
        job.finish()
    for job, name in zip(ranks, ["rank0", "rank1"]):
        assert child_names(load_profile(job.work / f"{name}.part_1.hatchet")[0]) == ["window"]
        assert "before" not in (job.work / f"{name}.hatchet").read_text()
    assert not list(other.work.glob("*.part_*"))


def test_the_command_line_as_a_process(start_job, ctl_dir):
    job = start_job(run="cli")
    job.set_label("w")
    env = {"PROTON_CTL_DIR": ctl_dir}
    run = [sys.executable, "-m", "proton_core.control.cli"]
    started = subprocess.run(run + ["start", "--run=cli"], capture_output=True, text=True,
                             env={**os.environ, **env})
    assert started.returncode == 0 and started.stdout.startswith(f"pid {job.pid}: session 0"), started.stderr
    job.wait_iterations("w", 3)
    stopped = subprocess.run(run + ["stop", "--pid", str(job.pid)], capture_output=True, text=True,
                             env={**os.environ, **env})
    assert stopped.returncode == 0 and stopped.stdout.rstrip().endswith("job.part_1.hatchet"), stopped.stderr
    assert stopped.stderr == ""
    job.finish()


@pytest.mark.parametrize("argv, message", [
    ([], "name a command: start, stop, status"),
    (["go"], "unexpected argument 'go'"),
    (["start", "stop"], "unexpected argument 'stop'"),
    (["start", "--pid"], "--pid needs a value"),
    (["start", "--pid", "x"], "--pid needs a process id (a positive number), not 'x'"),
    (["start", "--pid", "1", "--run", "r"], "give --pid or --run, not both"),
    (["status", "--timeout", "0"], "--timeout must be positive"),
    (["status", "--run="], "--run needs a run id"),
])
def test_usage_errors_are_one_line(ctl, argv, message):
    status, out, err = ctl(*argv)
    assert (status, out, err) == (2, [], [f"proton: ctl: {message}"])


def test_help(ctl):
    status, out, _ = ctl("--help")
    assert status == 0 and out[0].startswith("usage: proton-profile ctl start|stop|status")


def test_nobody_to_ask_is_one_line(ctl, ctl_dir):
    for argv, what in ((["status", "--pid", "4242"], "pid 4242 serves no profiling control"),
                       (["stop", "--run", "nope"], "no process of run 'nope' serves profiling control")):
        status, out, err = ctl(*argv)
        assert status == 2 and len(err) == 1 and err[0].startswith(f"proton: {what} under {ctl_dir}/proton-ctl-")


def test_the_run_id_is_the_one_the_rank_files_carry(monkeypatch):
    monkeypatch.setenv("PROTON_RUN_ID", "mine")
    assert run_id.current() == "mine"
    distributed = pytest.importorskip("proton_core.distributed.run_id")
    monkeypatch.delenv("PROTON_RUN_ID")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "elastic")
    assert run_id.current() == distributed.run_id()


def test_without_the_distributed_package_the_launchers_variables_name_the_run(monkeypatch):
    monkeypatch.setattr(run_id, "_from_distributed", lambda: None)
    for variable in run_id.ENV_VARIABLES + ("SLURM_STEP_ID",):
        monkeypatch.delenv(variable, raising=False)
    assert run_id.current() == f"pid{os.getpid()}"
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_STEP_ID", "3")
    assert run_id.current() == "77.3"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "elastic")
    assert run_id.current() == "elastic"
    monkeypatch.setenv("PROTON_RUN_ID", "mine")
    assert run_id.current() == "mine"


def test_run_directory_names_stay_inside_and_apart():
    assert run_id.directory_name("job7") == "job7"
    for odd in ("..", ".", "a/b", "../../etc", "x" * 200, "run id with spaces", ""):
        name = run_id.directory_name(odd)
        assert "/" not in name and name not in ("", ".", "..") and len(name) <= run_id.MAX_NAME
    assert run_id.directory_name("a/b") != run_id.directory_name("a_b")
