"""hook="torch" through RecordFunction callbacks (proton_torch._C), checked on CPU.

The synthetic backend gets a native context setter (conftest.native_fake), so the operator
callbacks set contexts exactly as they do with the CUPTI backend. A CPU run launches no device
kernels: a "kernel emulator" dispatch mode launches one fake kernel ``cpu_<op>`` per aten
operator that would launch one on a GPU, inside the operator's own record.
"""

import os
import subprocess
import sys
import textwrap
import threading

import pytest

torch = pytest.importorskip("torch")

import proton_core as proton  # noqa: E402
from proton_core.plugin_api import close_op, open_op, open_scopes  # noqa: E402
from proton_core.testing import child, load_profile  # noqa: E402

from proton_torch import hook, native, ops  # noqa: E402

try:
    C = native.load()
except native.NativeUnavailable as exc:  # pragma: no cover - a checkout built without torch
    pytest.skip(f"proton_torch's extension is not usable here: {exc}", allow_module_level=True)

from proton_torch.testing import KERNEL_OPS, KernelEmulator, Net  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))


def names(literal):
    return [c["frame"]["name"] for c in literal["children"]]


def find_all(literal, predicate, prefix=()):
    out = []
    for c in literal["children"]:
        path = prefix + (c["frame"]["name"],)
        if predicate(c["frame"]["name"]):
            out.append((path, c))
        out.extend(find_all(c, predicate, path))
    return out


def count(literal, *path):
    return child(literal, *path)["metrics"]["count"]


def train(tmp_path, fake, steps=1, backward_scope=None, data="tree", kernels=KERNEL_OPS):
    """Profile ``steps`` SGD steps of Net under scope "step"; the profile's root (or the trace file)."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    with KernelEmulator(fake, kernels):
        proton.start(str(tmp_path / "p"), backend="fake", hook="torch", data=data)
        assert hook.current_mode() == "native"
        for _ in range(steps):
            x, y = torch.randn(5, 8), torch.randn(5, 4)
            with proton.scope("step"):
                loss = torch.nn.functional.mse_loss(model(x), y)
                if backward_scope:
                    with proton.scope(backward_scope):
                        loss.backward()
                else:
                    loss.backward()
                opt.step()
                opt.zero_grad()
        proton.finalize()
    if data == "trace":
        return tmp_path / "p.chrome_trace"
    return load_profile(str(tmp_path / "p.hatchet"))[0]


def test_forward_operators_sit_under_module_paths_with_their_kernels(tmp_path, native_fake):
    root = train(tmp_path, native_fake, steps=2)
    # composite operators are shown as torch records them: aten::linear around aten::t and aten::addmm
    assert count(root, "step", "Net", "fc1", "aten::linear", "aten::addmm", "cpu_addmm") == 2
    assert count(root, "step", "Net", "fc2", "aten::linear", "aten::addmm", "cpu_addmm") == 2
    assert count(root, "step", "Net", "act", "aten::relu", "cpu_relu") == 2
    assert count(root, "step", "aten::mse_loss", "cpu_mse_loss") == 2
    # the optimizer's updates, outside any module or autograd node
    assert count(root, "step", "aten::add_", "cpu_add_") == 8
    assert "PythonDispatchMode" not in str(root)  # the emulator's own records are not shown


def test_backward_functions_sit_under_the_forward_operator_that_created_them(tmp_path, native_fake):
    C.reset_stats()
    root = train(tmp_path, native_fake)
    fc2 = child(root, "step", "Net", "fc2", "aten::linear", "aten::addmm")
    # forward kernel and backward function side by side under the forward operator
    assert count(fc2, "cpu_addmm") == 1
    assert count(fc2, "AddmmBackward0", "aten::mm", "cpu_mm") == 2  # grads of fc2's input and weight
    assert count(root, "step", "Net", "fc1", "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm",
                 "cpu_mm") == 1  # fc1: the weight's only (x needs no grad)
    assert count(root, "step", "Net", "act", "aten::relu", "ReluBackward0", "aten::threshold_backward",
                 "cpu_threshold_backward") == 1
    assert count(root, "step", "aten::mse_loss", "MseLossBackward0", "aten::mse_loss_backward",
                 "cpu_mse_loss_backward") == 1
    stats = C.stats()
    # nodes placed under their forward operator: the four that launch (two AddmmBackward0, ReluBackward0,
    # MseLossBackward0), and where each node's context is set at its entry (publishing) the two TBackward0 too;
    # a provider looks a node up only when something under it needs its context
    linked = 4 if os.environ["PROTON_TORCH_PROVIDER"] == "1" else 6
    assert stats["linked"] == linked and stats["misnested"] == 0 and stats["callback_errors"] == 0, stats
    # every emulated kernel has an operator as its parent
    for path, _ in find_all(root, lambda n: n.startswith("cpu_")):
        assert path[-2].startswith("aten::"), path


def test_the_scope_around_backward_keeps_the_backward_pass(tmp_path, native_fake):
    root = train(tmp_path, native_fake, backward_scope="backward", kernels=KERNEL_OPS | {"aten::detach"})
    bwd = child(root, "step", "backward")
    # the forward operator's path, less what it shares with "step/backward", mirrored under it
    assert count(bwd, "Net", "fc2", "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm", "cpu_mm") == 2
    assert count(bwd, "aten::mse_loss", "MseLossBackward0", "aten::mse_loss_backward", "cpu_mse_loss_backward") == 1
    # forward keeps only forward work
    assert names(child(root, "step", "Net", "fc2", "aten::linear", "aten::addmm")) == ["cpu_addmm"]
    # AccumulateGrad has no forward operator: under the backward scope, grouped by its node; the view
    # operator inside it is passed over (this emulated kernel of it lands on the node around it)
    assert count(bwd, "torch::autograd::AccumulateGrad", "cpu_detach") == 4


def test_scopes_around_forward_stay_out_of_the_backward_pass(tmp_path, native_fake):
    """The benchmark's shape: forward, backward and optimizer scopes side by side."""
    model = Net()
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "s"), backend="fake", hook="torch")
        with proton.scope("forward"):
            with proton.scope("loss"):  # user scopes inside forward are left out of the backward path too
                loss = torch.nn.functional.mse_loss(model(x), y)
        with proton.scope("backward"):
            loss.backward()
        proton.finalize()
    root = load_profile(str(tmp_path / "s.hatchet"))[0]
    assert names(root) == ["forward", "backward"]
    bwd = child(root, "backward")
    assert sorted(names(bwd)) == ["Net", "aten::mse_loss"]
    assert count(bwd, "Net", "fc1", "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm", "cpu_mm") == 1
    assert count(root, "forward", "loss", "Net", "fc1", "aten::linear", "aten::addmm", "cpu_addmm") == 1


def test_without_the_backward_calls_context_the_forward_scopes_stand_in(tmp_path, native_fake):
    """A thread that runs nodes it did not create, with no context of its own and none published."""
    model = Net()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "u"), backend="fake", hook="torch")
        with proton.scope("step"):
            with proton.scope("forward"):
                loss = model(torch.randn(5, 8)).sum()

        def run_nodes():  # the engine called directly: no _engine_run_backward around it
            engine = torch.autograd.Variable._execution_engine
            with KernelEmulator(native_fake):
                engine.run_backward((loss,), (torch.ones_like(loss),), False, False, (), True, True)

        worker = threading.Thread(target=run_nodes)
        worker.start()
        worker.join()
        proton.finalize()
    root = load_profile(str(tmp_path / "u.hatchet"))[0]
    assert names(root) == ["step"]
    assert count(root, "step", "forward", "Net", "fc2", "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm",
                 "cpu_mm") == 2


def test_autograd_threads_use_the_context_backward_was_called_in(tmp_path, native_fake):
    """As on a GPU, where autograd's device thread runs the nodes: here forward ran on thread A,
    which publishes its backward context (what torch.autograd's engine call does) while thread B
    runs the nodes, whose own context is the root."""
    model = Net()
    x = torch.randn(5, 8)
    published = threading.Event()
    done = threading.Event()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "t"), backend="fake", hook="torch")
        with proton.scope("step"):
            loss = model(x).sum()

            def run_nodes():
                published.wait()
                with KernelEmulator(native_fake):
                    loss.backward()
                done.set()

            worker = threading.Thread(target=run_nodes)
            worker.start()
            with proton.scope("backward"):
                token = C.backward_enter()
                published.set()
                done.wait()
                C.backward_exit(token)
            worker.join()
        proton.finalize()
    root = load_profile(str(tmp_path / "t.hatchet"))[0]
    assert count(root, "step", "backward", "Net", "fc2", "aten::linear", "aten::addmm", "AddmmBackward0", "aten::mm",
                 "cpu_mm") == 2


def test_backward_is_published_around_torch_autograd_engine_calls(native_fake, tmp_path):
    import torch.autograd
    import torch.autograd.graph

    original = torch.autograd.graph._engine_run_backward
    proton.start(str(tmp_path / "w"), backend="fake", hook="torch")
    assert torch.autograd._engine_run_backward is not original
    assert torch.autograd.graph._engine_run_backward is torch.autograd._engine_run_backward
    seen = []
    w = torch.ones(2, requires_grad=True)
    w.register_hook(lambda g: seen.append(C.stats()["open_frames_this_thread"]) or g)
    (w * 2).sum().backward()
    assert seen and seen[0] >= 1  # the hook ran inside the node's records
    proton.finalize()
    assert torch.autograd._engine_run_backward is original
    assert torch.autograd.graph._engine_run_backward is original


def test_per_thread_operators_under_that_threads_scopes(tmp_path, native_fake):
    proton.start(str(tmp_path / "m"), backend="fake", hook="torch")

    def work(i):
        with KernelEmulator(native_fake):
            with proton.scope(f"t{i}"):
                for _ in range(20):
                    torch.mm(torch.ones(3, 3), torch.ones(3, 3))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = load_profile(str(tmp_path / "m.hatchet"))[0]
    for i in range(4):
        assert count(root, f"t{i}", "aten::mm", "cpu_mm") == 20


def test_a_thread_after_one_that_ended_links_its_own_forward_operators(tmp_path, native_fake):
    """Sequence numbers start again on each thread, and a ring of forward operators outlives its thread (a
    later thread takes it over): what the first thread left must not stand for the second one's operators."""
    proton.start(str(tmp_path / "m"), backend="fake", hook="torch")

    def work(i, forward):
        with KernelEmulator(native_fake):
            with proton.scope(f"t{i}"):
                a = torch.ones(3, 3, requires_grad=True)
                forward(a).sum().backward()

    for i, forward in enumerate([lambda a: a.mm(a), lambda a: a.mul(a)]):
        thread = threading.Thread(target=work, args=(i, forward))
        thread.start()
        thread.join()
    proton.finalize()
    root = load_profile(str(tmp_path / "m.hatchet"))[0]
    assert count(root, "t0", "aten::mm", "MmBackward0", "aten::mm", "cpu_mm") == 2
    assert count(root, "t1", "aten::mul", "MulBackward0", "aten::mul", "cpu_mul") == 2
    assert not find_all(child(root, "t1"), lambda n: n == "aten::mm")


def test_shapes_option_puts_input_shapes_into_operator_names(tmp_path, native_fake, monkeypatch):
    monkeypatch.setenv("PROTON_TORCH_SHAPES", "1")
    root = train(tmp_path, native_fake)
    fc1 = child(root, "step", "Net", "fc1")
    assert names(fc1) == ["aten::linear[5x8,16x8,16]"]
    assert count(fc1, "aten::linear[5x8,16x8,16]", "aten::addmm[16,5x8,8x16]", "cpu_addmm") == 1
    assert C.stats()["shapes"] is False  # off again after the session
    # backward functions keep their node names; their operators get shapes
    fc2 = child(root, "step", "Net", "fc2", "aten::linear[5x16,4x16,4]", "aten::addmm[4,5x16,16x4]")
    mm = [n for n in names(child(fc2, "AddmmBackward0")) if n.startswith("aten::mm[")]
    assert sorted(mm) == ["aten::mm[4x5,5x16]", "aten::mm[5x4,4x16]"], mm


def test_callbacks_are_registered_only_while_a_session_uses_the_hook(tmp_path, native_fake, channel_lib):
    assert not C.stats()["enabled"]
    proton.start(str(tmp_path / "a"), backend="fake")
    assert not C.stats()["enabled"]  # a session without hook="torch"
    proton.finalize()
    a = proton.start(str(tmp_path / "b"), backend="fake", hook="torch")
    b = proton.start(str(tmp_path / "c"), backend="fake", hook="torch")
    assert C.stats()["enabled"] and C.stats()["channels"] == 1
    proton.finalize(a)
    assert C.stats()["enabled"]
    proton.finalize(b)
    stats = C.stats()
    assert not stats["enabled"] and stats["channels"] == 0 and stats["open_frames_this_thread"] == 0
    before = C.stats()["entries"]
    channel_lib.channel_set(12345)
    torch.mm(torch.ones(2, 2), torch.ones(2, 2)) + 1  # no session: nothing interned, no context set
    assert C.stats()["entries"] == before and channel_lib.channel_get() == 12345


def test_the_backend_asks_for_launch_contexts_only_while_the_hook_runs(tmp_path, native_fake, channel_lib,
                                                                       request):
    providing = request.node.callspec.params["native_fake"] == "provider"
    proton.start(str(tmp_path / "a"), backend="fake", hook="torch")
    assert C.stats()["providing"] == providing and channel_lib.channel_has_provider() == providing
    proton.finalize()
    assert not C.stats()["providing"] and not channel_lib.channel_has_provider()


def test_a_backend_of_the_first_capsule_version_gets_a_context_per_operator(tmp_path, fake, channel_lib,
                                                                             monkeypatch):
    from proton_core.testing import SyntheticBackend, native_context_capsule

    monkeypatch.setattr(SyntheticBackend, "native_context",
                        native_context_capsule(channel_lib, "channel_v1_native_context"), raising=False)
    proton.start(str(tmp_path / "v1"), backend="fake", hook="torch")
    assert hook.current_mode() == "native"
    assert not C.stats()["providing"] and not channel_lib.channel_has_provider()
    with proton.scope("outer"):
        outer = channel_lib.channel_get()
        seen = []  # what a launch inside the operator would read
        lib = torch.library.Library("proton_v1_test", "FRAGMENT")
        lib.define("probe(Tensor x) -> Tensor")
        lib.impl("probe", lambda x: seen.append(channel_lib.channel_get()) or x.clone(), "CompositeExplicitAutograd")
        torch.ops.proton_v1_test.probe(torch.ones(2))
    proton.finalize()
    # the operator's own context was set on the thread while it ran (no provider to ask)
    assert seen and seen[0] != outer and C.entry(seen[0])[2] == "proton_v1_test::probe"


def test_operators_are_named_once_at_entry_yet_only_launches_make_nodes(tmp_path, native_fake):
    """An operator's frame is named when it opens (its schema is in cache then), once per (parent, name):
    running the same operators again interns nothing new, and an operator that launched nothing has no
    node in the profile."""
    x = torch.ones(4, 4)
    proton.start(str(tmp_path / "named"), backend="fake", hook="torch")
    where = f"named at entry {tmp_path.name}"
    with proton.scope(where):  # a parent no other test (or run of this one) used: its operators are new entries
        before = C.stats()["entries"]
        torch.mm(x, x).t().contiguous().sum()  # no launch
        once = C.stats()["entries"]
        for _ in range(50):
            torch.mm(x, x).t().contiguous().sum()
        assert C.stats()["entries"] == once
        named = [C.entry(i)[2] for i in range(before + C.FIRST_ID, C.FIRST_ID + once)]
        assert "aten::mm" in named and "aten::sum" in named
        assert "aten::t" not in named  # left unobserved: torch builds no record for it
        with KernelEmulator(native_fake):
            torch.mm(x, x)
    proton.finalize()
    root = child(load_profile(str(tmp_path / "named.hatchet"))[0], where)
    assert [c["frame"]["name"] for c in root["children"]] == ["aten::mm"]
    assert count(root, "aten::mm", "cpu_mm") == 1


class Annotated(torch.nn.Module):
    """A forward that launches a kernel of its own (as a Triton kernel would), opens a scope and an op of the
    core's, around a submodule and an operator."""

    def __init__(self, fake):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.fake = fake

    def forward(self, x):
        self.fake.launch("own_kernel", 1)
        with proton.scope("inner"):
            y = self.fc(x)
            self.fake.launch("scoped_kernel", 1)
        open_op("an_op")
        self.fake.launch("op_kernel", 1)
        close_op()
        return torch.relu(y)


def test_what_a_module_opens_nests_under_it_and_a_plain_module_opens_no_scope(tmp_path, native_fake, request):
    """Module calls are frames of ours while nothing else opens (providing): a launch outside any operator goes
    under the module, and a scope or op the forward opens turns the open modules into the core's scopes first
    (the settler), so it nests under them; a module whose forward opens nothing opens no scope of the core's."""
    providing = request.node.callspec.params["native_fake"] == "provider"
    x = torch.ones(2, 4)
    model, plain = Annotated(native_fake), Net()
    proton.start(str(tmp_path / "m"), backend="fake", hook="torch")
    step = f"step {tmp_path.name}"  # module scopes under it are new ids (ids of the core's last the process)
    with KernelEmulator(native_fake), proton.scope(step):
        model(x)
        before = len(C.module_ids())
        plain(torch.ones(2, 8))
        assert (len(C.module_ids()) == before) == providing  # publishing opens each module as a scope
    proton.finalize()
    root = child(load_profile(str(tmp_path / "m.hatchet"))[0], step)
    assert count(root, "Annotated", "own_kernel") == 1
    assert count(root, "Annotated", "inner", "fc", "aten::linear", "aten::addmm", "cpu_addmm") == 1
    assert count(root, "Annotated", "inner", "scoped_kernel") == 1
    assert count(root, "Annotated", "an_op") == 1  # the op names the kernel it launches
    assert count(root, "Annotated", "aten::relu", "cpu_relu") == 1
    assert count(root, "Net", "fc1", "aten::linear", "aten::addmm", "cpu_addmm") == 1
    assert count(root, "Net", "act", "aten::relu", "cpu_relu") == 1
    assert sorted(names(root)) == ["Annotated", "Net"]


def test_a_state_in_a_forward_keeps_the_module_path_and_stays_the_suffix(tmp_path, native_fake):
    class Stateful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            with proton.state("fp32"):
                names_here = open_scopes()
                return self.fc(x), names_here

    proton.start(str(tmp_path / "st"), backend="fake", hook="torch")
    with KernelEmulator(native_fake), proton.scope("step"):
        _, seen = Stateful()(torch.ones(2, 4))
    proton.finalize()
    assert seen == ["step", "Stateful"]
    root = child(load_profile(str(tmp_path / "st.hatchet"))[0], "step", "Stateful")
    found = find_all(root, lambda n: n == "cpu_addmm")
    # a state stays the suffix of the scopes opened inside it: fc opens as the core's scope, as it always has
    assert [path for path, _ in found] == [("fc", "fp32", "aten::linear", "aten::addmm", "cpu_addmm")]


def test_an_operator_removed_and_another_registered_is_named_afresh(tmp_path, native_fake):
    """Frames are named from a cache keyed by the operator's schema address; removing an operator from the
    dispatcher drops it, so an operator registered later (perhaps at the same address) gets its own name."""
    def define(name):
        lib = torch.library.Library("proton_cache_test", "DEF")
        lib.define(f"{name}(Tensor x) -> Tensor")
        lib.impl(name, lambda x: x * 2, "CompositeExplicitAutograd")
        return lib, getattr(torch.ops.proton_cache_test, name)

    x = torch.ones(2)
    kernels = {"proton_cache_test::first", "proton_cache_test::second"}
    proton.start(str(tmp_path / "r"), backend="fake", hook="torch")
    with KernelEmulator(native_fake, kernels), proton.scope("reg"):
        lib, op = define("first")
        op(x)
        op(x)
        generation = C.stats()["schema_generation"]
        lib._destroy()
        del lib, op
        assert C.stats()["schema_generation"] > generation
        lib, op = define("second")
        op(x)
    proton.finalize()
    lib._destroy()
    root = child(load_profile(str(tmp_path / "r.hatchet"))[0], "reg")
    assert count(root, "proton_cache_test::first", "cpu_first") == 2
    assert count(root, "proton_cache_test::second", "cpu_second") == 1


def test_the_null_observer_can_hide_what_hook_torch_hides_and_shows_it_again():
    """benchmarks' anchor with hiding: the operators that launch nothing are unobserved while it runs, and
    observed again when it goes (a leftover would change every later measurement)."""
    assert "aten::t" not in C.unobserved()
    C.null_observer(True, True)
    try:
        assert "aten::t" in C.unobserved() and "aten::view" in C.unobserved()
    finally:
        C.null_observer(False)
    assert C.unobserved() == []


def test_the_null_observer_benchmark_anchor_leaves_our_callbacks_alone(tmp_path, native_fake):
    """benchmarks' floor-record-function registers do-nothing callbacks beside ours; adding and removing
    them (twice each) must not remove ours."""
    C.null_observer(True)
    C.null_observer(True)
    proton.start(str(tmp_path / "n"), backend="fake", hook="torch")
    C.null_observer(False)
    C.null_observer(False)
    with proton.scope("outer"):
        outer = C.current()
        with KernelEmulator(native_fake, {"aten::mm"}):
            torch.mm(torch.ones(2, 2), torch.ones(2, 2))
        assert C.current() == outer
    proton.finalize()
    root = load_profile(str(tmp_path / "n.hatchet"))[0]
    assert count(root, "outer", "aten::mm", "cpu_mm") == 1


def test_an_error_inside_an_operator_closes_its_records(tmp_path, native_fake):
    proton.start(str(tmp_path / "e"), backend="fake", hook="torch")
    with proton.scope("outer"):
        outer = C.current()
        with pytest.raises(RuntimeError):
            torch.mm(torch.ones(2, 3), torch.ones(2, 3))  # shapes do not match: raises inside the operator
        assert C.current() == outer and C.stats()["open_frames_this_thread"] == 0
        assert open_scopes() == ["outer"]
    proton.finalize()


def test_trace_sessions_get_an_event_per_operator(tmp_path, native_fake):
    import json

    path = train(tmp_path, native_fake, data="trace")
    events = json.loads(path.read_text())["traceEvents"]
    ops_ = [e for e in events if e.get("ph") == "X" and e.get("name") in ("aten::addmm", "AddmmBackward0")]
    assert {e["name"] for e in ops_} == {"aten::addmm", "AddmmBackward0"}, ops_[:3]
    assert len([e for e in ops_ if e["name"] == "aten::addmm"]) == 2
    # view operators, passed over in a tree session (no kernels), are events in a trace
    assert {"aten::t", "aten::transpose"} <= {e.get("name") for e in events if e.get("ph") == "X"}


def test_view_operators_are_passed_over_and_their_backward_work_goes_to_the_operator_around_them(tmp_path,
                                                                                             native_fake):
    """aten::expand (a view) has no node of its own in a tree session; the kernel of its backward function
    (ExpandBackward0 sums the gradient) sits under the module it ran in, through its sequence number;
    nothing reads as misnested."""

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1, 8))

        def forward(self, x):
            return (self.w.expand(5, 8) * x).sum()

    model = Scale()
    C.reset_stats()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "v"), backend="fake", hook="torch")
        with proton.scope("step"):
            model(torch.randn(5, 8)).backward()
        proton.finalize()
    root = load_profile(str(tmp_path / "v.hatchet"))[0]
    scale = child(root, "step", "Scale")
    assert "aten::expand" not in str(root)
    assert count(scale, "aten::mul", "cpu_mul") == 1
    assert count(scale, "ExpandBackward0", "aten::sum", "cpu_sum") == 1
    stats = C.stats()
    assert stats["misnested"] == 0 and stats["callback_errors"] == 0, stats


def unobserved_names():
    return {name.split(".")[0] for name in C.unobserved()}


def test_operators_that_launch_nothing_get_no_records_while_a_tree_session_runs(tmp_path, native_fake, monkeypatch):
    """torch builds no record for operators that launch nothing (views, metadata, allocations) while a
    tree session needs none: their observed flags are cleared at start and set again at the end, and not
    cleared for a trace or where PROTON_TORCH_OBSERVE_ALL=1 asks."""
    assert C.unobserved() == []
    proton.start(str(tmp_path / "u"), backend="fake", hook="torch")
    assert {"aten::t", "aten::transpose", "aten::as_strided", "aten::expand", "aten::view",
            "aten::resolve_conj", "aten::empty"} <= unobserved_names()
    assert "aten::mm" not in unobserved_names() and C.stats()["unobserved"]
    proton.finalize()
    assert C.unobserved() == [] and not C.stats()["unobserved"]

    proton.start(str(tmp_path / "t"), backend="fake", hook="torch", data="trace")
    assert C.unobserved() == []
    proton.finalize()

    monkeypatch.setenv("PROTON_TORCH_OBSERVE_ALL", "1")
    proton.start(str(tmp_path / "a"), backend="fake", hook="torch")
    assert C.unobserved() == []
    proton.finalize()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_has_every_operator_observed_again(tmp_path):
    """A forked child has no session: it gets torch's records back, while the parent's session keeps its
    operators unobserved until it ends. (Its own program: no other library's threads around the fork.)"""
    program = textwrap.dedent('''
        import os, sys
        import torch
        import proton_core as proton
        sys.path.insert(0, %r)
        from conftest import install_native_setter
        install_native_setter(%r)
        from proton_torch import native
        C = native.load()
        proton.start(%r, backend="fake", hook="torch")
        hidden = lambda: {name.split(".")[0] for name in C.unobserved()}
        assert "aten::t" in hidden()
        pid = os.fork()
        if pid == 0:  # the child: report through the exit status only
            os._exit(0 if C.unobserved() == [] and not C.stats()["unobserved"] else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert "aten::t" in hidden()
        proton.finalize()
        assert C.unobserved() == []
        print("ok")
    ''' % (HERE, str(tmp_path / "lib"), str(tmp_path / "p")))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_another_observer_has_every_operator_observed_again(tmp_path, native_fake):
    """torch.profiler started inside a session: its first operator record shows it is there, and from
    then on it gets the view operators' records as it would without us."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(4, 4)
    proton.start(str(tmp_path / "o"), backend="fake", hook="torch")
    torch.mm(x, x).t()
    assert C.unobserved() != []
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = torch.mm(x, x)
        y.t()
    assert C.unobserved() == [] and not C.stats()["unobserved"]
    proton.finalize()
    assert "aten::t" in {e.name for e in prof.events()}
    # the next session hides them again
    proton.start(str(tmp_path / "o2"), backend="fake", hook="torch")
    assert "aten::t" in unobserved_names()
    proton.finalize()


def test_nodes_of_unobserved_operators_go_to_the_context_they_ran_in(tmp_path, native_fake):
    """An unobserved view's node (ExpandBackward0 sums the gradient: a kernel) is linked to where the
    view ran: the operator around it (broadcast_tensors, two of them), or, called directly from Python, the module
    it ran in, even when nothing else ran in that module after it."""

    class Widen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1, 8))

        def forward(self, x):
            return self.w.expand(5, 8)  # nothing runs after it in this module

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1, 8))
            self.v = torch.nn.Parameter(torch.ones(5, 1))

        def forward(self, x):
            w, v, _ = torch.broadcast_tensors(self.w, self.v, x)  # two expands with a node each
            return w + v

    widen, wrapped = Widen(), Wrapped()
    C.reset_stats()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "n"), backend="fake", hook="torch")
        assert "aten::expand" in unobserved_names()
        with proton.scope("step"):
            x = torch.randn(5, 8)
            ((widen(x) * x).sum() + (wrapped(x) * x).sum()).backward()
        proton.finalize()
    root = load_profile(str(tmp_path / "n.hatchet"))[0]
    assert count(root, "step", "Widen", "ExpandBackward0", "aten::sum", "cpu_sum") == 1
    assert count(root, "step", "Wrapped", "aten::broadcast_tensors", "ExpandBackward0", "aten::sum",
                 "cpu_sum") == 2
    stats = C.stats()
    assert stats["misnested"] == 0 and stats["callback_errors"] == 0, stats


class Attention(torch.nn.Module):
    """Views, slices, splits and broadcasts called straight from forward, as attention code does."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.out = torch.nn.Linear(8, 8)
        self.bias = torch.nn.Parameter(torch.zeros(1, 1, 8))

    def forward(self, x):
        q, k, v = self.qkv(x).split(8, dim=-1)
        q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(2, 5, 8)[:, 1:, :]
        return self.out(y) + self.bias.expand(2, 4, 8)


COMPUTE_OPS = KERNEL_OPS | {"aten::bmm", "aten::add", "aten::cat", "aten::clone", "aten::copy_", "aten::_softmax",
                            "aten::_softmax_backward_data", "aten::slice_backward", "aten::zeros", "aten::fill_",
                            "aten::zero_", "aten::new_zeros"}


def kernel_paths(root):
    return {path: leaf["metrics"]["count"] for path, leaf in find_all(root, lambda n: n.startswith("cpu_"))}


def test_leaving_operators_unobserved_changes_no_path(tmp_path, native_fake, monkeypatch):
    """The same steps of an attention block with every operator observed and with those that launch nothing
    left unobserved: every kernel under the same path, forward and backward."""
    profiles = {}
    for observe_all in ("1", "0"):
        monkeypatch.setenv("PROTON_TORCH_OBSERVE_ALL", observe_all)
        torch.manual_seed(0)
        model = Attention()
        C.reset_stats()
        with KernelEmulator(native_fake, COMPUTE_OPS):
            proton.start(str(tmp_path / observe_all), backend="fake", hook="torch")
            assert C.stats()["unobserved"] == (observe_all == "0")
            for _ in range(2):
                with proton.scope("step"):
                    model(torch.randn(2, 5, 8)).sum().backward()
            proton.finalize()
        assert C.stats()["misnested"] == 0 and C.stats()["callback_errors"] == 0, C.stats()
        profiles[observe_all] = kernel_paths(load_profile(str(tmp_path / f"{observe_all}.hatchet"))[0])
    assert profiles["0"] == profiles["1"]
    # the nodes of views called from forward (ViewBackward0's copy, SliceBackward0's, SplitBackward0's cat,
    # ExpandBackward0's sum) are under the module, not loose under the backward call
    linked = [p for p in profiles["0"] if any(n in ("ViewBackward0", "SliceBackward0", "ExpandBackward0",
                                                     "SplitBackward0") for n in p)]
    assert len(linked) == 4 and all(p[:2] == ("step", "Attention") for p in linked), sorted(profiles["0"])


def test_modules_run_inside_a_backward_function_nest_under_it(tmp_path, native_fake):
    """Activation checkpointing recomputes forward inside backward: those module calls open natively."""
    import torch.utils.checkpoint as checkpoint

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = Net()

        def forward(self, x):
            return checkpoint.checkpoint(self.net, x, use_reentrant=False)

    model = Outer()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "k"), backend="fake", hook="torch")
        with proton.scope("step"):
            model(torch.randn(5, 8)).sum().backward()
        proton.finalize()
    root = load_profile(str(tmp_path / "k.hatchet"))[0]
    recomputed = [p for p, _ in find_all(root, lambda n: n == "cpu_relu") if any(n.endswith("Backward0") for n in p)]
    assert len(recomputed) == 1, find_all(root, lambda n: n == "cpu_relu")
    path = recomputed[0]
    backward_at = max(i for i, n in enumerate(path) if n.endswith("Backward0"))
    assert path[backward_at + 1:] == ("Net", "act", "aten::relu", "cpu_relu"), path
    assert C.stats()["open_frames_this_thread"] == 0


def test_python_mode_is_forced_by_the_environment(tmp_path, native_fake, monkeypatch):
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "0")
    proton.start(str(tmp_path / "f"), backend="fake", hook="torch")
    assert hook.current_mode() == "python" and not C.stats()["enabled"]
    proton.finalize()


def test_a_build_for_another_torch_is_refused_in_one_line_and_the_python_mode_runs(tmp_path, native_fake,
                                                                                 monkeypatch, caplog):
    from proton_torch import _build_info

    monkeypatch.setattr(_build_info, "TORCH_VERSION", "1.0.0+other")
    monkeypatch.setattr(hook, "_said", set())
    with caplog.at_level("WARNING", logger="proton"):
        for name in ("g", "h"):
            proton.start(str(tmp_path / name), backend="fake", hook="torch")
            assert hook.current_mode() == "python"
            proton.finalize()
    lines = [r.getMessage() for r in caplog.records if "built for torch" in r.getMessage()]
    assert len(lines) == 1, lines  # said once
    assert "\n" not in lines[0]
    assert f"built for torch 1.0.0+other, not the installed {torch.__version__}" in lines[0]
    assert "--no-build-isolation" in lines[0]
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    with pytest.raises(proton.ProtonError, match="PROTON_TORCH_NATIVE=1, but proton-profiler-torch was built for"):
        proton.start(str(tmp_path / "i"), backend="fake", hook="torch")


def test_native_mode_needs_a_backend_with_a_native_setter(tmp_path, monkeypatch):
    proton.start(str(tmp_path / "n"), backend="fake", hook="torch")  # the plain synthetic backend has none
    assert hook.current_mode() == "python"
    proton.finalize()
    monkeypatch.setenv("PROTON_TORCH_NATIVE", "1")
    with pytest.raises(proton.ProtonError, match="no running backend offers a native context setter"):
        proton.start(str(tmp_path / "o"), backend="fake", hook="torch")


def test_ids_are_ours_and_resolve_like_scopes(tmp_path, native_fake):
    from proton_core.plugin_api import context_names

    class Probe(torch.nn.Module):
        def forward(self, x):
            return x * 2

    with KernelEmulator(native_fake):  # ids are interned for the launches that ask for them
        proton.start(str(tmp_path / "r"), backend="fake", hook="torch")
        with proton.scope("outer"):
            assert 0 < C.current() < C.FIRST_ID  # a core scope, read through the backend's native getter
            Probe()(torch.ones(2))
        proton.finalize()
    ids = [i for i in range(C.FIRST_ID, C.FIRST_ID + C.stats()["entries"]) if C.entry(i)[0] == "name"]
    spelled = {tuple(context_names(i)) for i in ids}
    assert ("outer", "Probe", "aten::mul") in spelled
    assert ops.resolve(C.FIRST_ID - 1) is None


def test_scopes_opened_inside_a_module_nest_under_it(tmp_path, native_fake):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            with proton.scope("attention"):
                x = torch.mm(x, x.t())
            return self.proj(x[:, :4])

    model = Block()
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "b"), backend="fake", hook="torch")
        with torch.no_grad():
            model(torch.randn(4, 4))
            assert open_scopes() == []
        proton.finalize()
    root = load_profile(str(tmp_path / "b.hatchet"))[0]
    assert count(root, "Block", "attention", "aten::mm", "cpu_mm") == 1
    assert count(root, "Block", "proj", "aten::linear", "aten::addmm", "cpu_addmm") == 1


def test_module_hooks_are_the_native_ones_and_go_at_finalize(tmp_path, native_fake):
    from proton_torch.hook import MODE

    original = torch.nn.Module.__dict__["__call__"]
    proton.start(str(tmp_path / "h"), backend="fake", hook="torch")
    (patch,) = MODE.state["handles"]
    assert (patch.pre, patch.post) == (C.module_pre_hook, C.module_post_hook)
    assert torch.nn.Module.__dict__["__call__"] is patch.wrapper
    assert type(patch.wrapper).__name__ == "method_descriptor"  # the C wrapper: no Python frame per call
    proton.finalize()
    assert torch.nn.Module.__dict__["__call__"] is original


def test_the_python_wrapper_is_kept_where_asked(tmp_path, native_fake, monkeypatch):
    from proton_torch.hook import MODE

    monkeypatch.setenv("PROTON_TORCH_MODULE_CALL", "python")
    proton.start(str(tmp_path / "h"), backend="fake", hook="torch")
    (patch,) = MODE.state["handles"]
    assert type(patch.wrapper).__name__ == "function" and patch.wrapper.__wrapped__ is patch.original
    with KernelEmulator(native_fake), proton.scope("s"):
        Net()(torch.randn(5, 8))
    proton.finalize()
    root = load_profile(str(tmp_path / "h.hatchet"))[0]
    assert sorted(names(child(root, "s", "Net"))) == ["act", "fc1", "fc2"]


class Calls(torch.nn.Module):
    """forward with positional, keyword and many arguments; records the scopes open inside."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, *args, scale=1.0, **extra):
        self.seen.append((open_scopes(), len(args), scale, sorted(extra)))
        if extra.get("fail"):
            raise KeyError("from forward")
        return sum(args) * scale


def test_the_c_module_call_passes_arguments_results_and_errors_through(tmp_path, native_fake):
    module = Calls()
    proton.start(str(tmp_path / "c"), backend="fake", hook="torch")
    with proton.scope("outer"):
        assert module(1, 2) == 3
        assert module(*range(12), scale=2.0, a=1, b=2) == 132  # more than the wrapper's small stack
        with pytest.raises(KeyError, match="from forward") as info:
            module(1, fail=True)
        assert info.value.__traceback__ is not None
        assert open_scopes() == ["outer"]
    proton.finalize()
    assert module.seen == [(["outer", "Calls"], 2, 1.0, []), (["outer", "Calls"], 12, 2.0, ["a", "b"]),
                           (["outer", "Calls"], 1, 1.0, ["fail"])]
    with pytest.raises(TypeError):  # the descriptor checks its self as any method of nn.Module does
        C.module_call_descriptor(torch.nn.Module, torch.nn.Module.__call__).__get__(object(), object)()


def test_a_kept_c_module_call_only_calls_the_original_after_the_session(tmp_path, native_fake):
    module = Calls()
    proton.start(str(tmp_path / "k"), backend="fake", hook="torch")
    kept = torch.nn.Module.__dict__["__call__"]  # as torch.fx or Dynamo keep the __call__ they found
    proton.finalize()
    other = proton.start(str(tmp_path / "o"), backend="fake")  # recording, but without the hook
    with proton.scope("outer"):
        assert kept(module, 3) == 3
    proton.finalize(other)
    assert module.seen == [(["outer"], 1, 1.0, [])]


def test_dynamo_imported_during_a_session_is_shown_the_original_call(tmp_path, channel_lib):
    """torch._dynamo first imported while the C wrapper is nn.Module.__call__: a fullgraph compile in the
    session traces through it (no break), eager calls keep their module path, and after the session
    Dynamo holds the original again."""
    program = textwrap.dedent('''
        import sys
        import torch
        import proton_core as proton
        from proton_core.testing import SyntheticBackend, use_synthetic_backend
        sys.path.insert(0, %r)
        from conftest import install_native_setter
        install_native_setter(%r)
        assert "torch._dynamo" not in sys.modules
        original = torch.nn.Module.__call__
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        proton.start(%r, backend="fake", hook="torch")
        assert type(torch.nn.Module.__dict__["__call__"]).__name__ == "method_descriptor"
        import torch._dynamo.utils as dyn
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        got = compiled(torch.ones(2, 4))
        with proton.scope("eager"):
            from proton_core.plugin_api import open_scopes
            seen = []
            class Probe(torch.nn.Module):
                def forward(self, x):
                    seen.append(open_scopes())
                    return x
            Probe()(got)
        proton.finalize()
        assert seen == [["eager", "Probe"]], seen
        assert dyn.unpatched_nn_module_call is original
        assert torch.equal(got, model(torch.ones(2, 4)))
        print("ok")
    ''' % (HERE, str(tmp_path / "lib"), str(tmp_path / "p")))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_deactivated_session_opens_no_module_scopes(tmp_path, native_fake):
    sid = proton.start(str(tmp_path / "d"), backend="fake", hook="torch")
    proton.deactivate(sid)
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(open_scopes())
            return x * 2

    Probe()(torch.ones(2))
    proton.activate(sid)
    Probe()(torch.ones(2))
    assert seen == [[], ["Probe"]]
    proton.finalize()


def test_an_error_in_forward_closes_module_scopes(tmp_path, native_fake):
    class Boom(torch.nn.Module):
        def forward(self, x):
            torch.mm(x, x)
            raise ValueError("boom")

    proton.start(str(tmp_path / "x"), backend="fake", hook="torch")
    with proton.scope("outer"):
        with pytest.raises(ValueError):
            torch.nn.Sequential(Boom())(torch.randn(2, 2))
        assert open_scopes() == ["outer"]
        assert C.stats()["open_frames_this_thread"] == 0
    proton.finalize()


def test_module_frames_left_by_a_session_ended_inside_forward_are_dropped(tmp_path, native_fake):
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(2, 2)

        def forward(self, x):
            proton.finalize()  # the hooks go: Outer's post hook never runs
            return self.inner(x)

    outer = Outer()
    proton.start(str(tmp_path / "a"), backend="fake", hook="torch")
    outer(torch.ones(2))
    with KernelEmulator(native_fake):
        proton.start(str(tmp_path / "b"), backend="fake", hook="torch")
        with torch.no_grad():
            outer.inner(torch.ones(2))  # called on its own: a top-level module, not Outer's "inner"
        proton.finalize()
    root = load_profile(str(tmp_path / "b.hatchet"))[0]
    assert names(root) == ["Linear"]  # and Outer's scope, left open by the first session, closed
    assert open_scopes() == []


def test_a_build_without_torch_says_how_to_build_the_extension(monkeypatch):
    from proton_torch import _build_info

    monkeypatch.setattr(_build_info, "TORCH_VERSION", None)
    with pytest.raises(native.NativeUnavailable, match="built without torch, so without its native extension; "
                                                       "install torch first, then pip install --no-build-isolation"):
        native.load()


def test_a_fullgraph_compile_inside_a_native_session_traces_without_a_break(tmp_path, native_fake):
    """Dynamo traces our nn.Module.__call__ wrapper (it was imported before the wrapper went in); the
    wrapper's compile check makes it the plain call there, so nothing of ours enters the graph (a
    break is an error with fullgraph=True). Eager calls in the same session keep their module path."""
    import torch._dynamo.utils  # before the session: Dynamo then sees our wrapper as a patched __call__ and traces it

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.ones(2, 4)
    proton.start(str(tmp_path / "c"), backend="fake", hook="torch")
    assert hook.current_mode() == "native"
    assert torch._dynamo.utils.unpatched_nn_module_call is not torch.nn.Module.__call__
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with proton.scope("compiled"):  # (outside the kernel emulator: Dynamo refuses any dispatch mode)
        got = compiled(x)
    with KernelEmulator(native_fake), proton.scope("eager"):
        want = model(x)
    proton.finalize()
    assert torch.equal(got, want)
    root = load_profile(tmp_path / "c.hatchet")[0]
    assert count(root, "eager", "Sequential", "0", "aten::linear", "aten::addmm", "cpu_addmm") == 1
    assert count(root, "eager", "Sequential", "1", "aten::relu", "cpu_relu") == 1
