"""open_counted_op: one cached step per launch, never counting into a stale session or entry."""

import threading

import proton_core as proton
from proton_core import tallies as tallies_module
from proton_core.plugin_api import close_op, metric_name, open_counted_op
from proton_core.session import MANAGER
from proton_core.testing import child, load_profile

NUMBERS = ((metric_name("flops"), 3), (metric_name("bytes"), 8))


def launch(fake, key, name="op", numbers=NUMBERS):
    """What the Triton hook does: the cached step, else the building one."""
    assert open_counted_op(key) or open_counted_op(key, name, numbers)
    fake.launch("k")
    close_op()


def test_repeated_launches_are_cached_and_counted_exactly(tmp_path, fake):
    proton.start(str(tmp_path / "run"), backend="fake")
    assert not open_counted_op("meta")  # never opened here: the caller must build it
    with proton.scope("outer"):
        for _ in range(5):
            launch(fake, "meta")
    for _ in range(2):
        launch(fake, "meta")  # another context: another entry
    (path,) = proton.finalize()
    tree = load_profile(path)[0]
    inner = child(child(tree, "outer"), "op")
    assert inner["metrics"]["flops"] == 15 and inner["metrics"]["bytes"] == 40
    assert inner["metrics"]["count"] == 5  # the op names the kernel node it carries
    assert child(tree, "op")["metrics"]["flops"] == 6


def test_a_session_started_later_is_counted_and_a_stopped_one_is_not(tmp_path, fake):
    first = proton.start(str(tmp_path / "a"), backend="fake")
    launch(fake, "meta")
    second = proton.start(str(tmp_path / "b"), backend="fake")
    launch(fake, "meta")  # the cache of the first launch is stale: both sessions count this one
    proton.deactivate(first)
    launch(fake, "meta")
    (path_b,) = proton.finalize(second)
    (path_a,) = proton.finalize(first)
    assert child(load_profile(path_a)[0], "op")["metrics"]["flops"] == 6
    assert child(load_profile(path_b)[0], "op")["metrics"]["flops"] == 6


def test_retired_tally_entries_are_settled_once_more_and_refetched(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(tallies_module, "MAX_IDLE", 0)  # retire every idle entry at each settle
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=60")
    launch(fake, "meta")
    proton.data.advance_phase(sid)  # settles: the entry counted, it stays
    proton.data.advance_phase(sid)  # settles: the entry was idle, it is retired
    (session,) = MANAGER.active
    generation = proton.plugin_api.ACTIVITY.generation
    session.settle()  # the retired entry is settled once more; nothing new is idle
    assert proton.plugin_api.ACTIVITY.generation == generation and not session.tallies.retired
    launch(fake, "meta")
    proton.data.advance_phase(sid)
    session.settle()  # idle again: retired, and cached counters are stale
    assert proton.plugin_api.ACTIVITY.generation > generation
    (key, entry), = session.tallies.retired
    next(entry[1])  # a launch that took the counter just before it was retired
    launch(fake, "meta")  # the next launch takes a fresh counter
    paths = proton.finalize(sid)
    flops = [child(load_profile(p)[0], "op")["metrics"].get("flops") for p in paths]
    # phase 1 launched nothing (no file); the last phase has the late count and the new one: nothing lost
    assert flops == [3, 3, 6]


def test_python_context_and_properties_take_the_general_path(tmp_path, fake):
    proton.start(str(tmp_path / "py"), backend="fake", context="python")
    assert not open_counted_op("meta", "op", NUMBERS)
    proton.finalize()
    proton.start(str(tmp_path / "pty"), backend="fake")
    assert not open_counted_op("meta", "op", ((metric_name("tiles (pty)"), 3),))
    assert not open_counted_op("meta", "op", ())
    proton.finalize()


def test_threads_count_into_their_own_contexts_without_loss(tmp_path, fake):
    proton.start(str(tmp_path / "run"), backend="fake")

    def work(name):
        with proton.scope(name):
            for _ in range(2000):
                assert open_counted_op("meta") or open_counted_op("meta", "op", NUMBERS)
                close_op()

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (path,) = proton.finalize()
    tree = load_profile(path)[0]
    assert [child(child(tree, f"t{i}"), "op")["metrics"]["flops"] for i in range(4)] == [6000] * 4
