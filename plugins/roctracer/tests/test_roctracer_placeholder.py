import pytest

import proton_core as proton
from proton_core.plugin_api import ProtonError
from proton_core.testing import get_plugins


def test_roctracer_explains_it_is_unavailable():
    pytest.importorskip("proton_roctracer")
    with pytest.raises(ProtonError, match="not implemented yet"):
        proton.start("x", backend="roctracer")
    assert get_plugins().record("roctracer").kinds == ["backend"]
