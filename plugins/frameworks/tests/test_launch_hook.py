"""Upstream's ``triton.profiler.hooks.launch`` objects: ``LaunchHook().configure(include=, exclude=)`` and
``id``, on a Triton-shaped fake (the hooks are called through its HookChains, as Triton calls them)."""

import threading

import pytest

import proton_core as proton
from fwtest import install_fake_triton, load, names, node
from proton_frameworks import launch_hook, triton_hook
from proton_frameworks.testing import LazyDict


@pytest.fixture
def runtime(monkeypatch):
    monkeypatch.setattr(triton_hook, "_PYTHON_ONLY", False)
    monkeypatch.setattr(launch_hook.State, "filter", None)
    monkeypatch.setattr(launch_hook.State, "ids", False)
    return install_fake_triton(monkeypatch)


def launch(runtime, fake, kernel, fn=None):
    meta = LazyDict({"name": kernel, "function": 1, "stream": 0})
    if fn is not None:
        meta.add(fn, ((1, 1, 1), {"num_warps": 4}, {}))
    runtime.launch_enter_hook(meta)
    fake.launch(kernel, 100)
    runtime.launch_exit_hook(meta)


def test_include_runs_launch_metadata_of_matching_kernels_only(tmp_path, fake, runtime):
    ran = []

    def foo_meta(grid, metadata, args):
        ran.append("foo")
        return {"name": "foo_meta", "flops16": 8}

    def bar_meta(grid, metadata, args):
        ran.append("bar")
        return {"name": "bar_meta"}

    hook = launch_hook.LaunchHook()
    hook.configure(include=".*foo")
    proton.start(str(tmp_path / "p"), backend="fake", hook=hook)
    with proton.scope("test0"):
        launch(runtime, fake, "foo", foo_meta)
        launch(runtime, fake, "bar", bar_meta)
    proton.finalize()
    hook.configure(include=None, exclude=None)
    assert ran == ["foo"]
    root, _ = load(tmp_path / "p.hatchet")
    assert sorted(names(node(root, "test0"))) == ["bar", "foo_meta"]  # bar keeps its kernel name
    assert node(root, "test0", "foo_meta")["metrics"]["flops16"] == 8


def test_exclude_skips_matching_kernels(tmp_path, fake, runtime):
    ran = []
    meta = lambda grid, metadata, args: ran.append(1) or {"name": "renamed"}  # noqa: E731
    launch_hook.LaunchHook().configure(exclude="skip_.*")
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    launch(runtime, fake, "skip_me", meta)
    launch(runtime, fake, "keep_me", meta)
    proton.finalize()
    assert ran == [1]
    root, _ = load(tmp_path / "p.hatchet")
    assert sorted(names(root)) == ["renamed", "skip_me"]


def test_launch_ids_are_unique_across_threads(tmp_path, fake, runtime):
    launch_hook.ids_on()
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    seen = []

    def work():
        for _ in range(100):
            launch(runtime, fake, "k")
            seen.append(launch_hook.id.get())

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    assert len(seen) == 200 and len(set(seen)) == 200 and None not in seen


def test_configuring_swaps_installed_native_hooks_for_the_python_ones(tmp_path, fake, runtime):
    proton.start(str(tmp_path / "p"), backend="fake", hook="triton")
    before = list(runtime.launch_enter_hook.calls)
    launch_hook.LaunchHook().configure(include="x")
    after = list(runtime.launch_enter_hook.calls)
    proton.finalize()
    assert triton_hook.launch_enter in after and len(after) == len(before)
    assert runtime.launch_enter_hook.calls == []  # and removed with the last session


def test_a_bad_pattern_is_one_line():
    with pytest.raises(proton.ProtonError, match=r"LaunchHook.configure\(include='\['\): not a regular expression"):
        launch_hook.LaunchHook().configure(include="[")
