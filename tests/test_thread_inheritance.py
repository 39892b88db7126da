"""Kernels a thread launches without ever opening a scope go under the main thread's scope of the moment
(upstream's test_scope_backward: autograd runs the backward pass on threads of its own).  Decision 0245."""

import json
import threading

import proton_core as proton


def children(tmp_path, name="o"):
    root = json.loads((tmp_path / f"{name}.hatchet").read_text())[0]
    return {c["frame"]["name"]: c for c in root["children"]}


def launch_in_thread(fake, kernel):
    t = threading.Thread(target=fake.launch, args=(kernel,))
    t.start()
    t.join()


def test_a_scopeless_thread_launches_under_the_main_threads_scope(tmp_path, fake):
    proton.start(str(tmp_path / "o"), backend="fake")
    with proton.scope("forward"):
        fake.launch("fwd")
    with proton.scope("backward"):  # a2.backward(): the main thread waits, a worker launches
        launch_in_thread(fake, "bwd")
    launch_in_thread(fake, "after")  # the main thread at the root again
    proton.finalize()
    top = children(tmp_path)
    assert set(top) == {"forward", "backward", "after"}
    assert [c["frame"]["name"] for c in top["backward"]["children"]] == ["bwd"]


def test_a_thread_with_its_own_scopes_keeps_them(tmp_path, fake):
    proton.start(str(tmp_path / "o"), backend="fake")

    def worker():
        with proton.scope("mine"):
            fake.launch("k")

    with proton.scope("main"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    proton.finalize()
    top = children(tmp_path)
    assert "mine" in top and "main" not in top  # its own scope, at the root (the main scope launched nothing)
    assert [c["frame"]["name"] for c in top["mine"]["children"]] == ["k"]
