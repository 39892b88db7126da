"""Per-launch numbers are counted (proton_core.tallies) and land in the phase they were added in."""

import threading

import proton_core as proton
from proton_core.plugin_api import add_numbers_here, close_op, metric_name, open_op
from proton_core.testing import child, load_profile
from proton_core.tallies import Tallies


def test_counted_numbers_are_multiplied_in_and_properties_merge_at_once():
    tallies, merged = Tallies(), []
    numbers = ((metric_name("flops"), 2.0), (metric_name("bytes"), 8))
    for _ in range(5):
        assert tallies.add(7, numbers)
    assert not tallies.add(7, ((metric_name("tiles (pty)"), 3),))  # a property: merged directly
    tallies.settle(lambda ctx, parsed: merged.append((ctx, [(n.key, v) for n, v in parsed])))
    assert merged == [(7, [("flops", 10.0), ("bytes", 40)])]
    tallies.settle(lambda ctx, parsed: merged.append(ctx))
    assert len(merged) == 1  # nothing new: nothing merged twice


def test_no_count_is_lost_or_doubled_across_threads_while_settling():
    tallies, total = Tallies(), [0]
    numbers = ((metric_name("n"), 1),)
    stop = threading.Event()

    def settle_often():
        while not stop.is_set():
            tallies.settle(lambda ctx, parsed: total.__setitem__(0, total[0] + parsed[0][1]))

    settler = threading.Thread(target=settle_often)
    settler.start()
    workers = [threading.Thread(target=lambda: [tallies.add(1, numbers) for _ in range(20000)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    settler.join()
    tallies.settle(lambda ctx, parsed: total.__setitem__(0, total[0] + parsed[0][1]))
    assert total[0] == 80000


def test_numbers_land_in_the_phase_they_were_added_in(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=60")
    numbers = ((metric_name("flops"), 3),)
    for phase_launches in (4, 2):
        for _ in range(phase_launches):
            open_op("op")
            add_numbers_here(numbers)
            fake.launch("k")
            close_op()
        proton.data.advance_phase(sid)
    paths = proton.finalize(sid)
    flops = [child(load_profile(p)[0], "op")["metrics"].get("flops") for p in paths[:2]]
    assert flops == [12, 6]
