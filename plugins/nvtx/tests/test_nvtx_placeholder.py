import pytest

import proton_core as proton
from proton_core.plugin_api import ProtonError
from proton_core.testing import get_plugins, open_session_ids


def test_nvtx_hook_explains_it_is_not_implemented():
    pytest.importorskip("proton_nvtx")
    with pytest.raises(ProtonError, match="hook 'nvtx' cannot run: the nvtx plugin is not implemented yet"):
        proton.start("x", backend="fake", hook="nvtx")
    assert open_session_ids() == []
    assert get_plugins().record("nvtx").kinds == ["context"]
