"""Device peaks for ``util``: dense tensor-core FLOP/s per operand width, and DRAM bandwidth.

Figures are vendors' published dense (no sparsity) peaks of one reference
part per architecture.  A device that differs from the reference in SM/CU
count or clock (H100 PCIe vs SXM, MI210 vs MI250X, one MI250X GCD) is scaled
by ``num_sms`` and ``clock_rate`` from the profile's device info, the way
upstream scales sm90.  Width 8 is FP8 (INT8 on A100), 32 is TF32 where the
part has it, 64 is FP64 (tensor/matrix cores where the part has them).
"""

from __future__ import annotations

from .errors import ViewerError

T = 1e12

#: (device_type, arch) -> (reference SMs/CUs, reference clock in kHz, {width: FLOP/s}, part)
PEAKS = {
    ("CUDA", "80"): (108, 1410000, {8: 624 * T, 16: 312 * T, 32: 156 * T, 64: 19.5 * T}, "A100 SXM"),
    ("CUDA", "89"): (142, 2520000, {8: 733 * T, 16: 362.05 * T, 32: 183 * T, 64: 1.43 * T}, "L40S"),
    ("CUDA", "90"): (114, 1755000, {8: 1513 * T, 16: 756.5 * T, 32: 378 * T, 64: 51.2 * T}, "H100 PCIe"),
    ("CUDA", "100"): (148, 1965000, {8: 4500 * T, 16: 2250 * T, 32: 1100 * T, 64: 40 * T}, "B200"),
    ("HIP", "gfx90a"): (220, 1700000, {8: 383 * T, 16: 383 * T, 32: 95.7 * T, 64: 95.7 * T}, "MI250X (2 GCDs)"),
    ("HIP", "gfx942"): (304, 2100000, {8: 2614.9 * T, 16: 1307.4 * T, 32: 653.7 * T, 64: 163.4 * T}, "MI300X"),
}
ALIASES = {"90a": "90", "100a": "100", "gfx940": "gfx942", "gfx941": "gfx942"}


def _arch(device_type: str, info: dict) -> str:
    arch = str(info.get("arch", "")).split(":")[0].strip()
    return ALIASES.get(arch, arch)


def peak_flops(device_type: str, info: dict, width: int) -> float:
    """Dense tensor-core FLOP/s of one device for ``width``-bit operands."""
    arch = _arch(device_type, info)
    entry = PEAKS.get((device_type, arch))
    if entry is None:
        known = ", ".join(f"{t} {a}" for t, a in PEAKS)
        raise ViewerError(f"util: no peak FLOP/s table for {device_type} arch {arch!r} (known: {known})")
    ref_sms, ref_clock, table, _ = entry
    scale = 1.0
    sms, clock = info.get("num_sms"), info.get("clock_rate")
    if isinstance(sms, (int, float)) and sms > 0 and isinstance(clock, (int, float)) and clock > 0:
        scale = sms / ref_sms * clock / ref_clock
    return table[width] * scale


def peak_bandwidth(device_type: str, info: dict) -> float:
    """DRAM bytes/s: double data rate x bus width in bytes x memory clock (kHz in the profile)."""
    try:
        bus_bits = float(info["bus_width"])
        clock_khz = float(info["memory_clock_rate"])
    except (KeyError, TypeError, ValueError):
        raise ViewerError(
            f"util: device info for {device_type} lacks bus_width/memory_clock_rate, so peak bandwidth is unknown"
        ) from None
    if bus_bits <= 0 or clock_khz <= 0:
        raise ViewerError(f"util: device info for {device_type} has a zero bus_width or memory_clock_rate")
    return 2 * bus_bits / 8 * clock_khz * 1e3
