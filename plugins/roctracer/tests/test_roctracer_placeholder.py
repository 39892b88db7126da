import pytest

import proton_core as proton
from proton_core.errors import ProtonError
from proton_core.plugins import get_plugins


def test_roctracer_explains_it_is_unavailable():
    pytest.importorskip("proton_roctracer")
    with pytest.raises(ProtonError, match="not implemented yet"):
        proton.start("x", backend="roctracer")
    assert get_plugins().records["roctracer"].kinds == ["backend"]
