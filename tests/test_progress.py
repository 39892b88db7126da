"""The progress line: nothing for fast work, one line on stderr for work past the delay."""

import logging
import re
import time

import pytest

import proton_core as proton
from proton_core import progress as progress_mod
from proton_core.formats import hatchet
from proton_core.progress import progress


@pytest.fixture
def unconfigured(monkeypatch):
    """A program that configured no logging (pytest puts its own handlers on the root logger)."""
    monkeypatch.setattr(progress_mod, "logging_configured", lambda: False)


def test_fast_work_prints_nothing(capsys, unconfigured):
    with progress("writing fast.hatchet"):
        pass
    time.sleep(0.05)
    assert capsys.readouterr().err == ""


def test_slow_work_prints_one_line_ended_with_the_time(capsys, unconfigured):
    with progress("writing big.hatchet", delay=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert re.fullmatch(r"proton: writing big\.hatchet \.\.\. 0\.[3-9] s\n", err), err


def test_failed_work_says_so(capsys, unconfigured):
    with pytest.raises(OSError):
        with progress("writing big.hatchet", prefix="proton-view", delay=0.05):
            time.sleep(0.2)
            raise OSError("disk full")
    err = capsys.readouterr().err
    assert re.fullmatch(r"proton-view: writing big\.hatchet \.\.\. failed after 0\.\d s\n", err), err


def test_silenced_with_the_proton_logger(capsys, unconfigured):
    logger = logging.getLogger("proton")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with progress("writing big.hatchet", delay=0.01):
            time.sleep(0.1)
    finally:
        logger.setLevel(level)
    assert capsys.readouterr().err == ""


def test_the_programs_logging_gets_one_record(capsys, caplog):
    caplog.set_level(logging.INFO, logger="proton")
    with progress("writing big.hatchet", delay=0.01):
        time.sleep(0.1)
    assert capsys.readouterr().err == ""
    (record,) = [r for r in caplog.records if r.name == "proton"]
    assert record.levelname == "INFO" and re.fullmatch(r"writing big\.hatchet: 0\.\d s", record.getMessage())


def slow(monkeypatch, module, name, seconds=0.3):
    original = getattr(module, name)

    def slowed(*args, **kwargs):
        time.sleep(seconds)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, slowed)


def test_finalize_shows_progress_when_writing_is_slow(capsys, unconfigured, monkeypatch, tmp_path, fake):
    monkeypatch.setattr(progress_mod, "DELAY", 0.05)
    proton.start(str(tmp_path / "quick"), backend="fake")
    fake.launch("k", 10)
    proton.finalize()
    assert capsys.readouterr().err == ""  # fast enough: nothing
    slow(monkeypatch, hatchet, "document")
    proton.start(str(tmp_path / "slow"), backend="fake")
    fake.launch("k", 10)
    proton.finalize()
    err = capsys.readouterr().err
    assert re.fullmatch(rf"proton: writing {re.escape(str(tmp_path / 'slow.hatchet'))} \.\.\. 0\.\d s\n", err), err


def test_viewer_shows_progress_when_loading_is_slow(capsys, unconfigured, monkeypatch, tmp_path, fake):
    pytest.importorskip("hatchet")
    from proton_core import viewer

    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", 10)
    proton.finalize()
    monkeypatch.setattr(progress_mod, "DELAY", 0.05)
    slow(monkeypatch, viewer, "read")
    assert viewer.main([str(tmp_path / "p.hatchet")]) == 0
    out, err = capsys.readouterr()
    assert "k" in out
    assert re.fullmatch(rf"proton-view: reading {re.escape(str(tmp_path / 'p.hatchet'))} \.\.\. 0\.\d s\n", err), err
