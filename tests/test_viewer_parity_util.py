"""``-m util`` gives upstream proton-viewer's figure on every architecture upstream knows.

The expected values are computed here from upstream's formula (Triton 3.6
``triton/profiler/specs.py`` and ``viewer.py``), written out in this file:

    util = max(sum_w flops_w / peak(w), bytes / bandwidth) / time_seconds
    peak(w) = peak8 / (w / 8)
    peak8:  CUDA 80: 624e12; 89: 330.3e12; 90: num_sms / 114 * clock_rate / 1755e3 * 1513e12;
            100: num_sms * 16384 * clock_rate * 1e3;  HIP: per_cu[arch] * num_sms * clock_rate * 1e3
            (per_cu: gfx90a 1024, gfx942 4096, gfx950 8192; clock_rate in kHz)
    bandwidth: CUDA 2 * bus_width * memory_clock_rate * 1e3 / 8; HIP gfx90a 3.2e12, gfx942 5.3e12, gfx950 8e12
"""

import json

import pytest

from proton_core import viewer
from proton_core.viewer import peaks

PER_CU = {"gfx90a": 1024, "gfx942": 4096, "gfx950": 8192}
AMD_BW = {"gfx90a": 3.2e12, "gfx942": 5.3e12, "gfx950": 8.0e12}


def upstream_peak8(device_type, arch, num_sms, clock_rate):
    if device_type == "HIP":
        return PER_CU[arch] * num_sms * clock_rate * 1e3
    if arch == "80":
        return 624e12
    if arch == "89":
        return 330.3 * 1e12
    if arch == "90":
        return (num_sms / 114 * clock_rate / (1755 * 1e3) * 1513) * 1e12
    if arch == "100":
        return num_sms * 16384 * (clock_rate / 1e3) * 1e6
    raise AssertionError(arch)


def upstream_bandwidth(device_type, arch, bus_width, memory_clock_rate):
    if device_type == "CUDA":
        return 2 * bus_width * memory_clock_rate * 1e3 / 8
    return AMD_BW[arch]


def upstream_util(device_type, arch, info, metrics, time_ns):
    peak8 = upstream_peak8(device_type, arch, info["num_sms"], info["clock_rate"])
    compute = sum(metrics.get(f"flops{w}", 0.0) / (peak8 / (w / 8)) for w in (8, 16, 32, 64))
    memory = metrics["bytes"] / upstream_bandwidth(device_type, arch, info["bus_width"], info["memory_clock_rate"])
    return max(compute, memory) / (time_ns * 1e-9)


#: (device_type, arch as the profile spells it, arch in upstream's table, device info): real parts' figures.
DEVICES = [
    ("CUDA", "80", "80", {"num_sms": 108, "clock_rate": 1410000, "memory_clock_rate": 1593000, "bus_width": 5120}),
    ("CUDA", "89", "89", {"num_sms": 142, "clock_rate": 2520000, "memory_clock_rate": 9001000, "bus_width": 384}),
    ("CUDA", "90", "90", {"num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000, "bus_width": 5120}),
    ("CUDA", "100", "100", {"num_sms": 148, "clock_rate": 1965000, "memory_clock_rate": 3996000, "bus_width": 8192}),
    ("HIP", "gfx90a", "gfx90a", {"num_sms": 110, "clock_rate": 1700000, "memory_clock_rate": 1600000,
                                 "bus_width": 4096}),
    ("HIP", "gfx942", "gfx942", {"num_sms": 304, "clock_rate": 2100000, "memory_clock_rate": 1300000,
                                 "bus_width": 8192}),
    ("HIP", "gfx950", "gfx950", {"num_sms": 256, "clock_rate": 2400000, "memory_clock_rate": 1900000,
                                 "bus_width": 8192}),
]
IDS = [d[1] for d in DEVICES]


def profile(tmp_path, device_type, arch, info, kernels):
    """A file as upstream's writer lays it out: ROOT / step / kernels on device 0, device info second."""
    children = [{"frame": {"name": name, "type": "function"},
                 "metrics": {"time (ns)": time_ns, "count": 1, "device_id": "0", "device_type": device_type,
                             **metrics}, "children": []}
                for name, time_ns, metrics in kernels]
    doc = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {},
            "children": [{"frame": {"name": "step", "type": "function"}, "metrics": {}, "children": children}]},
           {device_type: {"0": {"arch": arch, **info}}}]
    path = tmp_path / f"{arch.split(':')[0]}.hatchet"
    path.write_text(json.dumps(doc))
    return path


def columns(path, metrics):
    """Per printed name, the values of ``metrics`` at full precision (the View the CLI prints)."""
    args = viewer.build_parser().parse_args(["-m", metrics, str(path)])
    view = viewer.View(args)
    order, _ = view.table.walk()
    return {view.table.names[i]: [col[i] for col in view.columns] for i in order}


def printed(capsys, path, name):
    assert viewer.main(["-m", "util", str(path)]) == 0
    out, err = capsys.readouterr()
    for line in out.splitlines()[1:]:
        if line.rstrip().endswith(name):
            return float(line.split()[0])
    raise AssertionError(out)


#: Work per kernel: compute-bound (all widths), fp16-only, memory-bound.
KERNELS = [
    ("mixed", 2_000_000, {"flops8": 4.0e11, "flops16": 3.0e11, "flops32": 2.0e10, "flops64": 1.0e9, "bytes": 1.0e8}),
    ("gemm16", 1_000_000, {"flops16": 1.2e11, "bytes": 5.0e7}),
    ("copy", 500_000, {"bytes": 1.0e9, "flops16": 1.0e6}),
]


@pytest.mark.parametrize("device_type, arch, upstream_arch, info", DEVICES, ids=IDS)
def test_util_is_upstreams_figure(capsys, tmp_path, device_type, arch, upstream_arch, info):
    path = profile(tmp_path, device_type, arch, info, KERNELS)
    got = columns(path, "util")
    for name, time_ns, metrics in KERNELS:
        expected = upstream_util(device_type, upstream_arch, info, metrics, time_ns)
        assert got[name][0] == pytest.approx(expected, rel=1e-12), name
        assert printed(capsys, path, name) == pytest.approx(expected, abs=5e-4), name
    # scopes have no util, as upstream's viewer leaves internal frames without one
    assert got["step"][0] != got["step"][0] and got["ROOT"][0] != got["ROOT"][0]


@pytest.mark.parametrize("device_type, arch, upstream_arch, info", DEVICES, ids=IDS)
@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_peak_tables_are_upstreams(device_type, arch, upstream_arch, info, width):
    expected = upstream_peak8(device_type, upstream_arch, info["num_sms"], info["clock_rate"]) / (width / 8)
    assert peaks.peak_flops(device_type, {"arch": arch, **info}, width) == pytest.approx(expected, rel=1e-12)
    bandwidth = upstream_bandwidth(device_type, upstream_arch, info["bus_width"], info["memory_clock_rate"])
    assert peaks.peak_bandwidth(device_type, {"arch": arch, **info}) == pytest.approx(bandwidth, rel=1e-12)


def test_the_issues_l40s_figure(tmp_path):
    """sm89 was 0.071 here where upstream gives about twice as much: upstream's peak is 330.3 TFLOP/s fp8."""
    info = DEVICES[1][3]
    path = profile(tmp_path, "CUDA", "89", info, [("k", 1_000_000, {"flops16": 2.45e10, "bytes": 1.0})])
    assert columns(path, "util")["k"][0] == pytest.approx(2.45e10 / (330.3e12 / 2) / 1e-3)  # 0.148


@pytest.mark.parametrize("spelled, meant", [("90a", "90"), ("100a", "100"), ("103", "100"),
                                            ("gfx942:sramecc+:xnack-", "gfx942"), ("gfx941", "gfx942"),
                                            ("gfx950:sramecc+:xnack-", "gfx950")])
def test_spellings_of_known_archs(tmp_path, spelled, meant):
    device_type = "HIP" if meant.startswith("gfx") else "CUDA"
    info = next(d[3] for d in DEVICES if d[2] == meant)
    metrics = {"flops16": 1.0e11, "bytes": 1.0e6}
    path = profile(tmp_path, device_type, spelled, info, [("k", 1_000_000, metrics)])
    assert columns(path, "util")["k"][0] == pytest.approx(upstream_util(device_type, meant, info, metrics, 1_000_000))


@pytest.mark.parametrize("device_type, arch", [("CUDA", "75"), ("CUDA", "120"), ("HIP", "gfx1100")])
def test_unknown_arch_is_one_line_naming_the_known(capsys, tmp_path, device_type, arch):
    info = {"num_sms": 10, "clock_rate": 1000000, "memory_clock_rate": 1000000, "bus_width": 256}
    path = profile(tmp_path, device_type, arch, info, [("k", 1000, {"flops16": 1.0, "bytes": 1.0})])
    assert viewer.main(["-m", "util", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"no peak FLOP/s table for {device_type} arch {arch!r}" in err
    assert "CUDA 100" in err and "HIP gfx950" in err


def test_missing_shape_is_one_line(capsys, tmp_path):
    path = profile(tmp_path, "CUDA", "90", {"memory_clock_rate": 2619000, "bus_width": 5120},
                   [("k", 1000, {"flops16": 1.0})])
    assert viewer.main(["-m", "util", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks num_sms/clock_rate" in err


def test_upstreams_own_example_figures(tmp_path):
    """The numbers of upstream's examples/cuda.json, and the util its test_viewer.py expects of them."""
    doc = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0, "flops8": 0,
                                                                        "bytes": 0},
            "children": [
                {"frame": {"name": "foo0", "type": "function"}, "children": [],
                 "metrics": {"count": 10, "device_id": "1", "device_type": "CUDA", "time (ns)": 204800,
                             "flops8": 1e11, "bytes": 1e8}},
                {"frame": {"name": "foo1", "type": "function"}, "children": [],
                 "metrics": {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": 204800,
                             "flops8": 1e10, "bytes": 1e7}}]},
           {"CUDA": {"0": {"arch": "89", "bus_width": 384, "clock_rate": 2625000, "memory_clock_rate": 10501000,
                           "num_sms": 128},
                     "1": {"arch": "90", "bus_width": 6144, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                           "num_sms": 132}}}]
    path = tmp_path / "cuda.hatchet"
    path.write_text(json.dumps(doc))
    got = columns(path, "util")
    assert got["foo0"][0] == pytest.approx(0.247044, abs=1e-6)  # sm90
    assert got["foo1"][0] == pytest.approx(0.147830, abs=1e-6)  # sm89
