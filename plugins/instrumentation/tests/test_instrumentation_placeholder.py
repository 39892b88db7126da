import pytest

import proton_core as proton
from proton_core.plugin_api import ProtonError
from proton_core.testing import get_plugins


def test_instrumentation_explains_it_is_unavailable():
    pytest.importorskip("proton_instrumentation")
    with pytest.raises(ProtonError, match="backend 'instrumentation' cannot run here: .*not implemented yet"):
        proton.start("x", backend="instrumentation")
    assert get_plugins().record("instrumentation").kinds == ["backend"]
    assert "not implemented yet" in get_plugins().backends.get("instrumentation").unavailable_reason()
