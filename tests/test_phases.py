"""Phases: data split by launch time, read when complete, cleared, merged at finalize."""

import pytest

import proton_core as proton
from proton_core.testing import child, load_profile


def kernel_count(doc, *path):
    return child(doc[0], *path)["metrics"]["count"]


def names(doc):
    return [c["frame"]["name"] for c in doc[0]["children"]]


def test_kernels_go_to_the_phase_current_at_launch(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("step"):
        fake.launch("k")
        fake.launch("k")
    assert proton.data.advance_phase(sid) == 1  # the two kernels are not delivered yet: they stay in phase 0
    with proton.scope("step"):
        fake.launch("k")
    assert kernel_count(proton.data.get(sid, 0), "step", "k") == 2
    assert kernel_count(proton.data.get(sid, 1), "step", "k") == 1


def test_a_closed_phase_is_complete_after_a_flush_the_current_one_never(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    assert not proton.data.is_phase_complete(sid, 0)
    proton.data.advance_phase(sid)
    assert proton.data.is_phase_complete(sid, 0)
    assert not proton.data.is_phase_complete(sid, 1)
    with pytest.raises(proton.ProtonError, match="phase 5 does not exist: phases run from 0 to 1"):
        proton.data.is_phase_complete(sid, 5)


def test_clear_frees_a_phase_and_finalize_writes_the_rest_merged(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("a", {"bytes": 1}):
        fake.launch("k")
    proton.data.advance_phase(sid)
    with proton.scope("a", {"bytes": 2}):
        fake.launch("k")
    proton.data.advance_phase(sid)
    with proton.scope("a", {"bytes": 4}):
        fake.launch("k")
    assert proton.data.is_phase_complete(sid, 0)
    proton.data.clear(sid, 0)
    with pytest.raises(proton.ProtonError, match="phase 0 of session .* was cleared"):
        proton.data.get(sid, 0)
    proton.finalize(sid)
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert child(root, "a")["metrics"]["bytes"] == 6 and kernel_count([root], "a", "k") == 2


def test_clear_up_to_and_the_current_phase_is_emptied_not_removed(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    for _ in range(3):
        fake.launch("k")
        proton.data.advance_phase(sid)
    fake.launch("k")
    proton.data.is_phase_complete(sid, 2)
    proton.data.clear(sid, 3, clear_up_to_phase=True)
    assert names(proton.data.get(sid, 3)) == []
    fake.launch("k")
    assert kernel_count(proton.data.get(sid, 3), "k") == 1



def test_records_of_a_phase_cleared_too_early_are_counted_not_lost(tmp_path, fake, caplog):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    fake.launch("k")
    proton.data.advance_phase(sid)
    proton.data.clear(sid, 0)  # before the kernels were delivered
    proton.finalize(sid)
    assert load_profile(tmp_path / "p.hatchet")[0]["children"] == []
    assert any("2 kernels arrived for phases already cleared" in r.getMessage() for r in caplog.records)


def test_none_session_is_a_no_op_as_upstream():
    assert proton.data.get(None) is None and proton.data.advance_phase(None) is None
    assert proton.data.is_phase_complete(None) is False
    proton.data.clear(None)


def test_records_delivered_after_their_epoch_retired_are_counted_and_named(tmp_path, fake, caplog):
    """A backend that hands over a record one flush too late (against its contract) loses nothing silently."""
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    old_epoch = fake.backend.epoch
    proton.data.advance_phase(sid)
    assert proton.data.is_phase_complete(sid, 0)  # this flush retires the old epoch
    with fake.backend.lock:
        fake.backend.records[(old_epoch, 0, "late", 0)] = [1000, 3]
    proton.finalize(sid)
    doc = load_profile(tmp_path / "p.hatchet")
    assert kernel_count(doc, "k") == 1
    assert doc[0]["metrics"]["dropped"] == 3
    assert any("delivered 3 kernel records after the flush" in r.getMessage() for r in caplog.records)


def test_phase_end_reaches_the_backend_on_the_ending_thread_and_unobserved_time_the_file(tmp_path, fake):
    """Backends do between-phase upkeep in phase_ended; time they were blind is written, not hidden."""
    import threading

    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    proton.data.advance_phase(sid)
    assert fake.backend.phase_end_threads == [threading.get_ident()]
    fake.backend.unobserved_ns = 1500  # as after a re-attach
    fake.launch("k")
    proton.finalize(sid)
    doc = load_profile(tmp_path / "p.hatchet")
    assert kernel_count(doc, "k") == 2
    assert doc[0]["metrics"]["unobserved (ns)"] == 1500


def test_kernels_without_a_duration_are_counted_written_and_named_once(tmp_path, fake, caplog):
    sid = proton.start(str(tmp_path / "p"), backend="fake", mode="periodic_flushing:poll=30")
    fake.launch("k")
    fake.backend.untimed = 1  # the vendor library gave this kernel no duration
    proton.data.advance_phase(sid)
    assert proton.data.is_phase_complete(sid, 0)
    fake.launch("k")
    fake.backend.untimed = 1
    paths = proton.finalize(sid)
    roots = [load_profile(p)[0] for p in paths]
    assert sum(r["metrics"].get("untimed", 0) for r in roots) == 2  # filed with the phase current when reported
    assert [r["metrics"]["count"] for r in roots] == [0, 0] and all(kernel_count([r], "k") == 1 for r in roots)
    messages = [r.getMessage() for r in caplog.records if "without a duration" in r.getMessage()]
    assert len(messages) == 1 and "see 'untimed' in the profile" in messages[0]
