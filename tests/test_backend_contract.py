"""The synthetic backend passes the backend contract (the native recorder runs the same suite)."""

import pytest

from proton_core.testing import BackendContract, SyntheticDriver


class TestSyntheticBackend(BackendContract):
    @pytest.fixture
    def driver(self):
        return SyntheticDriver()
