"""Fixtures shared by the core's tests and the plugins' tests: a clean manager, the fake backend."""

import pytest

import fake_backend
from proton_core.context import THREAD
from proton_core.plugins import get_plugins
from proton_core.session import MANAGER


@pytest.fixture(autouse=True)
def clean_manager():
    """Every test starts with no session and leaves none behind."""
    plugins = get_plugins()
    if "fake" not in plugins.backends.items:
        plugins.register(fake_backend, name="fake_backend", distribution="tests")
    yield
    MANAGER.cli_owned = False
    with MANAGER.lock:
        MANAGER._close(list(MANAGER.sessions.values()), plugins)
        MANAGER.sessions.clear()
        MANAGER._refresh()
    THREAD.stack.clear()
    THREAD.state = None
    THREAD.op = None
    THREAD.recompute()


@pytest.fixture
def fake():
    """Start-able fake backend; returns a helper to reach the live instance."""
    class Handle:
        @property
        def backend(self):
            return fake_backend.FakeBackend.instance

        def launch(self, *a, **k):
            self.backend.launch(*a, **k)

    return Handle()

