"""A scope bookkeeping error never ends the program (issue 40, item 4): repaired, counted, said once per place.

Each case failed before with an exception from inside the core (``ProtonError`` for the generator that yields
inside its own scope at step 0, a raw ``IndexError`` for a scope exited on another thread, which also left the
first thread's scope open so that every later kernel was filed under it).
"""

import logging
import threading

import pytest

import proton_core as proton
from proton_core.errors import ProtonError
from proton_core.plugin_api import open_scopes
from proton_core.testing import load_profile


def root_count(path):
    return load_profile(path)[0]["metrics"].get("unbalanced_scopes", 0)


def loader():
    while True:
        with proton.scope("load"):
            yield 1


def test_a_generator_yielding_inside_its_scope_does_not_end_the_run(tmp_path, fake, caplog):
    it = loader()
    proton.start(str(tmp_path / "p"), backend="fake")
    with caplog.at_level(logging.WARNING, logger="proton"):
        for _ in range(3):
            with proton.scope("step"):
                next(it)
                fake.launch("train", 10)
            assert open_scopes() == []  # "load", left open by the generator, was closed with "step"
    fake.launch("after", 10)
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    names = {c["frame"]["name"] for c in root["children"]}
    assert "after" in names  # at the root, not under a scope left open
    # step 0..2: "step" closed "load" with it; steps 1..2: the generator's own exit of "load" found it closed
    assert root["metrics"]["unbalanced_scopes"] == 5
    lines = [r.getMessage() for r in caplog.records if "unbalanced_scopes" in r.getMessage()]
    assert len(lines) == 2 and all("\n" not in line for line in lines)  # once per place, one line each


def test_strict_mode_keeps_the_error(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("PROTON_STRICT_SCOPES", "1")
    it = loader()
    proton.start(str(tmp_path / "p"), backend="fake")
    with pytest.raises(ProtonError, match="does not match the innermost open scope 'load'"):
        with proton.scope("step"):
            next(it)


def test_a_scope_exited_on_another_thread_is_closed_on_its_own(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    outer = proton.scope("outer")
    outer.__enter__()
    inner = proton.scope("inner")
    inner.__enter__()
    errors = []

    def close_elsewhere():
        try:
            outer.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - what the test is about
            errors.append(exc)

    t = threading.Thread(target=close_elsewhere)
    t.start()
    t.join()
    assert errors == []
    assert open_scopes() == []  # "outer" and "inner", opened inside it, closed on this thread
    with proton.scope("next"):
        fake.launch("k", 1)
    inner.__exit__(None, None, None)  # its own exit, later: nothing left to close, counted
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["next"]
    assert root["metrics"]["unbalanced_scopes"] == 2


def test_exits_with_nothing_open_return_and_count(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    assert proton.exit_scope() == -1
    proton.enter_scope("a")
    assert proton.exit_scope("not-open") == -1  # "a" stays open
    assert open_scopes() == ["a"]
    proton.exit_scope("a", metrics={"bytes": 4})
    proton.finalize()
    assert root_count(tmp_path / "p.hatchet") == 2


def test_an_exit_below_the_innermost_closes_what_is_above_and_files_its_metrics_on_it(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    proton.enter_scope("a")
    proton.enter_scope("b")
    proton.exit_scope("a", metrics={"bytes": 7})
    assert open_scopes() == []
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    a = next(c for c in root["children"] if c["frame"]["name"] == "a")
    assert a["metrics"]["bytes"] == 7 and root["metrics"]["unbalanced_scopes"] == 1
