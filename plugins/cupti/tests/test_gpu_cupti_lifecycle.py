"""How a CUPTI-profiled program ends, and who else holds CUPTI: real programs on a real GPU.

Each case runs in its own interpreter, as a user's program would: the exit
writer and CUPTI's one subscription are per process.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from cupti_helpers import walk

pytestmark = pytest.mark.gpu

PRELUDE = """
    import json, os, signal, sys, time
    import torch
    import proton_core as proton
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
"""


def run(tmp_path, *body, env=None, ready=False, send=None, timeout=300):
    """Run ``PRELUDE`` and the ``body`` parts; with ``ready``, wait for its 'ready' line and send it ``send``."""
    code = textwrap.dedent(PRELUDE) + "".join(textwrap.dedent(part) for part in body)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, cwd=tmp_path)
    if ready:
        line = proc.stdout.readline()
        assert line.strip() == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")
        proc.send_signal(send)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def count_under(path, scope):
    """Kernels recorded anywhere below the top-level scope ``scope``."""
    root = json.loads(path.read_text())[0]
    (node,) = [c for c in root["children"] if c["frame"]["name"] == scope]
    return sum(n["metrics"].get("count", 0) for _, n in walk(node) if "device_id" in n["metrics"])


LAUNCH_500 = """
    proton.start("prof", backend="cupti")
    with proton.scope("work"):
        for _ in range(500):
            x.add_(1)
"""


@pytest.mark.parametrize("ending, status", [
    ("pass", 0),
    ("raise ValueError('boom')", 1),
    ("sys.exit(3)", 3),
])
def test_kernels_are_written_at_exit_without_finalize(tmp_path, ending, status):
    """No synchronize, no finalize: the exit writer waits for the queued kernels and writes all 500."""
    rc, _, err = run(tmp_path, LAUNCH_500, ending + "\n")
    assert rc == status, err
    assert count_under(tmp_path / "prof.hatchet", "work") == 500, err
    assert "written to" in err and "at exit" in err


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_kernels_are_written_when_a_signal_ends_the_program(tmp_path, signame):
    rc, _, err = run(tmp_path, LAUNCH_500, "print('ready', flush=True)\ntime.sleep(120)\n", ready=True,
                     send=getattr(signal, signame))
    if signame == "SIGTERM":
        assert rc == -signal.SIGTERM, err  # what the signal does without Proton
    else:
        assert rc in (1, -signal.SIGINT) and "KeyboardInterrupt" in err
    assert count_under(tmp_path / "prof.hatchet", "work") == 500, err


TORCH_PROFILER_FIRST = """
    from torch.profiler import ProfilerActivity, profile
    result = {"started": None}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            x.add_(1)
        torch.cuda.synchronize()
        if os.environ.get("TRY_PROTON") == "1":
            try:
                sid = proton.start("prof", backend="cupti", mode=os.environ.get("PROTON_MODE") or None)
            except proton.ProtonError as exc:
                from proton_core.session import MANAGER
                result = {"started": False, "error": str(exc), "left": [len(MANAGER.sessions), len(MANAGER.backends)]}
            else:
                with proton.scope("work"):
                    for _ in range(100):
                        x.add_(1)
                torch.cuda.synchronize()
                result = {"started": True, "paths": proton.finalize(sid)}
    result["torch_kernels"] = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    print(json.dumps(result))
"""


def fact(**values):
    """A figure for docs/performance.md, appended where gpu_check.sh asks (PROTON_GPU_FACTS)."""
    path = os.environ.get("PROTON_GPU_FACTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(values) + "\n")


def torch_profiler_first(tmp_path, **env):
    rc, out, err = run(tmp_path, TORCH_PROFILER_FIRST, env=env)
    assert rc == 0, err
    return json.loads(out.splitlines()[-1]), err


def all_kernels(path):
    return sum(n["metrics"].get("count", 0) for _, n in walk(json.loads(path.read_text())[0])
               if "device_id" in n["metrics"])


def test_torch_profiler_holding_cupti_gives_one_line_or_both_record(tmp_path):
    """CUPTI before r610 drivers allows one subscriber: Proton must say so in one line and leave torch's data be."""
    alone, _ = torch_profiler_first(tmp_path, TRY_PROTON="0")
    result, _ = torch_profiler_first(tmp_path, TRY_PROTON="1")
    fact(case="torch.profiler holds CUPTI, proton.start(backend='cupti')", torch_alone=alone, with_proton=result)
    if result["started"]:  # a CUPTI with several subscribers: then Proton sees every kernel
        assert count_under(tmp_path / "prof.hatchet", "work") == 100
    else:
        message = result["error"]
        assert "another CUPTI client already holds CUPTI" in message and "\n" not in message, message
        assert "PROTON_CUPTI_ON_CONFLICT=skip" in message
        assert result["torch_kernels"] == alone["torch_kernels"]  # the failed start left torch.profiler's data whole


def test_pcsampling_refused_by_another_client_in_one_line_and_leaves_nothing(tmp_path):
    """Issue 19 item 5: pcsampling while torch.profiler holds CUPTI: one line at start, torch's data whole,
    and no session or backend of ours left behind. (Kineto keeps CUPTI after its profile ends, so no later
    session can start in that process either; that is torch's, not a half-enabled sampler.)"""
    alone, _ = torch_profiler_first(tmp_path, TRY_PROTON="0")
    result, _ = torch_profiler_first(tmp_path, TRY_PROTON="1", PROTON_MODE="pcsampling")
    fact(case="torch.profiler holds CUPTI, proton.start(mode='pcsampling')", with_proton=result)
    if result["started"]:  # a CUPTI with several subscribers: sampling runs next to torch.profiler
        assert count_under(tmp_path / "prof.hatchet", "work") == 100
        return
    message = result["error"]
    assert "another CUPTI client already holds CUPTI" in message and "\n" not in message, message
    assert result["left"] == [0, 0]  # no session, no started backend
    assert result["torch_kernels"] == alone["torch_kernels"]


def test_on_conflict_skip_runs_the_program_without_kernels(tmp_path):
    result, err = torch_profiler_first(tmp_path, TRY_PROTON="1", PROTON_CUPTI_ON_CONFLICT="skip")
    assert result["started"], result
    path = tmp_path / "prof.hatchet"
    if "another CUPTI client holds CUPTI" in err:  # the conflict happened: a profile, without kernels
        assert path.exists() and all_kernels(path) == 0
    else:
        assert count_under(path, "work") == 100


PROTON_FIRST = """
    from torch.profiler import ProfilerActivity, profile
    sid = proton.start("prof", backend="cupti")
    with proton.scope("before"):
        for _ in range(100):
            x.add_(1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with proton.scope("during"):
            for _ in range(200):
                x.add_(1)
        torch.cuda.synchronize()
    with proton.scope("after"):
        for _ in range(300):
            x.add_(1)
    proton.finalize(sid)
    torch_kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    print(json.dumps({"torch_kernels": torch_kernels}))
"""


def test_torch_profiler_started_while_proton_holds_cupti(tmp_path):
    """What README documents: Proton keeps every kernel; torch.profiler's CUDA view is what its CUPTI allows."""
    rc, out, err = run(tmp_path, PROTON_FIRST)
    assert rc == 0, err
    path = tmp_path / "prof.hatchet"
    counts = {scope: count_under(path, scope) for scope in ("before", "during", "after")}
    assert counts == {"before": 100, "during": 200, "after": 300}, (counts, err[-2000:])
    result = json.loads(out.splitlines()[-1])
    fact(case="proton holds CUPTI, torch.profiler starts", proton_counts=counts, torch=result,
         stderr=err[-400:])


def test_launches_n_ends_phases_at_n_in_a_burst_faster_than_the_poll(tmp_path):
    """Issue 40 item 3: 10 000 launches in one burst (no poll between them) with launches=2000 give
    five parts of 2000 each, within 10 %; the recorder switches epochs itself, CUPTI delivers later."""
    _cupti = pytest.importorskip("proton_cupti._cupti")
    if not hasattr(_cupti, "_test_launch_noop"):
        pytest.skip("proton_cupti._cupti was built without PROTON_CUPTI_TESTING=ON")
    status, out, err = run(tmp_path, """
        from proton_cupti import _cupti
        sid = proton.start("burst", backend="cupti", mode="periodic_flushing:launches=2000:poll=3600")
        assert _cupti._test_launch_noop(10000) == ""
        print(json.dumps(proton.finalize(sid)))
    """)
    assert status == 0, err
    paths = json.loads(out.strip().splitlines()[-1])
    counts = []
    for path in paths:
        root = json.loads(open(os.path.join(tmp_path, path)).read())[0]
        counts.append(sum(n["metrics"].get("count", 0) for _, n in walk(root)
                          if n["frame"]["name"] == "proton_noop"))
    assert sum(counts) == 10000, counts
    full = [c for c in counts if c]
    assert len(full) == 5 and all(1800 <= c <= 2200 for c in full), counts
