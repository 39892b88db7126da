"""mode="pcsampling" on a machine without a GPU: its options, the one-line errors of start, that a
failed start leaves nothing attached, and that Triton kernels compiled before start are found."""

import sys
import types

import pytest

from proton_core.plugin_api import ProtonError
from proton_core.testing import get_plugins
from proton_cupti import pcsampling
from proton_cupti.pcsampling import Options, parse_mode, start_error_message


# ------------------------------------------------------------------ parsing ----
@pytest.mark.parametrize("mode, options", [
    (None, None),
    ("", None),
    ("pcsampling", Options()),
    ("pcsampling:interval=12", Options(interval=12)),
    ("pcsampling:interval=5", Options(interval=5)),
    ("pcsampling:interval=31", Options(interval=31)),
    ("pcsampling:collection=serialized", Options(collection="serialized")),
    ("pcsampling: interval = 8 :collection=continuous:drain=20:kernels=serial",
     Options(interval=8, collection="continuous", drain_ms=20, kernels="serial")),
])
def test_mode_strings(mode, options):
    assert parse_mode(mode) == options


def test_defaults_match_upstream_period():
    assert Options().interval == 10 and Options().collection == "continuous" and Options().kernels == "auto"


@pytest.mark.parametrize("mode, words", [
    ("pcsampling:interval=4", ["interval must be a whole number from 5 to 31", "2**interval", "'4'"]),
    ("pcsampling:interval=32", ["from 5 to 31", "'32'"]),
    ("pcsampling:interval=1000", ["from 5 to 31", "'1000'"]),
    ("pcsampling:interval=ten", ["from 5 to 31", "'ten'"]),
    ("pcsampling:interval=10.5", ["from 5 to 31"]),
    ("pcsampling:collection=always", ["collection must be continuous or serialized", "'always'"]),
    ("pcsampling:drain=0", ["drain must be milliseconds from 1 to 60000"]),
    ("pcsampling:kernels=parallel", ["kernels must be auto, concurrent or serial"]),
    ("pcsampling:frequency=3", ["'frequency=3' is not an option of pcsampling",
                                "interval=<5..31>, collection=continuous|serialized, drain=<ms>, buffer=<MB> or "
                                "kernels=auto|concurrent|serial"]),
    ("pcsampling:buffer=8", ["buffer must be megabytes from 16 to 4096"]),
    ("pcsampling:interval", ["'interval' is not an option of pcsampling"]),
    ("pcsampling:interval=8:interval=9", ["interval is given twice"]),
    ("pcsamplingx", ["backend 'cupti' has no mode 'pcsamplingx'", "pcsampling"]),
])
def test_bad_options_are_one_line_naming_the_valid_ones(mode, words):
    with pytest.raises(ProtonError) as err:
        parse_mode(mode)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_registered_mode():
    reg = get_plugins().backends.get("cupti")
    assert reg.modes == ("pcsampling",)


def test_the_core_lets_the_mode_through_to_the_backend(tmp_path, monkeypatch):
    """The core matches mode against the registered modes; without a driver the error is the driver's."""
    import proton_core as proton
    from proton_cupti import libsearch

    monkeypatch.setattr(libsearch, "driver_reason", lambda: "no NVIDIA driver (libcuda.so.1 cannot be loaded)")
    with pytest.raises(ProtonError, match="cannot run here: no NVIDIA driver"):
        proton.start(str(tmp_path / "p"), backend="cupti", mode="pcsampling:interval=12")


# ------------------------------------------------------------------- errors ----
DEVICE = pcsampling.describe_device(0, "NVIDIA Tesla P100", "60")
CONFLICT = "cupti backend cannot start: another CUPTI client already holds CUPTI (the backend's own words)"


def test_device_descriptions():
    assert DEVICE == "GPU 0 (NVIDIA Tesla P100, compute capability 6.0)"
    assert pcsampling.describe_device(1, "", "90") == "GPU 1 (compute capability 9.0)"
    assert pcsampling.describe_device(2) == "GPU 2"
    assert pcsampling.describe_device(-1) == "the GPU"


@pytest.mark.parametrize("code", [35, 40])
def test_admin_only_profiling(code):
    message = start_error_message((code, 0, "cuptiPCSamplingEnable", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), DEVICE)
    assert message.startswith("cupti backend cannot start pcsampling: the driver restricts GPU profiling to admin "
                              "users (NVreg_RestrictProfilingToAdminUsers=1); run as root")
    assert "NVreg_RestrictProfilingToAdminUsers=0" in message
    assert message.endswith("see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    assert "\n" not in message


def test_unsupported_gpu_is_named():
    message = start_error_message((27, 0, "cuptiPCSamplingEnable", "CUPTI_ERROR_NOT_SUPPORTED"), DEVICE)
    assert message == (
        "cupti backend cannot start pcsampling: GPU 0 (NVIDIA Tesla P100, compute capability 6.0) does not support "
        "CUPTI's PC Sampling API (cuptiPCSamplingEnable: CUPTI_ERROR_NOT_SUPPORTED); pcsampling needs an NVIDIA "
        "GPU of compute capability 7.0 or newer, not virtualized, not a MIG instance; profile without mode= for "
        "kernel times only")


@pytest.mark.parametrize("code, words", [(43, "is a MIG instance"), (33, "is a virtualized GPU"), (45, "is WSL")])
def test_unsupported_setups_say_why(code, words):
    message = start_error_message((code, 0, "cuptiPCSamplingEnable", "E"), DEVICE)
    assert f"GPU 0 (NVIDIA Tesla P100, compute capability 6.0) {words}" in message
    assert "compute capability 7.0 or newer" in message and "\n" not in message


@pytest.mark.parametrize("code", [26, 36, 39])
def test_another_client_gets_the_backend_message(code):
    assert start_error_message((code, 0, "cuptiPCSamplingEnable", "busy"), DEVICE, conflict=CONFLICT) == CONFLICT


def test_old_libcupti_and_missing_api():
    old = start_error_message((-1, -1, "checking the libcupti version", "20"), "the GPU", "/x/libcupti.so.12")
    assert old == ("cupti backend cannot start pcsampling: libcupti at /x/libcupti.so.12 has CUPTI API version 20; "
                   "pcsampling needs CUPTI from CUDA 12.4 or newer (its PC records changed there); set "
                   "PROTON_CUPTI_LIB_PATH to a newer libcupti (pip install nvidia-cuda-cupti)")
    missing = start_error_message((-2, -1, "loading the PC Sampling API", "cuptiPCSamplingGetData"), "the GPU", "/l.so")
    assert "lacks the PC Sampling API (cuptiPCSamplingGetData)" in missing


def test_other_failures_say_what_failed_where():
    message = start_error_message((1, 0, "configuring the hardware buffer size", "CUPTI_ERROR_INVALID_PARAMETER"),
                                  DEVICE)
    assert message == ("cupti backend cannot start pcsampling: configuring the hardware buffer size failed on GPU 0 "
                       "(NVIDIA Tesla P100, compute capability 6.0): CUPTI_ERROR_INVALID_PARAMETER")


# ------------------------------------------------------ the backend's start ----
class FakeNative:
    """The native module as the backend uses it, with a scripted pcsampling_start."""

    def __init__(self, error=None):
        self.error = error
        self.calls = []
        self.cubins = []

    def start(self):
        self.calls.append("start")

    def stop(self):
        self.calls.append("stop")

    def pcsampling_start(self, collection, interval, drain_ms, kernels, restart=True, restart_each_drain=True,
                         buffer_mb=0):
        self.calls.append(("pcsampling_start", collection, interval, drain_ms, kernels))
        self.buffer_mb = buffer_mb
        return self.error

    def register_cubin(self, cubin):
        self.cubins.append(cubin)
        return True

    def flush(self, with_metrics=False):
        self.calls.append(("flush", with_metrics))
        km = [(1, 4, "k", 0, ("f.py:3",), (("samples", 2),))]
        return ([], [], [], 0, []) + ((km,) if with_metrics else ())

    def stats(self):
        return {"zero_time": 0}

    def pcsampling_stats(self):
        return {"dropped_samples": 0, "hardware_full": 0, "enable_failures": 0, "get_errors": 0, "last_error": ""}

    def device_info(self, ordinal):
        return {"arch": "60"}

    def device_name(self, ordinal):
        return "NVIDIA Tesla P100"


def backend_with(native):
    from proton_cupti.backend import CuptiBackend

    backend = CuptiBackend.__new__(CuptiBackend)  # no driver here: start/stop/flush only
    backend.native, backend._devices, backend._started = native, {}, False
    backend.library = "/opt/cuda/libcupti.so.13"
    return backend


def test_failed_start_leaves_nothing_attached():
    native = FakeNative(error=(35, 0, "cuptiPCSamplingEnable", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"))
    backend = backend_with(native)
    with pytest.raises(ProtonError) as err:
        backend.start("pcsampling:interval=9")
    assert "NVreg_RestrictProfilingToAdminUsers=1" in str(err.value)
    assert native.calls == ["start", ("pcsampling_start", "continuous", 9, 100, "auto"), "stop"]
    assert backend._started is False and backend._pcs is None


def test_failed_start_names_the_gpu():
    native = FakeNative(error=(27, 0, "cuptiPCSamplingEnable", "CUPTI_ERROR_NOT_SUPPORTED"))
    with pytest.raises(ProtonError) as err:
        backend_with(native).start("pcsampling")
    assert "GPU 0 (NVIDIA Tesla P100, compute capability 6.0) does not support CUPTI's PC Sampling API" in str(err.value)


def test_bad_option_starts_nothing():
    native = FakeNative()
    with pytest.raises(ProtonError):
        backend_with(native).start("pcsampling:interval=2")
    assert native.calls == []


def test_started_backend_flushes_with_metrics_and_stops():
    native = FakeNative()
    backend = backend_with(native)
    backend.start("pcsampling:collection=serialized:kernels=serial")
    assert native.calls == ["start", ("pcsampling_start", "serialized", 10, 100, "serial")]
    batch = backend.flush()
    assert batch.kernel_metrics == [(1, 4, "k", 0, ("f.py:3",), (("samples", 2),))]
    backend.stop()
    assert native.calls[-1] == "stop" and backend._pcs is None
    plain = backend_with(FakeNative())
    plain.start(None)
    assert not hasattr(plain.flush(), "kernel_metrics") or plain.flush().kernel_metrics == []
    assert ("flush", False) in plain.native.calls


# --------------------------------------------------------------- triton ----
class CompiledKernel:
    def __init__(self, asm):
        self.asm = asm


class AutotunedKernel(CompiledKernel):
    pass


def test_triton_kernels_compiled_before_start_are_found(monkeypatch):
    compiler = types.ModuleType("triton.compiler.compiler")
    compiler.CompiledKernel = CompiledKernel
    monkeypatch.setitem(sys.modules, "triton.compiler.compiler", compiler)
    kernels = [CompiledKernel({"cubin": b"\x7fELF-one", "ptx": "..."}), AutotunedKernel({"cubin": b"\x7fELF-two"}),
               CompiledKernel({"cubin": b"\x7fELF-one"}),  # the same binary twice: once
               CompiledKernel({"hsaco": b"amd"})]
    cubins, note = pcsampling.triton_cubins()
    assert sorted(cubins) == [b"\x7fELF-one", b"\x7fELF-two"]
    assert note == "2 Triton cubins found, 1 compiled kernels without one"
    native = FakeNative()
    backend = backend_with(native)
    backend.start("pcsampling")
    assert sorted(native.cubins) == [b"\x7fELF-one", b"\x7fELF-two"]
    assert backend.pcsampling_note.startswith("2 Triton cubins found")
    del kernels


def test_without_triton_nothing_is_looked_for(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton.compiler.compiler", raising=False)
    assert pcsampling.triton_cubins() == ([], "triton is not imported")
    kept = []
    assert pcsampling.register_triton_cubins(kept.append) == "triton is not imported" and kept == []
