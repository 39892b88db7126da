"""The one Triton hook manager (proton_frameworks.triton_hooks): priorities, counts per user, exact
restoration, and each Triton API generation, with stand-ins for Triton's hook owners."""

import types

import pytest

from fwtest import HookChain
from proton_frameworks.triton_hooks import (
    INSTRUMENTATION_PRIORITY,
    LAUNCH_METADATA_PRIORITY,
    TritonHooks,
)

def runtime_36():
    """Triton 3.6's knobs.runtime: HookChains, the exit chain calling in reverse."""
    return types.SimpleNamespace(launch_enter_hook=HookChain(), launch_exit_hook=HookChain(reversed=True),
                                 kernel_load_end_hook=HookChain(reversed=True))


def runtime_33():
    """Triton 3.3-3.5's knobs.runtime: one callable or None per hook."""
    return types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)


def compiled_kernel_30():
    """Triton 3.0-3.2: class attributes of CompiledKernel."""
    return type("CompiledKernel", (), {"launch_enter_hook": None, "launch_exit_hook": None})


def recorder(seen, name):
    def hook(*args):
        seen.append(name)

    hook.__name__ = name
    return hook


def pair(seen, user):
    return {"launch_enter_hook": recorder(seen, f"{user}.enter"), "launch_exit_hook": recorder(seen, f"{user}.exit")}


def launch(owner):
    owner.launch_enter_hook("meta")
    owner.launch_exit_hook("meta")


@pytest.mark.parametrize("make", [runtime_36, runtime_33, compiled_kernel_30], ids=["3.6", "3.3", "3.0"])
def test_higher_priority_enters_first_and_exits_last_whatever_the_install_order(make):
    manager, owner, seen = TritonHooks(), make(), []
    low = manager.install(owner, "instrumentation", INSTRUMENTATION_PRIORITY, pair(seen, "instr"))
    high = manager.install(owner, "triton", LAUNCH_METADATA_PRIORITY, pair(seen, "triton"))
    launch(owner)
    assert seen == ["triton.enter", "instr.enter", "instr.exit", "triton.exit"]
    low.release()
    seen.clear()
    launch(owner)
    assert seen == ["triton.enter", "triton.exit"]
    high.release()
    assert owner.launch_enter_hook is None or owner.launch_enter_hook.calls == []


def test_equal_priorities_keep_their_install_order():
    manager, owner, seen = TritonHooks(), runtime_36(), []
    manager.install(owner, "a", 5, pair(seen, "a"))
    manager.install(owner, "b", 5, pair(seen, "b"))
    launch(owner)
    assert seen == ["a.enter", "b.enter", "b.exit", "a.exit"]


def test_chain_keeps_the_users_hooks_where_they_are_and_removal_restores_them_exactly():
    manager, owner, seen = TritonHooks(), runtime_36(), []
    before, after = recorder(seen, "user.before"), recorder(seen, "user.after")
    owner.launch_enter_hook.add(before)
    low = manager.install(owner, "instrumentation", 0, pair(seen, "instr"))
    owner.launch_enter_hook.add(after)  # the user's, added while ours are in
    high = manager.install(owner, "triton", 100, pair(seen, "triton"))
    enter = owner.launch_enter_hook.calls
    assert [f.__name__ for f in enter] == ["user.before", "triton.enter", "instr.enter", "user.after"]
    high.release()
    low.release()
    assert owner.launch_enter_hook.calls == [before, after]
    assert owner.launch_exit_hook.calls == []


@pytest.mark.parametrize("make", [runtime_33, compiled_kernel_30], ids=["3.3", "3.0"])
def test_single_callable_slot_runs_the_users_hook_outermost_and_gets_it_back(make):
    manager, owner, seen = TritonHooks(), make(), []
    user_enter, user_exit = recorder(seen, "user.enter"), recorder(seen, "user.exit")
    owner.launch_enter_hook, owner.launch_exit_hook = user_enter, user_exit
    low = manager.install(owner, "instrumentation", 0, pair(seen, "instr"))
    high = manager.install(owner, "triton", 100, pair(seen, "triton"))
    launch(owner)
    assert seen == ["user.enter", "triton.enter", "instr.enter", "instr.exit", "triton.exit", "user.exit"]
    low.release()
    high.release()
    assert owner.launch_enter_hook is user_enter and owner.launch_exit_hook is user_exit


def test_single_callable_slot_alone_holds_our_callable_itself():
    """No composite between Triton and a lone hook of ours (a native hook stays a direct call)."""
    manager, owner, seen = TritonHooks(), runtime_33(), []
    hooks = pair(seen, "triton")
    first = manager.install(owner, "triton", 100, hooks)
    assert owner.launch_enter_hook is hooks["launch_enter_hook"]
    second = manager.install(owner, "instrumentation", 0, pair(seen, "instr"))
    assert owner.launch_enter_hook is not hooks["launch_enter_hook"]
    second.release()
    assert owner.launch_enter_hook is hooks["launch_enter_hook"]
    first.release()
    assert (owner.launch_enter_hook, owner.launch_exit_hook) == (None, None)


def test_a_single_slot_someone_replaced_keeps_theirs():
    manager, owner, seen = TritonHooks(), runtime_33(), []
    installed = manager.install(owner, "triton", 100, pair(seen, "triton"))
    theirs = recorder(seen, "theirs")
    owner.launch_enter_hook = theirs
    installed.release()
    assert owner.launch_enter_hook is theirs and owner.launch_exit_hook is None


def test_counts_per_user():
    manager, owner, seen = TritonHooks(), runtime_36(), []
    hooks = pair(seen, "triton")
    a = manager.install(owner, "triton", 100, hooks)
    b = manager.install(owner, "triton", 100, hooks)
    assert manager.users(owner) == {"triton": 2}
    assert owner.launch_enter_hook.calls == [hooks["launch_enter_hook"]]  # placed once
    a.release()
    a.release()  # a handle releases once
    assert owner.launch_enter_hook.calls == [hooks["launch_enter_hook"]]
    b.release()
    assert owner.launch_enter_hook.calls == [] and manager.users(owner) == {}


def test_a_user_installed_with_other_hooks_is_refused():
    manager, owner, seen = TritonHooks(), runtime_36(), []
    hooks = pair(seen, "triton")
    manager.install(owner, "triton", 100, hooks)
    with pytest.raises(ValueError, match="installed already"):
        manager.install(owner, "triton", 100, pair(seen, "other"))
    with pytest.raises(ValueError, match="installed already"):
        manager.install(owner, "triton", 0, hooks)
    assert manager.users(owner) == {"triton": 1}


def test_an_owner_without_a_hook_changes_nothing():
    manager, owner, seen = TritonHooks(), runtime_33(), []  # 3.3 has no kernel_load_end_hook
    hooks = {**pair(seen, "instr"), "kernel_load_end_hook": recorder(seen, "instr.load")}
    with pytest.raises(AttributeError, match="kernel_load_end_hook"):
        manager.install(owner, "instrumentation", 0, hooks)
    assert (owner.launch_enter_hook, owner.launch_exit_hook) == (None, None)
    assert manager.users(owner) == {}


def test_a_hook_that_cannot_take_ours_rolls_back_the_others():
    class Refusing(HookChain):
        def add(self, f):
            raise RuntimeError("no")

    manager, owner, seen = TritonHooks(), runtime_36(), []
    owner.launch_exit_hook = Refusing()
    with pytest.raises(RuntimeError, match="no"):
        manager.install(owner, "triton", 100, pair(seen, "triton"))
    assert owner.launch_enter_hook.calls == [] and manager.users(owner) == {}


def test_load_hooks_take_the_same_order():
    manager, owner, seen = TritonHooks(), runtime_36(), []
    manager.install(owner, "instrumentation", 0, {"kernel_load_end_hook": recorder(seen, "instr.load")})
    manager.install(owner, "other", 50, {"kernel_load_end_hook": recorder(seen, "other.load")})
    assert [f.__name__ for f in owner.kernel_load_end_hook.calls] == ["other.load", "instr.load"]


def test_owners_are_independent():
    manager, one, two, seen = TritonHooks(), runtime_36(), runtime_36(), []
    a = manager.install(one, "triton", 100, pair(seen, "one"))
    manager.install(two, "triton", 100, pair(seen, "two"))
    a.release()
    assert one.launch_enter_hook.calls == [] and len(two.launch_enter_hook.calls) == 1
