import types

import pytest

from proton_core.plugin_api import ProtonError
from proton_instrumentation.mode import CACHE_KEY_PREFIX, InstrumentationMode, parse_mode


def test_defaults():
    for given in (None, "default", " default ", InstrumentationMode()):
        m = parse_mode(given)
        assert m == InstrumentationMode()
        assert (m.metric_type, m.granularity, m.buffer_strategy, m.buffer_type, m.buffer_size) == \
            ("cycle", "warp", "circular", "shared", 0)
        assert (m.sampling_strategy, m.sampling_options, m.optimizations) == ("none", (), ())
        assert m.clock_extension and m.clock_bits == 43 and m.fold_warps == 1 and m.compile_granularity == "warp"


def test_full_string():
    m = parse_mode("default:granularity=warp_group:buffer_type=global:buffer_size=4096:optimizations=clock32")
    assert (m.granularity, m.buffer_type, m.buffer_size, m.optimizations) == ("warp_group", "global", 4096, ("clock32",))
    assert m.compile_granularity == "warp" and m.fold_warps == 4
    assert not m.clock_extension and m.clock_bits == 32


@pytest.mark.parametrize("gran,fold", [("warp", 1), ("warp_2", 2), ("warp_8", 8), ("warp_group", 4),
                                       ("warp_group_2", 8), ("cta", None)])
def test_granularity_is_folded_not_compiled(gran, fold):
    m = parse_mode(f"default:granularity={gran}")
    assert m.fold_warps == fold and m.compile_granularity == "warp"


def test_selective_sampling():
    m = parse_mode("default:sampling_strategy=selective:sampling_options=2,0,2")
    assert m.sampling_options == (0, 2) and m.segments(4) == (0, 2)
    assert parse_mode("default").segments(3) == (0, 1, 2)
    with pytest.raises(ProtonError, match=r"sampling_options='0,2' names warp 2, but the kernel has 2 warps"):
        m.segments(2)


@pytest.mark.parametrize("text,needle", [
    ("fancy", r"mode 'fancy' is not known: use one of \('default',\)"),
    ("default:granularity=block", r"granularity='block' is not valid: use one of \('warp', .*'cta'\)"),
    ("default:buffer_type=local", r"buffer_type='local' is not valid: use one of \('shared', 'global'\)"),
    ("default:metric_type=time", r"metric_type='time' is not valid: use one of \('cycle',\)"),
    ("default:buffer_strategy=flush", r"buffer_strategy='flush' is not valid: use one of \('circular',\)"),
    ("default:buffer_size=384", r"buffer_size=384 is not valid: use one of 0 \(auto\) or a power of two"),
    ("default:buffer_size=big", r"buffer_size='big' is not valid"),
    ("default:buffer_size=-8", r"buffer_size=-8 is not valid"),
    ("default:optimizations=clock32,turbo", r"optimizations='turbo' is not valid: use one of \('clock32'"),
    ("default:sampling_strategy=random", r"sampling_strategy='random' is not valid: use one of \('none', 'selective'\)"),
    ("default:sampling_strategy=selective", r"sampling_options='' is not valid: use one of warp ids"),
    ("default:sampling_options=0,1", r"sampling_options='0,1' is not valid: use one of nothing unless"),
    ("default:sampling_strategy=selective:sampling_options=a", r"sampling_options='a' is not valid"),
    ("default:colour=red", r"option 'colour=red' is not known: write key=value with key one of"),
    ("default:granularity", r"option 'granularity' is not known"),
    ("default:buffer_size=64:buffer_size=128", r"option buffer_size is given twice"),
])
def test_bad_options_one_line(text, needle):
    with pytest.raises(ProtonError, match=needle) as err:
        parse_mode(text)
    assert "\n" not in str(err.value)


def test_power_of_two_per_segment():
    parse_mode("default:buffer_size=256").check_warps(4)
    parse_mode("default").check_warps(3)  # auto size: the pass decides
    with pytest.raises(ProtonError, match=r"buffer_size=256 gives 85.3333 bytes to each of 3 segments"):
        parse_mode("default:buffer_size=256").check_warps(3)
    with pytest.raises(ProtonError, match=r"buffer_size=16 gives 4 bytes to each of 4 segments"):
        parse_mode("default:buffer_size=16").check_warps(4)
    parse_mode("default:sampling_strategy=selective:sampling_options=1:buffer_size=64").check_warps(8)


def test_mode_objects_duck_typed():
    enum = types.SimpleNamespace
    obj = types.SimpleNamespace(name="Default", metric_type=enum(name="CYCLE"), granularity="WARP_GROUP",
                                buffer_type="global", buffer_size=1024, sampling_strategy="none",
                                sampling_options="", optimizations=["clock32"])
    m = parse_mode(obj)
    assert m == parse_mode("default:granularity=warp_group:buffer_type=global:buffer_size=1024:optimizations=clock32")
    with pytest.raises(ProtonError, match="granularity='thread'"):
        parse_mode(types.SimpleNamespace(name="default", granularity="thread"))
    with pytest.raises(ProtonError, match="buffer_size=100"):
        parse_mode(InstrumentationMode(buffer_size=100))


def test_cache_key_encodes_every_option():
    base = parse_mode("default")
    assert base.cache_key() == (CACHE_KEY_PREFIX + "default:metric_type=cycle:granularity=warp:buffer_strategy=circular:"
                                "buffer_type=shared:buffer_size=0:sampling_strategy=none:sampling_options=:"
                                "optimizations=")
    variants = ["default:granularity=cta", "default:buffer_type=global", "default:buffer_size=1024",
                "default:optimizations=clock32", "default:optimizations=sched_stores",
                "default:sampling_strategy=selective:sampling_options=0",
                "default:sampling_strategy=selective:sampling_options=0,1"]
    keys = {parse_mode(v).cache_key() for v in variants} | {base.cache_key()}
    assert len(keys) == len(variants) + 1
    # order and spelling do not matter
    assert parse_mode("default:buffer_size=0x400:buffer_type=GLOBAL").cache_key() == \
        parse_mode("default:buffer_type=global:buffer_size=1024").cache_key()
    assert parse_mode("default:optimizations=sched_stores,clock32").cache_key() == \
        parse_mode("default:optimizations=clock32,sched_stores").cache_key()
    assert base.cache_key().startswith("proton-plugin/1:") and base.cache_key() != "default"
