"""Sibling scopes are written in the order the program first launched under them (upstream's test_triton):
a backend's flush delivers records in its own (hash) order; the core files them in node order."""

import json

import proton_core as proton


def test_siblings_keep_the_order_of_their_first_launch(tmp_path, fake, monkeypatch):
    proton.start(str(tmp_path / "o"), backend="fake")
    backend = fake.backend
    flush = backend.flush

    def reversed_flush():  # a backend whose records come in any order
        batch = flush()
        batch.records = list(reversed(batch.records))
        return batch

    monkeypatch.setattr(backend, "flush", reversed_flush)
    with proton.scope("test0"):
        with proton.scope("test1"):
            fake.launch("k")
    with proton.scope("test2"):
        fake.launch("k")
    with proton.scope("test3"):
        fake.launch("k")
    proton.finalize()
    root = json.loads((tmp_path / "o.hatchet").read_text())[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["test0", "test2", "test3"]
