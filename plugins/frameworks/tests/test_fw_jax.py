"""hook="jax": XLA kernel names mapped to named scopes and source lines, on CPU.

The CPU backend compiles the same HLO metadata as the GPU one; kernels are
emulated with the fake backend, named as XLA on GPU names them (the fusion
instruction's name with '.'/'-' turned into '_').
"""

import os
import re

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import proton_core as proton  # noqa: E402
from fwtest import load, names, node  # noqa: E402
from proton_frameworks import jax_scopes  # noqa: E402
from proton_frameworks.jax_scopes import kernel_key, parse_hlo  # noqa: E402

HERE = os.path.basename(__file__)


def fresh():
    """A new function object each call: JAX caches compilations per function."""

    def two_scopes(x, y):
        with jax.named_scope("scope1"):
            a = jnp.sin(x).sum(axis=1)  # LINE-scope1
        with jax.named_scope("scope2"):
            b = jnp.exp(a[:, None] * y).sum(axis=0)  # LINE-scope2
        return a @ y + b

    return two_scopes


def line_of(tag):
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return i
    raise AssertionError(tag)


ARGS = (jnp.ones((64, 32)), jnp.ones((64, 32)))


@pytest.fixture(autouse=True)
def fresh_tables():
    jax_scopes.reset()
    yield
    jax_scopes.reset()


def entry_fusions(text):
    """(fusion instruction name, op_name) of the ENTRY computation's fusions."""
    entry = text[text.index("ENTRY"):]
    return re.findall(r'%?([\w.\-]+) = [^=]*? fusion\(.*?op_name="([^"]*)"', entry)


def test_parse_maps_fusions_to_scopes_and_lines():
    text = jax.jit(fresh()).lower(*ARGS).compile().as_text()
    table = parse_hlo(text)
    fusions = entry_fusions(text)
    by_scope = {scope: [n for n, op in fusions if f"/{scope}/" in op] for scope in ("scope1", "scope2")}
    assert by_scope["scope1"] and by_scope["scope2"], fusions  # each scope compiled to its own kernel
    for scope, tag in (("scope1", "LINE-scope1"), ("scope2", "LINE-scope2")):
        for fusion in by_scope[scope]:
            elements, source, _ = table[kernel_key(fusion)]
            assert elements == ("jit(two_scopes)", scope)
            assert source == f"{HERE}:{line_of(tag)}"


def test_old_style_source_metadata_and_sanitized_names():
    text = """HloModule jit_g
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %loop_add-fusion.3 = f32[4]{0} fusion(%p), kind=kLoop, calls=%c, metadata={op_type="add" op_name="jit(g)/outer/inner/add" source_file="/src/model.py" source_line=42}
}
"""
    table = parse_hlo(text)
    assert table == {"loop_add_fusion_3": (("jit(g)", "outer", "inner"), "model.py:42", frozenset())}


FUSED_ACROSS_SCOPES = """HloModule jit_h
%fused_computation.1 (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  %multiply.1 = f32[4]{0} multiply(%param_0, %param_0), metadata={op_type="mul" op_name="jit(h)/scale/mul"}
  %sine.2 = f32[4]{0} sine(%multiply.1), metadata={op_type="sin" op_name="jit(h)/act/inner/sin"}
  ROOT %add.3 = f32[4]{0} add(%sine.2, %param_0), metadata={op_type="add" op_name="jit(h)/act/add"}
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %loop_add_fusion = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused_computation.1, metadata={op_type="add" op_name="jit(h)/act/add"}
}
"""


def test_a_fusion_of_several_scopes_is_placed_by_its_root_and_names_the_others():
    elements, _, others = parse_hlo(FUSED_ACROSS_SCOPES)["loop_add_fusion"]
    assert elements == ("jit(h)", "act")
    assert others == {("jit(h)", "scale"), ("jit(h)", "act", "inner")}
    assert jax_scopes.fused_label("loop_add_fusion", elements, others) == "loop_add_fusion [+act/inner, scale]"


# As XLA 0.11 on an H200 emits a Triton softmax fusion: the fusion instruction keeps only a scheduling name;
# its computation's ROOT (a divide of "normalize") has the op_name, and it fused ops of "activate" too.
TRITON_FUSION_WITHOUT_OP_NAME = """HloModule jit_layer
FileNames
1 "/work/examples/layer.py"

FileLocations
1 {file_name_id=1 line=27}

StackFrames
6 {file_location_id=1 parent_frame_id=0}

%triton_softmax_computation.1 (param_0.24: f32[1024], param_1.28: f32[512,1024]) -> f32[512,1024] {
  %param_1.28 = f32[512,1024]{1,0} parameter(1)
  %tanh.2 = f32[512,1024]{1,0} tanh(%param_1.28), metadata={op_name="jit(layer)/activate/tanh" stack_frame_id=6}
  %mul.16.3 = f32[512,1024]{1,0} multiply(%tanh.2, %tanh.2), metadata={op_name="jit(layer)/activate/mul" stack_frame_id=6}
  %div.2 = f32[512,1024]{1,0} sqrt(%mul.16.3), metadata={op_name="jit(layer)/normalize/sqrt" stack_frame_id=6}
  ROOT %div.3 = f32[512,1024]{1,0} divide(%mul.16.3, %div.2), metadata={op_name="jit(layer)/normalize/div" scheduling_name="div.3" stack_frame_id=6}
}

ENTRY %main.2 (x: f32[512,1024]) -> f32[512,1024] {
  %x = f32[512,1024]{1,0} parameter(0)
  %b.1 = f32[1024]{0} parameter(1)
  ROOT %triton_softmax.1 = f32[512,1024]{1,0} fusion(%b.1, %x), kind=kCustom, calls=%triton_softmax_computation.1, metadata={scheduling_name="triton_softmax.1"}, backend_config={"fusion_backend_config":{"kind":"__triton"}}
}
"""


def test_a_fusion_without_an_op_name_is_placed_by_the_root_of_what_it_calls():
    elements, source, others = parse_hlo(TRITON_FUSION_WITHOUT_OP_NAME)["triton_softmax_1"]
    assert elements == ("jit(layer)", "normalize")
    assert source == "layer.py:27"
    assert others == {("jit(layer)", "activate")}


def test_a_fused_kernel_node_carries_its_other_scopes(tmp_path, fake):
    jax_scopes.register_hlo_text(FUSED_ACROSS_SCOPES)
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    fake.launch("loop_add_fusion", 7)
    fake.launch("loop_add_fusion", 7)
    proton.finalize()
    act = node(load(tmp_path / "p.hatchet")[0], "jit(h)", "act")
    (kernel,) = act["children"]
    assert kernel["frame"]["name"] == "loop_add_fusion [+act/inner, scale]"
    assert kernel["metrics"]["count"] == 2
    assert [v for k, v in kernel["metrics"].items() if k.startswith("fused_scopes")] == [3]  # a property


def run_kernels(fake, text, scope, ns):
    for fusion, op in entry_fusions(text):
        if f"/{scope}/" in op:
            fake.launch(kernel_key(fusion), ns)


def test_session_observes_compilation_and_reparents_kernels(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    f = jax.jit(fresh())
    f(*ARGS).block_until_ready()  # compiled inside the session: observed
    text = f.lower(*ARGS).compile().as_text()
    with proton.scope("step"):
        for _ in range(2):
            run_kernels(fake, text, "scope1", 10)
            run_kernels(fake, text, "scope2", 20)
            fake.launch("cublas_gemm_kernel", 5)  # a library kernel: no HLO counterpart
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    step = node(root, "step")
    assert sorted(names(step)) == ["cublas_gemm_kernel", "jit(two_scopes)"]
    fn = node(step, "jit(two_scopes)")
    assert sorted(names(fn)) == ["scope1", "scope2"]
    for scope, tag, ns in (("scope1", "LINE-scope1", 10), ("scope2", "LINE-scope2", 20)):
        line = node(fn, scope, f"{HERE}:{line_of(tag)}")
        for kernel in line["children"]:
            assert kernel["metrics"]["count"] == 2 and kernel["metrics"]["time (ns)"] == 2 * ns
        assert line["children"]


def test_functions_compiled_before_the_session_are_found_without_a_call(tmp_path, fake):
    f = jax.jit(fresh())
    f(*ARGS).block_until_ready()  # compiled (and cached) before the session: the usual warm-up
    text = f.lower(*ARGS).compile().as_text()
    jax_scopes.reset()  # nothing known: only the live executables can tell
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    f(*ARGS).block_until_ready()  # cache hit: nothing compiled, nothing observed
    run_kernels(fake, text, "scope1", 10)
    proton.finalize()
    fn = node(load(tmp_path / "p.hatchet")[0], "jit(two_scopes)")
    assert names(fn) == ["scope1"]


def test_register_covers_functions_compiled_before_the_session(tmp_path, fake, monkeypatch):
    f = jax.jit(fresh())
    f(*ARGS).block_until_ready()  # compiled (and cached) before the session
    text = f.lower(*ARGS).compile().as_text()
    jax_scopes.reset()
    monkeypatch.setattr(jax_scopes, "harvest_live_executables", lambda: 0)  # a JAX whose executables hide
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    f(*ARGS).block_until_ready()  # cache hit: nothing observed
    run_kernels(fake, text, "scope1", 10)
    proton.finalize()
    assert "jit(two_scopes)" not in names(load(tmp_path / "p.hatchet")[0])

    assert jax_scopes.register(f, *ARGS) is f
    proton.start(str(tmp_path / "q"), backend="fake", hook="jax")
    run_kernels(fake, text, "scope1", 10)
    proton.finalize()
    assert node(load(tmp_path / "q.hatchet")[0], "jit(two_scopes)", "scope1")


def test_ambiguous_kernel_name_goes_under_shared_scopes(tmp_path, fake):
    def module(scope):
        return f"""HloModule m
ENTRY %main (p: f32[4]) -> f32[4] {{
  ROOT %fusion.1 = f32[4]{{0}} fusion(%p), kind=kLoop, calls=%c, metadata={{op_name="jit(step)/{scope}/mul" source_file="a.py" source_line=1}}
}}
"""

    jax_scopes.register_hlo_text(module("encoder"))
    jax_scopes.register_hlo_text(module("decoder"))
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    fake.launch("fusion_1", 3)
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "jit(step)", "fusion_1")["metrics"]["count"] == 1


def test_observer_is_removed_after_the_last_session(tmp_path, fake):
    import jax._src.compiler as compiler

    original = compiler.compile_or_get_cached
    a = proton.start(str(tmp_path / "a"), backend="fake", hook="jax")
    b = proton.start(str(tmp_path / "b"), backend="fake", hook="jax")
    assert compiler.compile_or_get_cached is not original
    proton.finalize(a)
    assert compiler.compile_or_get_cached is not original
    proton.finalize(b)
    assert compiler.compile_or_get_cached is original


def test_register_rejects_plain_functions():
    with pytest.raises(proton.ProtonError, match="needs a jax.jit function"):
        jax_scopes.register(fresh(), *ARGS)


def test_xla_kernels_no_executable_explains_are_counted_under_their_own_node(tmp_path, fake, caplog):
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    with proton.scope("step"):
        for _ in range(3):
            fake.launch("loop_mystery_fusion_2", 10)  # XLA's spelling, but no known executable has it
        fake.launch("cublas_gemm_kernel", 5)  # a library kernel: stays where it was launched
    with caplog.at_level("WARNING", logger="proton"):
        proton.finalize()
    step = node(load(tmp_path / "p.hatchet")[0], "step")
    assert sorted(names(step)) == ["<jax: no HLO match>", "cublas_gemm_kernel"]
    assert node(step, "<jax: no HLO match>", "loop_mystery_fusion_2")["metrics"]["count"] == 3
    lines = [r.getMessage() for r in caplog.records if "matched no known executable" in r.getMessage()]
    assert len(lines) == 1 and "loop_mystery_fusion_2" in lines[0]


def test_xla_module_ranges_place_library_kernels_under_their_jit_and_vanish(tmp_path, fake):
    """XLA pushes NVTX ranges naming the module it runs (when an NVTX tool is injected): they are
    not shown, and a kernel no HLO instruction is named after (cuBLAS) goes under that jit(...)."""
    jax_scopes.register_hlo_text(FUSED_ACROSS_SCOPES)
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    with proton.scope("step"):
        with proton.scope("TSL::XlaModule:#hlo_module=jit_h,program_id=7#"):
            fake.launch("loop_add_fusion", 7)
            fake.launch("sm90_xmma_gemm_f32f32_tn", 5)
        fake.launch("sm90_xmma_gemm_f32f32_tn", 3)  # outside any XLA module: stays where it is
        thunk = "TSL::Thunk:#name=jit(h)/proj/dot_general,hlo_op=gemm_fusion_dot,unique_hlo_op_id=4294967299#"
        with proton.scope("TSL::XlaModule:#hlo_module=jit_h,program_id=7#"), proton.scope(thunk):
            fake.launch("nvjet_tst_64x8_64x16", 2)  # the thunk's op name places a library kernel
    proton.finalize()
    step = node(load(tmp_path / "p.hatchet")[0], "step")
    assert sorted(names(step)) == ["jit(h)", "sm90_xmma_gemm_f32f32_tn"]
    assert sorted(names(node(step, "jit(h)"))) == ["act", "proj", "sm90_xmma_gemm_f32f32_tn"]
    assert names(node(step, "jit(h)", "proj")) == ["nvjet_tst_64x8_64x16"]
    assert node(step, "jit(h)", "sm90_xmma_gemm_f32f32_tn")["metrics"]["count"] == 1
    assert names(node(step, "jit(h)", "act")) == ["loop_add_fusion [+act/inner, scale]"]


def test_a_kernel_name_two_modules_share_is_placed_by_the_module_xla_says_runs(tmp_path, fake):
    jax_scopes.register_hlo_text(FUSED_ACROSS_SCOPES)
    jax_scopes.register_hlo_text(FUSED_ACROSS_SCOPES.replace("jit_h", "jit_k").replace("jit(h)", "jit(k)")
                                 .replace("/act/", "/other/"))
    proton.start(str(tmp_path / "p"), backend="fake", hook="jax")
    for module in ("jit_h", "jit_k"):
        with proton.scope(f"call_{module}"), proton.scope(f"TSL::XlaModule:#hlo_module={module},program_id=1#"):
            fake.launch("loop_add_fusion", 7)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")[0]
    assert names(node(root, "call_jit_h", "jit(h)")) == ["act"]
    assert names(node(root, "call_jit_k", "jit(k)")) == ["other"]
