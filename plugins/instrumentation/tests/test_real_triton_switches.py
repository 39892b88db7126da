"""With the real Triton package (no GPU: a fake device): start sets Triton's own switches, loads no
libproton, and the flags object we set is the one ``triton.profiler.language`` reads when the user
imports it afterwards; finalize restores everything. Runs in a subprocess: a clean ``sys.modules``."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import proton_core as proton
    from fake_triton import FakeDevice
    from proton_instrumentation.backend import InstrumentationBackend
    from proton_instrumentation.compiler_hook import ProtonPasses
    InstrumentationBackend.device_factory = staticmethod(FakeDevice)
    import triton
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime import _allocation
    before = _allocation._profile_allocator.get()
    proton.start({out!r}, backend="instrumentation", mode="default:granularity=cta")
    assert "triton._C.libproton" not in sys.modules, "we loaded libproton"
    assert "triton.profiler" not in sys.modules, "we imported triton.profiler"
    assert isinstance(CUDABackend.instrumentation, ProtonPasses)
    assert triton.knobs.compilation.instrumentation_mode.startswith("proton-plugin/1:default:")
    assert _allocation._profile_allocator.get() is not before
    assert len(triton.knobs.runtime.launch_enter_hook.calls) == 1
    import triton.profiler.language as pl  # the user's import, after start
    from triton.profiler.flags import flags
    assert flags.instrumentation_on is True and pl.flags is flags
    proton.finalize()
    assert flags.instrumentation_on is False and CUDABackend.instrumentation is None
    assert triton.knobs.compilation.instrumentation_mode == ""
    assert _allocation._profile_allocator.get() is before
    assert triton.knobs.runtime.launch_enter_hook.calls == [] and triton.knobs.runtime.kernel_load_end_hook.calls == []
    print("ok")
""")


def test_switches_on_the_real_triton(tmp_path):
    script = SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path / "p"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
