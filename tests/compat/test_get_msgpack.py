"""``proton.data.get_msgpack``: upstream's MessagePack form of ``proton.data.get``."""

import pytest

import proton_core as proton


def test_get_msgpack_unpacks_to_what_get_returns(tmp_path):
    """Upstream's test_get_data: ``msgpack.loads(proton.data.get_msgpack(s))`` equals ``proton.data.get(s)``."""
    msgpack = pytest.importorskip("msgpack")
    sid = proton.start(str(tmp_path / "m"), backend="host")
    with proton.scope("foo", {"a (pty)": "1", "n": 2}):
        pass
    document = proton.data.get(sid)
    packed = proton.data.get_msgpack(sid)
    assert isinstance(packed, bytes)
    assert msgpack.loads(packed, raw=False, strict_map_key=False) == document
    assert proton.data.get_msgpack(None) is None
    proton.finalize()
