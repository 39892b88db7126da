"""context="native": each launch's native call stack below the thread's scopes (decision 0315).

No GPU: the test bindings launch from functions of the extension that count as the user's
(``test_user_launch``, in their own section) through the recorder the CUPTI callback drives, and libc's
qsort stands in for the CUDA libraries between the user's call and the callback."""

import threading

import pytest

from cupti_helpers import CorrelationIds, load
from proton_core.plugin_api import NODE_CONTEXT, NODE_FRAME
from proton_core.testing import find_all, get_plugins

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(
    not hasattr(_cupti, "_test_user_launch"),
    reason="proton_cupti._cupti was built without its test bindings; rebuild with "
           "SKBUILD_CMAKE_DEFINE=PROTON_CUPTI_TESTING=ON pip install -e plugins/cupti")

corr = CorrelationIds(1 << 25)
#: Until the core lists proton_core.contexts.native among its built-in plugins, context="native" is unknown.
NOT_BUILT_IN = ("context='native' is not registered: the core's DEFAULT_PLUGINS (proton_core/plugins.py) does not "
                "list proton_core.contexts.native yet")


def native_source():
    """A new instance of the registered context="native" source, or a skip saying why there is none."""
    registered = get_plugins().contexts.get("native")
    if registered is None:
        pytest.skip(NOT_BUILT_IN)
    return registered.factory()
USER = "proton_cupti::test_user_launch(unsigned int)"
USER_LIBC = "proton_cupti::test_user_launch_through_libc(unsigned int)"


#: Nodes flushed so far since the recorder's last reset (a flush delivers only the new ones).
KNOWN: dict = {}


@pytest.fixture
def rec():
    KNOWN.clear()
    _cupti._test_reset()
    _cupti.configure(False, False, [], [])
    _cupti.set_epoch(1)
    _cupti.set_context(0)
    yield _cupti
    _cupti.native_frames(False)
    _cupti._test_native_exclude([])
    _cupti.set_context(0)
    _cupti.set_epoch(0)
    _cupti._test_reset()


def paths(rec):
    """{kernel: [(kind, value), ...] from the root to its node} of what was recorded since the last flush."""
    nodes, records, _, _, _ = rec._test_flush()
    KNOWN.update({n[0]: n for n in nodes})
    by_id = KNOWN
    out = {}
    for _, node, kernel, _, _, _ in records:
        chain = []
        while node:
            _, parent, kind, value = by_id[node]
            chain.append((kind, value))
            node = parent
        out[kernel] = chain[::-1]
    return out


def frames(chain):
    return [value for kind, value in chain if kind == NODE_FRAME]


def launch(rec, how, kernel):
    c = corr()
    how(c)
    rec._test_kernel(c, kernel, start=10, end=30)


def test_off_by_default_a_launch_is_its_context_alone(rec):
    rec.set_context(7)
    launch(rec, rec._test_user_launch, "k")
    assert paths(rec)["k"] == [(NODE_CONTEXT, 7)]


def test_the_users_function_is_the_leaf_frame_below_the_context(rec):
    rec.native_frames(True)
    rec.set_context(7)
    launch(rec, rec._test_user_launch, "k")
    chain = paths(rec)["k"]
    assert chain[0] == (NODE_CONTEXT, 7)  # native frames hang below the scopes
    names = frames(chain)
    assert len(chain) == 1 + len(names) and len(names) > 2
    leaf = names[-1]
    assert leaf.startswith(USER + " (_cupti."), names  # demangled, with its library
    # The recorder's and the callback's frames (this extension, at the leaf end) are left out.
    assert not any("_cupti." in n and "test_user" not in n for n in names[-1:]), names


def test_frames_of_the_launch_libraries_are_dropped_up_to_the_users_call(rec):
    rec.native_frames(True)
    launch(rec, rec._test_user_launch_through_libc, "through")
    below = frames(paths(rec)["through"])
    # libc is not launch machinery by default: its qsort frames sit between the user's call and the launch.
    assert any(n.startswith("qsort") and "libc.so" in n for n in below[-3:]), below
    assert below[-1].endswith(")") or "libc.so" in below[-1]
    rec._test_native_exclude(["libc.so"])  # now it stands in for libcudart/libcuda
    launch(rec, rec._test_user_launch_through_libc, "through")
    dropped = frames(paths(rec)["through"])
    assert dropped[-1].startswith(USER_LIBC + " ("), dropped
    assert not any("libc.so" in n for n in dropped), dropped


CALLER_C = """
typedef void (*launch_fn)(unsigned);
__attribute__((noinline, visibility("hidden"))) void hidden_caller(launch_fn f, unsigned corr) {
  f(corr);
  __asm__ volatile("" ::: "memory");
}
void exported_entry(launch_fn f, unsigned corr) {
  hidden_caller(f, corr);
  __asm__ volatile("" ::: "memory");
}
"""


def c_caller(tmp_path, code: str, out: str, entry: str, *flags: str):
    """``code`` built into the library ``out`` (skipped where there is no compiler), its ``entry(launch_fn,
    corr)`` ready to call: a C caller whose frames the recorder must name."""
    import ctypes

    from proton_core.testing import NoCompiler, build_library

    source = tmp_path / (entry + ".c")
    source.write_text(code)
    try:
        lib = build_library(str(source), out, *flags)
    except NoCompiler as exc:
        pytest.skip(str(exc))
    getattr(lib, entry).argtypes = [ctypes.c_void_p, ctypes.c_uint]
    return lib


def test_a_library_whose_file_name_is_not_utf8_is_named_all_the_same(rec, tmp_path):
    """Python makes a str of every frame name at flush: a byte that is not UTF-8 must not lose the flush."""
    import os

    out = os.path.join(os.fsencode(str(tmp_path)), b"libodd\xff.so")
    lib = c_caller(tmp_path, CALLER_C, os.fsdecode(out), "exported_entry")
    rec.native_frames(True)
    launch(rec, lambda c: lib.exported_entry(rec._test_launch_callback_address(), c), "odd")
    names = frames(paths(rec)["odd"])
    assert names[-2:] == ["exported_entry (libodd?.so)", "hidden_caller (libodd?.so)"], names[-3:]


STATIC_RUNTIME_C = """
typedef void (*launch_fn)(unsigned);
__attribute__((noinline)) static void libcudart_static_0123abcd(launch_fn f, unsigned corr) {
  f(corr);  /* the static runtime's local functions (named so in CUDA 13's libcudart_static) */
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline, visibility("hidden"))) void cudaFakeLaunch(launch_fn f, unsigned corr) {
  libcudart_static_0123abcd(f, corr);  /* libcudart_static's cudaLaunchKernel, linked into the program */
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline, visibility("hidden"))) void __device_stub__Z4stubv(launch_fn f, unsigned corr) {
  cudaFakeLaunch(f, corr);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline, visibility("hidden"))) void user_step(launch_fn f, unsigned corr) {
  __device_stub__Z4stubv(f, corr);
  __asm__ volatile("" ::: "memory");
}
void program_main(launch_fn f, unsigned corr) {
  user_step(f, corr);
  __asm__ volatile("" ::: "memory");
}
"""


def test_the_cuda_runtime_linked_into_the_program_is_left_out(rec, tmp_path):
    """nvcc links libcudart_static into the program: its frames (and nvcc's launch stubs) go by their names."""
    lib = c_caller(tmp_path, STATIC_RUNTIME_C, str(tmp_path / "libprogram.so"), "program_main")
    rec.native_frames(True)
    launch(rec, lambda c: lib.program_main(rec._test_launch_callback_address(), c), "static_rt")
    names = frames(paths(rec)["static_rt"])
    # Named "" at flush: the stub and the runtime's launch, below the user's function.
    assert names[-5:] == ["program_main (libprogram.so)", "user_step (libprogram.so)", "", "", ""], names[-6:]


def test_the_native_context_spells_frames_after_the_scopes_and_leaves_out_unnamed_ones():
    source = native_source()
    assert source.spell_frame("user_step (libprogram.so)") == [("frame", "user_step (libprogram.so)")]
    assert source.spell_frame("") == []  # the CUDA runtime linked into the program


@pytest.mark.parametrize("strip", [False, True], ids=["with_symtab", "stripped"])
def test_functions_the_dynamic_symbols_leave_out_are_named_from_the_files_symtab(rec, tmp_path, strip):
    """A program linked without -rdynamic exports none of its functions: their names come from .symtab."""
    name = f"libnative_caller_{int(strip)}.so"
    lib = c_caller(tmp_path, CALLER_C, str(tmp_path / name), "exported_entry", *(["-s"] if strip else []))
    rec.native_frames(True)
    launch(rec, lambda c: lib.exported_entry(rec._test_launch_callback_address(), c), "from_c")
    names = frames(paths(rec)["from_c"])
    assert names[-1].startswith(("hidden_caller (" if not strip else f"{name}+0x")), names[-3:]
    assert names[-1].endswith(f"({name})") or names[-1].startswith(f"{name}+0x")
    assert names[-2] == f"exported_entry ({name})"  # in the dynamic symbols either way


def test_how_the_process_began_is_left_out_at_the_root_end(rec):
    rec.native_frames(True)
    launch(rec, rec._test_user_launch, "k")
    names = frames(paths(rec)["k"])
    assert not any(n.startswith("_start ") or "libc.so" in n for n in names), names[:3]


def test_stacks_are_per_thread_and_repeat_into_one_node(rec):
    rec.native_frames(True)
    rec.set_context(3)
    launch(rec, rec._test_user_launch, "a")
    launch(rec, rec._test_user_launch, "a")  # the same stack again: the same node (the thread's cache)
    nodes, records, _, _, _ = rec._test_flush()
    KNOWN.update({n[0]: n for n in nodes})
    assert [(r[2], r[5]) for r in records] == [("a", 2)]
    before = rec._test_node_count()

    def other():
        rec.set_context(4)
        launch(rec, rec._test_user_launch, "b")

    t = threading.Thread(target=other)
    t.start()
    t.join()
    chain = paths(rec)["b"]
    assert chain[0] == (NODE_CONTEXT, 4)
    assert frames(chain)[-1].startswith(USER)
    assert rec._test_node_count() > before
    # A thread's frames begin at its own function, not at how libc started the thread.
    assert not any("start_thread" in n or "clone" in n for n in frames(chain)), frames(chain)[:3]


def test_call_sites_in_turn_each_keep_their_path(rec):
    """Launches from two places in turn: each finds its own path again (the thread's recent stacks)."""
    rec.native_frames(True)
    for _ in range(5):
        launch(rec, rec._test_user_launch, "site_a")
        launch(rec, rec._test_user_launch_through_libc, "site_b")
    grown = rec._test_node_count()
    for _ in range(5):
        launch(rec, rec._test_user_launch, "site_a")
        launch(rec, rec._test_user_launch_through_libc, "site_b")
    assert rec._test_node_count() == grown
    nodes, records, _, _, _ = rec._test_flush()
    KNOWN.update({n[0]: n for n in nodes})
    assert sorted((r[2], r[5]) for r in records) == [("site_a", 10), ("site_b", 10)]
    leaf = {r[2]: KNOWN[r[1]][3] for r in records}
    assert leaf["site_a"].startswith(USER + " (") and "qsort" not in leaf["site_a"]
    assert "libc.so" in leaf["site_b"]  # below test_user_launch_through_libc: qsort's frames


def test_switching_off_goes_back_to_contexts_alone(rec):
    rec.native_frames(True)
    rec.set_context(9)
    launch(rec, rec._test_user_launch, "on")
    rec.native_frames(False)
    launch(rec, rec._test_user_launch, "off")
    got = paths(rec)
    assert len(frames(got["on"])) > 0
    assert got["off"] == [(NODE_CONTEXT, 9)]


def test_python_frames_and_native_frames_together(rec):
    """A python session beside a native one: Python frames above the context, native ones below it."""
    rec.configure(True, False, [], [])
    rec.native_frames(True)
    rec.set_context(2)
    launch(rec, rec._test_user_launch, "both")
    chain = paths(rec)["both"]
    kinds = [k for k, _ in chain]
    at = kinds.index(NODE_CONTEXT)
    assert at > 0 and any(__file__ in v for _, v in chain[:at]), chain[:at]
    assert frames(chain[at:])[-1].startswith(USER)


def test_capture_costs_are_measured_for_each_unwinder(rec):
    ns, n = rec._test_native_capture_ns("backtrace", 10, 20)
    assert ns > 0 and n >= 11
    ns, n = rec._test_native_capture_ns("capture", 10, 20)  # what the recorder uses
    assert ns > 0 and n >= 11
    ns, n = rec._test_native_capture_ns("libunwind", 10, 20)
    assert n == -1 or (ns > 0 and n >= 11)
    ns, n = rec._test_native_capture_ns("frame_pointers", 10, 20)
    assert ns > 0 and n == 12  # its own frame and the 11 levels that keep frame pointers
    with pytest.raises(ValueError):
        rec._test_native_capture_ns("dwarf", 1, 1)


def test_where_libunwind_stops_inside_the_launch_machinery_glibcs_unwinder_takes_over(rec):
    if rec._test_native_unwinder() != "libunwind":
        pytest.skip("libunwind.so.8 is not loadable here: glibc's unwinder is the only one")
    rec.native_frames(True)
    rec._test_native_cap_libunwind(2)  # only the recorder's own frames
    try:
        launch(rec, rec._test_user_launch, "short")
        launch(rec, rec._test_user_launch, "short")  # the same short capture again: the same path, from the memo
    finally:
        rec._test_native_cap_libunwind(0)
    nodes_before = rec._test_node_count()
    got = paths(rec)["short"]
    assert frames(got)[-1].startswith(USER + " ("), frames(got)[-3:]
    assert rec._test_node_count() == nodes_before


LEAF_PATH = """
import sys
import proton_cupti._cupti as m
m._test_reset(); m.configure(False, False, [], []); m.set_epoch(1); m.set_context(0)
m.native_frames(True)
m._test_user_launch(77); m._test_kernel(77, "k", start=0, end=1)
nodes, records, *_ = m._test_flush()
by_id = {n[0]: n for n in nodes}
node, names = records[0][1], []
while node:
    names.append(by_id[node][3]); node = by_id[node][1]
print(m._test_native_unwinder())
print("\\n".join(reversed(names[:4])))
"""


def run_leaf_path(unwinder):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PROTON_NATIVE_UNWINDER=unwinder)
    out = subprocess.run([sys.executable, "-c", LEAF_PATH], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return lines[0], lines[1:]


def test_glibc_backtrace_where_libunwind_is_not_wanted_gives_the_same_path():
    name, glibc = run_leaf_path("backtrace")
    assert name == "backtrace"
    assert glibc[-1].startswith(USER + " (")
    name, auto = run_leaf_path("")
    assert name in ("libunwind", "backtrace")  # libunwind where libunwind.so.8 loads
    assert auto == glibc


# ---- through a session: context="native" and the backend's switch ----
from proton_core import hookimpl  # noqa: E402
import proton_core as proton  # noqa: E402
from cupti_helpers import recorder_backend  # noqa: E402


RecorderBackend = recorder_backend(_cupti)


class RecorderPlugin:
    @staticmethod
    @hookimpl
    def proton_register_backends(register):
        register("cupti_recorder", RecorderBackend, priority=0, description="the cupti recorder without CUPTI")


def test_the_backend_captures_while_any_session_wants_native_stacks(rec):
    backend = RecorderBackend()
    backend.native_frames(1, True)
    backend.native_frames(2, True)
    backend.native_frames(1, False)  # session 2 still wants them
    launch(rec, rec._test_user_launch, "two")
    backend.native_frames(2, False)
    launch(rec, rec._test_user_launch, "none")
    backend.native_frames(3, True)
    backend.stop()  # the recorder outlives the backend: the next one starts without
    launch(rec, rec._test_user_launch, "stopped")
    got = paths(rec)
    assert frames(got["two"])[-1].startswith(USER)
    assert frames(got["none"]) == [] and frames(got["stopped"]) == []


@pytest.fixture
def native_sessions():
    native_source()  # skips until the core lists context="native" among its built-ins
    plugins = get_plugins()
    plugins.register(RecorderPlugin, name="cupti_recorder")
    yield
    proton.finalize()
    _cupti.native_frames(False)
    _cupti.set_epoch(0)
    plugins.unregister("cupti_recorder")


def test_a_native_session_files_kernels_under_scopes_then_native_frames(native_sessions, tmp_path):
    out = str(tmp_path / "nat")
    proton.start(out, context="native", backend="cupti_recorder")
    with proton.scope("outer"):
        launch(_cupti, _cupti._test_user_launch, "native_k")
    proton.finalize()
    literal = load(out + ".hatchet")[0]
    (path, node), = find_all(literal, lambda name: name == "native_k")
    assert path[0] == "outer", path
    assert path[-2].startswith(USER + " ("), path
    assert len(path) > 3  # the frames between the scope and the user's function too


def test_a_shadow_session_on_the_same_backend_never_sees_native_frames(native_sessions, tmp_path):
    shadow, native = str(tmp_path / "sh"), str(tmp_path / "na")
    proton.start(shadow, context="shadow", backend="cupti_recorder")
    proton.start(native, context="native", backend="cupti_recorder")
    with proton.scope("s"):
        launch(_cupti, _cupti._test_user_launch, "both_k")
    proton.finalize()
    (shadow_path, _), = find_all(load(shadow + ".hatchet")[0], lambda name: name == "both_k")
    (native_path, _), = find_all(load(native + ".hatchet")[0], lambda name: name == "both_k")
    assert shadow_path == ("s", "both_k")
    assert native_path[0] == "s" and native_path[-2].startswith(USER)


def test_the_last_native_session_switches_native_stacks_off(native_sessions, tmp_path):
    first = proton.start(str(tmp_path / "a"), context="native", backend="cupti_recorder")
    second = proton.start(str(tmp_path / "b"), context="shadow", backend="cupti_recorder")
    proton.finalize(first)  # the shadow session goes on: its launches take no native stack any more
    KNOWN.clear()
    _cupti._test_reset()
    launch(_cupti, _cupti._test_user_launch, "after")
    assert frames(paths(_cupti)["after"]) == []
    proton.finalize(second)


def test_a_backend_without_native_stacks_says_so_in_one_line(native_sessions, tmp_path, capfd, caplog):
    from proton_core.plugin_api import ProtonError
    from proton_core.testing import open_session_ids

    out = str(tmp_path / "fake_native")
    try:
        proton.start(out, context="native", backend="fake")
    except ProtonError as exc:  # where the core installs the base source at start: an error, nothing left open
        assert str(exc).startswith("context='native' needs") and "'fake' backend cannot capture" in str(exc)
        assert "\n" not in str(exc) and open_session_ids() == []
        return
    # where only the session hooks install it: the session runs on, scopes only, and says so
    said = caplog.text + capfd.readouterr().err
    lines = [line for line in said.splitlines() if "context='native'" in line]
    assert lines and "'fake' backend cannot capture" in lines[0] and "backend='cupti'" in lines[0], said


def test_installing_on_a_backend_without_native_stacks_is_one_error_line():
    from types import SimpleNamespace

    session = SimpleNamespace(id=1, backend="fake", backend_state=SimpleNamespace(backend=object()))
    with pytest.raises(Exception, match="^context='native' needs .* the 'fake' backend cannot capture") as info:
        native_source().install(session)
    assert "\n" not in str(info.value)
    switched = []
    session.backend_state.backend = SimpleNamespace(native_frames=lambda sid, on: switched.append((sid, on)))
    source = native_source()
    source.install(session)
    source.uninstall(session)
    assert switched == [(1, True), (1, False)]
