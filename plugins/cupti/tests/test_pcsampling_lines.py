"""PC -> source line mapping without a GPU: real cubins (built once with ptxas from the PTX below) and
libcupti's cuptiGetSassToSourceCorrelation, which needs no driver; and the line-table check that
decides which cubins are kept."""

import base64
import zlib

import pytest

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(
    not hasattr(_cupti, "_test_pcs_reset"),
    reason="proton_cupti._cupti was built without its test bindings (PROTON_CUPTI_TESTING=OFF)")

# LINES_CUBIN: `ptxas -lineinfo --gpu-name=sm_90 two.ptx`; NO_LINES_CUBIN: the same PTX without its
# .file/.loc directives.  two.ptx (our own; functions hot_loop and gather):
#   .version 8.0
#   .target sm_90
#   .address_size 64
#     .file  1 "/home/u/kern.py"
#     .file  2 "/src/gather.cu"
#
#   .visible .entry hot_loop(.param .u64 p, .param .u32 n)
#   {
#     .reg .b32 %r<8>;
#     .reg .b64 %rd<4>;
#     .reg .pred %p<2>;
#     .loc 1 10 0
#     ld.param.u64 %rd1, [p];
#     ld.param.u32 %r1, [n];
#     mov.u32 %r2, 0;
#     mov.u32 %r3, 0;
#   $L_loop:
#     .loc 1 42 0
#     add.s32 %r3, %r3, %r2;
#     add.s32 %r2, %r2, 1;
#     setp.lt.u32 %p1, %r2, %r1;
#     @%p1 bra $L_loop;
#     .loc 1 50 0
#     st.global.u32 [%rd1], %r3;
#     ret;
#   }
#
#   .visible .entry gather(.param .u64 p, .param .u64 q)
#   {
#     .reg .b32 %r<4>;
#     .reg .b64 %rd<6>;
#     .loc 2 7 0
#     ld.param.u64 %rd1, [p];
#     ld.param.u64 %rd2, [q];
#     .loc 2 8 0
#     ld.global.u32 %r1, [%rd2];
#     mul.wide.u32 %rd3, %r1, 4;
#     add.s64 %rd4, %rd1, %rd3;
#     ld.global.u32 %r2, [%rd4];
#     .loc 2 9 0
#     st.global.u32 [%rd2], %r2;
#     ret;
#   }
LINES_CUBIN = (
    "eNrtWU2MFEUUfv23M7sMu8OfsGHFxiwJJGPv7DIOi4tm5UchghoxHCSbtnen2RmZnW66e9cZwDAgEo2GEE54I17k4EGPRmO4aIgx"
    "hsSDBj2o4WA0moUQL6Ljq+rqnu7pbtbIQaNbSXfV+6q+V69evaqarjmxa+9jPMc9mgY38fARcNBOzbVufnmVm4vPQfc4jIIE47Ca"
    "tFTssu1YjjaJJS9vzARy1S7XSnVQaoajK7U5xTlcqR0y2vLULJPnFL8wZcyYmgOKo9cdZVpzyrrlNwjKdlmz9FIMYum2bs1hIc+U"
    "lA1HrRqG2VYTQhitjZX0ydlp9ZClzeieUK3UsGzp1U5ZCwG1ObUtqrZm2y4pAddiK3zMdOqqU3eC/TKjAh0zhDhOq1anLc0sU8m0"
    "DMdwGiarM2q2o9WcfNBfbdAf+12nf1lIeLGwf0afUYxDh2zdySfEiqqi4/32+3btU932al7VqhXNXgwmEkzMt6Ex321wbcJHgHQE"
    "30rx7gg+QfHlEfwNfNYHZJHlH+AjX1wZaf8N1bMigi/jCC5G8HUUlyL4ExTviuDnKJ6K4B9TvDeCf4f48mx7XE22Gf9A8YCdgpvd"
    "oHpWRfR08QS/J4K3MA0GyiThOI+TvC9zstncCOnWyebGNC26bXIJc+bZJsrkRXyVYay766fc2REbq5jzuxCfZVWv0DPrQXxz3G+9"
    "PfjmiFXcUNmY0YdmYci2pgAO61ZNMRvkvHLDE7cYpGHq5v1I4YUubl7g+G+B48/xqClYyQndnCDzV4ET0vy7PCfU+Swp+o3PUkOy"
    "EUPCfYAwwP0qNAi3G18/35i/Mc83OzsDIUV0y5wg8Hnu5i9oVJ77RTiBiFsWeFq0SZOlqOfmT7Rynr5vMY3KnG7ZFaMmj9JTULOm"
    "dUe2Z9StKGmlEm5ztmpXjupysUB37bmKXZms6rKi1xyrIXtLdqNiarglyMpssSCbOdkXN4/ItU1wjGwe07IyieIGa9voI2MegM03"
    "WKVtBR8xcVeUN5jbRhCBaslVRNViu+GcfNCcGAvgVCGBawjPGHMMGcnJ+aC8mcqDe6mxDwHg0BTbq2GvkbEAPJJzX8NjgFu7qVQd"
    "V5M5nPNqsWocZXnS0mSmGU228eCpGpNalbY/SIyeoF2MgaU7Y/BS1IlutCW6EMUjERcWIi4s/jWHuTgO4OCRCZcQMNd1Jakn3pyt"
    "Ki9WSjqrKVEnYX2B+cnVVMixfkiLsYi+EVdfYSLWNSMTzPGea3Dpkv0Qn6u4HT55YM/OPY/KOwzLBC/wyVohO2URn+cJgOcVnrk7"
    "ZkuaTI7/SlVzSDw7hlG1czKeWbpm6/LwZiWfkw+QTBkdhe2zlWpJnkKSSiGLvIdcPi78zcXCSGHLcEHNwwPkjCTHtyw/oFlTZXdx"
    "yNROchL9IHTa+RycIutzKA1LMe8h5WVuGRieCeAZD18eLnvteTzWeJ4DXpLIiud47I/v4kBc0j4HxS2i2+fqDPMR1s2v92WaUBae"
    "xm1ybQsElePEARGaZNvsz4LYk6anTJbHclGk44rXuWxBnWSihP4M1dlHdWZ8nd4+T/I/WP47y29jvt3/vgAI9AJqAF8awO9NaL8j"
    "of07CfjOBD1eOnWMa9EJI4OY70OZb8EZNon398L7R3Hcp5j8OakXW3CayZO9cLKR4umvhP51GSitgw11MSXSPfxsCj4bwnpJ9Osv"
    "9cKZBk43qe/PZuD7p2Bfwz9NBfixDx5v3Kb+arVeFuByH6xpBIz9D8pR/6dc/6dd/w9aQIOoRfx5vQ9lqS1/3wcZC1JENsfnBbh2"
    "Hwy+KtF9ROJZ+9PQ4rz2V1Cu8yn6s6XH59M9x3z+pkDqM3UgyxDMwk2Aazgf/YOh+Rmou5L5HfaH/GJdSHlxDl8RmW9/P3/aB1lL"
    "ovMN37Zo/9m6JPEdsuDJVF/7NyvhE/sEzz5iz5vX2/Hx4wLjQTkUv5+44+O88V1n8e7Fc7EXihfEtv3IH7gQGC+x97wkSkF7L4C/"
    "f3v20v5XmtR/g2lJovrIfGB9OP7v+9/H/2JaTItpMf1TiWt/XofSOMu/4KLtg2lJAn8/OxTu5e/MXwGB8yOQTDF8x0DaZNnPApLW"
    "sPzLGJ305yu7orkKd+7/egL/MrvKeW0BPrkniuPvYVc+5xfgH0jgf834Zxfw3yb2zdTpxmqPm1/qaC/G3K+l3PkOqV65xM1lJqfZ"
    "XHfy97Dp6rS/wPi7w1c4Ef4z+JyJ4R9n/MEF7H+B9T/egV9k/GcD/S+P4b+XwL8Vw18Rw3/dnb+I/bszYf91jj8dmFAxsN68VGb8"
    "fIAvxcT/wwn8CzH8rhh+I4F/JYYvxvAnWExGbj6XhtevwL6/mh3N3krgN3vDjhOYymbMfW86Zg9qLkve74Lpbbb+tifw5cCqiouf"
    "DxP4F9lV7QAf3us6+V0M8/5n60xruHCeDozj7/Ik6PhIDo5bDOdBXtcd/NqZInYm8LaJ4dzj/QkT5MJ9"
)
NO_LINES_CUBIN = (
    "eNrtWE9oHFUY/2bmTXaSTHY30WKCoZ3qCi3EydaGbQoeNm2qBowVLT0UynSSnWRXd3eG2UnYVcFNLKEH8eApBQ/BkwcvHkWQnkRE"
    "am9K8aAlB+kpFLxV1/fevPk/24ABK5oP3n7v+977fd/33vfNm3n7/oVXX+I5bk4Cl3j4GjgIqHzE5bfyLkdXYKAMsyBCGcbITLVV"
    "bTm2oy/hnsc7jRDXWtVmpQ1q03QMtbmuOm/XmitmIC+vMXld9TvLZsPSHVAdo+2oq7pTNWx/QlhuVXXbqKRobKNl2Ou4U2RGqqaj"
    "1U3TCsxENAwW6CrG0tqqtmLrDQOwtXpCoUc1JGi9Xl+1datKJcs2HdPpWGzMbLYcvekUw7EGSt/vgelflg4vD282jIZqrqy0DKfY"
    "J0+a1lzX/PmLFxY1d75W1PR6TW89/kSydUX8HTSxJ3ET8NMUp7NUP5DQX6X6kYT+Q9yOh2TE+Fe4KTu5xPyfqZ1sQj/KET1K6Oeo"
    "fjgZD9aP5YN4uuzwqFB9yL7gsga1k0/Y2aT60YS+h6kQ6hPC8b1HeE7e6HZPgNTb6J6QaNedM9Vnr73YkEJ+yBplhjqYn2rcEVsr"
    "mvJdoEtsSMbtBm53MgCvXV6YX5hTzpu2hc9dl0iIeAhKuF0jCstp49o/v1bRFfIY1uq6UzObimOa9daUguvX0FuGcuq0WpxSLhOm"
    "zs7CubVavaIsY5BGVTb5nXbxhq2eLs28MHPm1IxWhOd1e7mqtBra2aLixUfeBb8J8fiuwCZZ07QEQ5iThkbdPjD9YEg/6OnHon1v"
    "Po+VPM8BL4ogZDiOx/74AQ7QsBTU8Bnk+nxKZnuDx/aO+zIlLAuv4y1/ugeCxnFoEkGXpGAiD2hIohWb53G/hOi60m2O7muTJEiY"
    "kKlNmdqUfZtezRD+J+N/MP6Q8c/99yv4e0BoPqQfhH+eNt/lejQgspC9HJb5HmyxIJ/Jwpfv4LVvMvk2GUc9uM7kpSxsdDI8PS0m"
    "jspQOQrPtVEG0fPnowx8P43HReSPf5aFrQ5OORmfyMtw7yIsdvynU4D7OXi585DuWa/3gQC3cjDeCQX7H5ST+59x919y979gAy2g"
    "HtnP3RyWxUC+lwPZhgyRrfKeAHePQeGGSM8QkWfzr0OP8+Z/i+U2n6HH4JCPp+eNde2BQMblNpBHEayZBwB3cT4mCpH8TLZdyfoV"
    "+8P4UlvIeLUOPxGZD74fv8tB3hZpvuGXHvWfb4siH5MFT6b2gncXwZP4BC8+Es/N3aA+7u+zHixH6vcbd32ct75dVu9ePZeyUNpG"
    "QfwYP7kdWi+J92MRieF4t8E/u714qf8nLbp/BUkUqT2SDzwerf9j//v6P6RDOqRDelzEBZ/rESozfpFLzg/TcB/8D2zizX3wT0Do"
    "/RGiKjM6ywXfhyPss4DQOOM/ptgktMNeonfg0f5PsvtGPAyLXUl3YvNRyj014+5XxHSeXV0VJoss9jh+gbmLx19k+FeiV6oE/g3c"
    "tlLwbYYv7BP/W8x/Oab/hOEvhfyPpOC/6IPfS8FnU/Dk44VLiX8+E92/+Pq9Ovid6eL+qwxfDOFRSv1cZTWR+KdBit6ZBXY/6cam"
    "fdoH3x2MBi6wT6xuyv8WUsoz1JX7P69hetbdPzjXB6+Eqjotf7N98Dvsr4vJED4tfwPe/h9Jj3eci3IptI6/ixPDivi6UZSHcQOP"
    "2Nc+6ffj7Id7EUW5h/sL0tZuWw=="
)

#: (function, PC offset) -> line, as the cubin's line table says (checked with CUPTI once).
#: (function, PC offset) -> its line node, as upstream spells it: "<path>:<line>@<function>"
EXPECTED = {
    ("hot_loop", 0x0): "/home/u/kern.py:10@hot_loop",
    ("hot_loop", 0x60): "/home/u/kern.py:42@hot_loop",
    ("hot_loop", 0x180): "/home/u/kern.py:50@hot_loop",
    ("gather", 0x0): "/src/gather.cu:7@gather",
    ("gather", 0x20): "/src/gather.cu:8@gather",
    ("gather", 0x70): "/src/gather.cu:9@gather",
}
STALLED = "smsp__pcsamp_warps_issue_stalled_"
REASONS = [(1, STALLED + "long_scoreboard"), (2, STALLED + "selected")]
CRC, NO_LINES_CRC, UNKNOWN_CRC = 0x5EED, 0xBAD, 0x404


def cubin(blob):
    return zlib.decompress(base64.b64decode("".join(blob)))


@pytest.fixture
def rec():
    _cupti._test_reset()
    _cupti.configure(False, False, [], [])
    yield _cupti
    _cupti._test_pcs_reset("")
    _cupti.set_epoch(0)
    _cupti._test_reset()


@pytest.fixture
def correlation(rec):
    """libcupti loaded (its correlation function works without a GPU), or skip."""
    from proton_core.plugin_api import BackendUnavailable
    from proton_cupti.backend import load_cupti

    try:
        load_cupti()
    except BackendUnavailable as exc:
        pytest.skip(f"no libcupti to load: {exc}")
    if not rec._test_pcs_correlation_available():
        pytest.skip("the loaded libcupti has no cuptiGetSassToSourceCorrelation")
    return rec


def test_line_table_check(rec):
    assert rec._test_pcs_has_line_info(cubin(LINES_CUBIN))
    assert not rec._test_pcs_has_line_info(cubin(NO_LINES_CUBIN))
    assert not rec._test_pcs_has_line_info(b"not an ELF file at all, just bytes" * 4)
    assert not rec._test_pcs_has_line_info(cubin(LINES_CUBIN)[:200])  # section table cut off
    assert not rec._test_pcs_has_line_info(b"")


def test_only_cubins_with_a_line_table_are_kept(rec):
    before = rec.pcsampling_stats()["cubins"]
    assert rec._test_pcs_register_cubin(cubin(LINES_CUBIN), CRC)
    assert not rec._test_pcs_register_cubin(cubin(NO_LINES_CUBIN), NO_LINES_CRC)
    assert rec._test_pcs_register_cubin(cubin(LINES_CUBIN), CRC)  # twice: kept once
    stats = rec.pcsampling_stats()
    assert stats["cubins"] - before in (0, 1)  # 0: an earlier test in this process kept it already
    assert stats["cubin_bytes"] >= len(cubin(LINES_CUBIN))


def launch(rec, context, kernel, time_ns):
    rec.set_epoch(1)
    rec.set_context(context)
    c = 70_000 + context
    rec._test_launch(c)
    rec._test_kernel(c, kernel, start=0, end=time_ns)


def test_samples_land_on_source_lines(correlation):
    rec = correlation
    rec._test_pcs_reset("continuous")
    rec._test_pcs_register_cubin(cubin(LINES_CUBIN), CRC)
    rec._test_pcs_register_cubin(cubin(NO_LINES_CUBIN), NO_LINES_CRC)
    launch(rec, 1, "hot_loop", 1000)
    launch(rec, 2, "gather", 1000)
    samples = {("hot_loop", 0x0): 2, ("hot_loop", 0x60): 30, ("hot_loop", 0x70): 5, ("hot_loop", 0x180): 3,
               ("gather", 0x20): 7, ("gather", 0x70): 1}
    rec._test_pcs_ingest([(CRC, fn, pc, 0, [(2, n)]) for (fn, pc), n in samples.items()] +
                         [(NO_LINES_CRC, "gather", 0x20, 0, [(1, 4)]),     # a cubin without a line table
                          (UNKNOWN_CRC, "gather", 0x30, 0, [(1, 6)])],     # a module loaded before start
                         REASONS)
    rec._test_pcs_attribute(False)
    nodes, records, _, _, _, metrics = rec._test_flush(True)
    got = {(kernel, sub_path[0]): dict(values)["samples"] for _, _, kernel, _, sub_path, values in metrics}
    assert got == {
        ("hot_loop", "/home/u/kern.py:10@hot_loop"): 2,
        ("hot_loop", "/home/u/kern.py:42@hot_loop"): 35,  # two PCs of the loop's line, summed
        ("hot_loop", "/home/u/kern.py:50@hot_loop"): 3,
        ("gather", "/src/gather.cu:8@gather"): 7,
        ("gather", "/src/gather.cu:9@gather"): 1,
        ("gather", "sass+0x20"): 4,
        ("gather", "sass+0x30"): 6,
    }


def test_each_line_is_looked_up_once(correlation):
    rec = correlation
    rec._test_pcs_reset("continuous")
    rec._test_pcs_register_cubin(cubin(LINES_CUBIN), CRC)
    launch(rec, 1, "hot_loop", 10)
    cached = rec.pcsampling_stats()["line_cache"]
    for _ in range(3):
        rec._test_pcs_ingest([(CRC, fn, pc, 0, [(2, 1)]) for fn, pc in EXPECTED if fn == "hot_loop"], REASONS)
        rec._test_pcs_attribute(False)
    assert rec.pcsampling_stats()["line_cache"] - cached == 3  # 3 distinct PCs, asked once each
    _, _, _, _, _, metrics = rec._test_flush(True)
    got = {sub_path[0]: dict(values)["samples"] for _, _, _, _, sub_path, values in metrics}
    assert got == {EXPECTED[("hot_loop", pc)]: 3 for pc in (0x0, 0x60, 0x180)}


@pytest.mark.parametrize("function, pc", sorted(EXPECTED))
def test_expected_lines(correlation, function, pc):
    rec = correlation
    rec._test_pcs_reset("serialized")
    rec._test_pcs_register_cubin(cubin(LINES_CUBIN), CRC)
    rec.set_epoch(1)
    rec.set_context(3)
    c = 90_000 + pc
    rec._test_launch(c)
    rec._test_kernel(c, function, start=0, end=10)
    rec._test_pcs_ingest([(CRC, function, pc, c, [(1, 1)])], REASONS)
    rec._test_pcs_attribute(False)
    (entry,) = rec._test_flush(True)[5]
    assert entry[4] == (EXPECTED[(function, pc)],)
