"""The torch observer (proton_core.graph_capture_torch): CUDAGraph's capture and replay reach graph_metrics.

A stand-in class with CUDAGraph's three methods plays torch's here (no GPU); the real class is checked
to be wrapped once a session starts, and, in a fresh process, once torch is imported after the start.
"""

import subprocess
import sys
import textwrap

import pytest

import proton_core as proton
from proton_core import graph_capture_torch, graph_metrics
from proton_core.testing import SyntheticBackend, child, load_profile
from proton_core.testing.synthetic import SyntheticGraph


class FakeCUDAGraph:
    """CUDAGraph's capture_begin/capture_end/replay, driving the synthetic backend's graph capture."""

    fail_end = False

    @property
    def backend(self):
        return SyntheticBackend.instance  # made when the session starts

    def capture_begin(self, pool=None, capture_error_mode="global"):
        self.backend.local.graph = self.kernels = SyntheticGraph()

    def capture_end(self):
        self.backend.local.graph = None
        if self.fail_end:
            raise RuntimeError("operation not permitted when stream is capturing")

    def replay(self):
        self.backend.replay(self.kernels)


@pytest.fixture
def graph_class(fake):
    cls = type("CUDAGraph", (FakeCUDAGraph,), {})
    assert graph_capture_torch.wrap(cls) and graph_capture_torch.wrap(cls)  # twice: wrapped once
    return cls


def test_capture_and_replay_of_a_wrapped_class_count_per_replay(tmp_path, fake, graph_class):
    proton.start(str(tmp_path / "p"), backend="fake")
    graph = graph_class()
    graph.capture_begin(capture_error_mode="thread_local")
    assert graph_metrics.CAPTURE.on
    with proton.scope("s", metrics={"bytes": 4}):
        fake.launch("k")
    graph.capture_end()
    assert not graph_metrics.CAPTURE.on
    with proton.scope("run"):
        for _ in range(3):
            graph.replay()
    proton.finalize()
    root = load_profile(str(tmp_path / "p.hatchet"))[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["run"]
    s = child(root, "run", "<captured_at>", "s")
    assert s["metrics"] == {"bytes": 12} and child(s, "k")["metrics"]["count"] == 3


def test_a_failed_capture_registers_nothing_and_ends_the_capture(tmp_path, fake, graph_class):
    proton.start(str(tmp_path / "p"), backend="fake")
    graph = graph_class()
    graph.fail_end = True
    graph.capture_begin()
    with proton.scope("s", metrics={"bytes": 4}):
        pass
    with pytest.raises(RuntimeError, match="capturing"):
        graph.capture_end()
    assert not graph_metrics.CAPTURE.on and not graph_metrics._GRAPHS


def test_a_class_without_the_methods_is_left_alone():
    class Other:
        def replay(self):
            pass

    assert not graph_capture_torch.wrap(Other)
    assert not hasattr(Other, graph_capture_torch._MARK)


def test_torchs_class_is_wrapped_when_a_session_starts(tmp_path):
    torch = pytest.importorskip("torch")
    proton.start(str(tmp_path / "p"), backend="fake")
    cls = torch.cuda.CUDAGraph
    assert cls.__dict__.get(graph_capture_torch._MARK)
    assert cls.replay.__wrapped__ is not None and cls.capture_begin.__name__ == "capture_begin"


def test_torch_imported_after_the_start_is_wrapped_at_its_import(tmp_path):
    pytest.importorskip("torch")
    program = textwrap.dedent(f"""
        import sys
        import proton_core as proton
        assert "torch" not in sys.modules
        proton.start({str(tmp_path / "p")!r}, backend="host")
        assert "torch" not in sys.modules  # never imported by the profiler
        import torch
        print(torch.cuda.CUDAGraph.__dict__.get("{graph_capture_torch._MARK}"))
        proton.finalize()
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
