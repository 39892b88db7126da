import pytest

from fake_triton import FakeTriton


@pytest.fixture
def ftriton(tmp_path, monkeypatch):
    """A fake Triton and GPU behind ``backend="instrumentation"`` (see fake_triton.py)."""
    from proton_instrumentation.backend import InstrumentationBackend

    fake = FakeTriton(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(InstrumentationBackend, "env_factory", staticmethod(lambda: fake.env))
    monkeypatch.setattr(InstrumentationBackend, "device_factory", staticmethod(lambda: fake.device))
    return fake
