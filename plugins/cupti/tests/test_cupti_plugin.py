"""Registration, availability and the libcupti search, on a machine without a GPU."""

import os
import shutil

import pytest

from proton_core.plugin_api import BackendUnavailable
from proton_core.testing import get_plugins
from proton_cupti import libsearch, plugin

CUPTI = next((c for c in libsearch.candidates() if os.sep in c), None)


def test_registered_through_entry_point():
    reg = get_plugins().backends.get("cupti")
    assert reg is not None and reg.priority == 100 and reg.modes == ("pcsampling",)
    assert reg.available is plugin.available


def test_available_gives_a_reason_without_driver(monkeypatch):
    monkeypatch.setattr(libsearch, "driver_reason", lambda: "no NVIDIA driver (libcuda.so.1 cannot be loaded)")
    assert plugin.available() == "no NVIDIA driver (libcuda.so.1 cannot be loaded)"


def test_env_dir_and_file_come_first(tmp_path, monkeypatch):
    lib = tmp_path / "libcupti.so.13"
    lib.write_bytes(b"")
    monkeypatch.setenv(libsearch.ENV_VAR, str(tmp_path))
    assert libsearch.candidates()[0] == str(lib)
    monkeypatch.setenv(libsearch.ENV_VAR, str(lib))
    assert libsearch.candidates()[0] == str(lib)
    assert libsearch.search_places()[0] == (f"${libsearch.ENV_VAR}", str(lib))


def test_not_found_lists_every_place_and_the_variable(monkeypatch):
    monkeypatch.setenv(libsearch.ENV_VAR, "/nowhere/cupti")
    monkeypatch.setenv("CUDA_HOME", "/opt/no-cuda")
    msg = libsearch.not_found_message()
    for place in ("/nowhere/cupti", "nvidia/cuda_cupti/lib", "/opt/no-cuda/extras/CUPTI/lib64",
                  "/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64", "dynamic loader"):
        assert place in msg, place
    assert libsearch.ENV_VAR in msg and "\n" not in msg


@pytest.mark.skipif(CUPTI is None, reason="no libcupti on this machine to load")
def test_native_loads_libcupti_from_env_path(tmp_path, monkeypatch):
    pytest.importorskip("proton_cupti._cupti")
    import subprocess
    import sys

    target = tmp_path / "lib"
    target.mkdir()
    shutil.copy(os.path.realpath(CUPTI), target / "libcupti.so.13")
    code = ("from proton_cupti.backend import load_cupti; print(load_cupti())")
    env = dict(os.environ, **{libsearch.ENV_VAR: str(target)})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(target / "libcupti.so.13")


def test_native_load_failure_lists_places(monkeypatch):
    pytest.importorskip("proton_cupti._cupti")
    from proton_cupti import backend

    class NoLoad:
        @staticmethod
        def cupti_path():
            return ""

        @staticmethod
        def load_cupti(path):
            return f"{path}: cannot open shared object file"

    monkeypatch.setattr(backend, "native", lambda: NoLoad)
    monkeypatch.setenv(libsearch.ENV_VAR, "/nowhere")
    with pytest.raises(BackendUnavailable) as info:
        backend.load_cupti()
    assert "/nowhere" in str(info.value) and libsearch.ENV_VAR in str(info.value)


def test_start_with_cupti_without_driver_is_one_line_error(tmp_path, monkeypatch):
    import proton_core as proton
    from proton_core.plugin_api import ProtonError

    monkeypatch.setattr(libsearch, "driver_reason", lambda: "no NVIDIA driver (libcuda.so.1 cannot be loaded)")
    with pytest.raises(ProtonError, match="cannot run here: no NVIDIA driver"):
        proton.start(str(tmp_path / "p"), backend="cupti")


class HeldCupti:
    """A native module whose start fails as CUPTI does when torch.profiler or Nsight holds it."""

    def __init__(self):
        self.stopped = 0

    def start(self):
        raise RuntimeError("cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    def stop(self):
        self.stopped += 1

    def flush(self):
        return [], [], [], 0, []

    def device_info(self, ordinal):
        return {}


def held_backend():
    from proton_cupti.backend import CuptiBackend

    backend = CuptiBackend.__new__(CuptiBackend)  # no driver here: only start/stop/flush are exercised
    backend.native, backend._devices, backend._started = HeldCupti(), {}, False
    return backend


def test_another_cupti_client_is_named_with_the_way_out(monkeypatch):
    from proton_core.plugin_api import ProtonError

    monkeypatch.delenv("PROTON_CUPTI_ON_CONFLICT", raising=False)
    with pytest.raises(ProtonError) as err:
        held_backend().start(None)
    message = str(err.value)
    assert "another CUPTI client already holds CUPTI (torch.profiler, Nsight" in message
    assert "PROTON_CUPTI_ON_CONFLICT=skip" in message and "\n" not in message


def test_skip_on_conflict_runs_without_kernels(monkeypatch, caplog):
    monkeypatch.setenv("PROTON_CUPTI_ON_CONFLICT", "skip")
    backend = held_backend()
    backend.start(None)
    assert backend.flush().records == []
    backend.stop()
    assert backend.native.stopped == 0  # nothing was started, nothing to undo
    assert "records no kernels" in caplog.records[0].getMessage()


def test_reattach_setting_is_read_and_a_bad_one_named(monkeypatch):
    from proton_core.plugin_api import ProtonError
    from proton_cupti.backend import REATTACH_DEFAULT, reattach_records

    monkeypatch.delenv("PROTON_CUPTI_REATTACH_RECORDS", raising=False)
    assert reattach_records() == REATTACH_DEFAULT
    monkeypatch.setenv("PROTON_CUPTI_REATTACH_RECORDS", "0")
    assert reattach_records() == 0
    monkeypatch.setenv("PROTON_CUPTI_REATTACH_RECORDS", "lots")
    with pytest.raises(ProtonError) as err:
        reattach_records()
    assert "PROTON_CUPTI_REATTACH_RECORDS='lots' is not a count" in str(err.value) and "\n" not in str(err.value)


class ReplayingCupti(HeldCupti):
    """A native module whose flushes report kernels of a graph captured before profiling began."""

    def __init__(self):
        super().__init__()
        self.uncaptured = 0

    def stats(self):
        return {"zero_time": 0, "uncaptured_graph": self.uncaptured}


def test_a_graph_captured_before_start_is_said_once_per_session(caplog):
    """upstream's test_cudagraph_not_captured_by_profiler: one line, with upstream's first words, however many
    replays; a session that sees none says nothing."""
    backend = held_backend()
    backend.native = ReplayingCupti()
    backend._started, backend._untimed_seen, backend._uncaptured_said = True, 0, False
    backend._unobserved, backend._pcs = 0, None
    backend.flush()
    assert not caplog.records
    for replays in (4, 8, 12):
        backend.native.uncaptured = replays
        backend.flush()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].count("Cannot find graph for graphExecId:") == 1
    assert "start profiling before the graph is created" in said[0] and "\n" not in said[0]
