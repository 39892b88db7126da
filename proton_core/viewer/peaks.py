"""Device peaks for ``util``: tensor-core FLOP/s per operand width, and DRAM bandwidth, as upstream computes them.

``util`` is only comparable between viewers if both divide by the same peak,
so these are upstream Proton's figures (``triton/profiler/specs.py``, Triton
3.6 and main), not vendors' data sheets (decision 0220):

- every width's peak is the 8-bit peak divided by ``width / 8`` (FP16 half of
  FP8, FP64 an eighth), whatever the part really does at that width;
- sm80 and sm89 are constants; sm90 scales H100 PCIe's 1513 TFLOP/s (114 SMs
  at 1755 MHz) by the device's SMs and clock; sm100 is 16384 FLOP per SM per
  clock; AMD parts are FLOP per CU per clock times CUs and clock;
- CUDA bandwidth comes from the device's bus width and memory clock, AMD's is
  a constant per architecture.

Upstream fails with a traceback on an architecture it lacks; here that is one
line naming those known.  Spellings upstream would not match are read as the
architecture they name: ``90a`` as ``90``, ``100a``/``103`` (the sm100 family)
as ``100``, ``gfx940``/``gfx941`` as ``gfx942``, and ROCm's feature suffix
(``gfx942:sramecc+:xnack-``) is dropped.
"""

from __future__ import annotations

from .errors import ViewerError

T = 1e12

#: CUDA archs whose 8-bit peak (FLOP/s) is a constant, whatever the device's SMs and clock.
CUDA_FP8 = {"80": 624 * T, "89": 330.3 * T}
#: sm90: H100 PCIe's 8-bit peak at its 114 SMs and 1755 MHz, scaled by the device's SMs and clock.
SM90_REFERENCE = (1513 * T, 114, 1755 * 1e3)
#: sm100 family: dense 8-bit FLOP per SM per clock.
SM100_PER_SM_CLOCK = 16384
#: AMD: 8-bit matrix FLOP per CU per clock (gfx90a has no FP8: its INT8 rate, as upstream takes it).
AMD_FP8_PER_CU_CLOCK = {"gfx90a": 1024, "gfx942": 4096, "gfx950": 8192}
#: AMD: peak HBM bandwidth per architecture in bytes/s (upstream's constants, not computed from device info).
AMD_BANDWIDTH = {"gfx90a": 3.2 * T, "gfx942": 5.3 * T, "gfx950": 8.0 * T}

#: Every (device_type, arch) with a peak.
PEAKS = {("CUDA", a) for a in (*CUDA_FP8, "90", "100")} | {("HIP", a) for a in AMD_FP8_PER_CU_CLOCK}
ALIASES = {"90a": "90", "100a": "100", "100f": "100", "103": "100", "103a": "100", "103f": "100",
           "gfx940": "gfx942", "gfx941": "gfx942"}


def arch_of(info: dict) -> str:
    """The device's architecture as the tables name it (ROCm's ``:feature`` suffix dropped, aliases applied)."""
    arch = str(info.get("arch", "")).split(":")[0].strip()
    return ALIASES.get(arch, arch)


def _known() -> str:
    return ", ".join(f"{t} {a}" for t, a in sorted(PEAKS))


def _shape(device_type: str, arch: str, info: dict) -> tuple[float, float]:
    """(SMs or CUs, clock in kHz) of the device; one line if the profile lacks them."""
    sms, clock = info.get("num_sms"), info.get("clock_rate")
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (sms, clock))
    if not ok:
        raise ViewerError(f"util: device info for {device_type} arch {arch!r} lacks num_sms/clock_rate, "
                          "so its peak FLOP/s is unknown")
    return float(sms), float(clock)


def peak_fp8(device_type: str, info: dict) -> float:
    """The device's 8-bit tensor-core FLOP/s by upstream's formula for its architecture."""
    arch = arch_of(info)
    if (device_type, arch) not in PEAKS:
        raise ViewerError(f"util: no peak FLOP/s table for {device_type} arch {arch!r} (known: {_known()})")
    if device_type == "CUDA" and arch in CUDA_FP8:
        return CUDA_FP8[arch]
    sms, clock_khz = _shape(device_type, arch, info)
    if device_type == "HIP":
        return AMD_FP8_PER_CU_CLOCK[arch] * sms * clock_khz * 1e3
    if arch == "90":
        reference, ref_sms, ref_clock_khz = SM90_REFERENCE
        return reference * (sms / ref_sms) * (clock_khz / ref_clock_khz)
    return SM100_PER_SM_CLOCK * sms * clock_khz * 1e3  # sm100


def peak_flops(device_type: str, info: dict, width: int) -> float:
    """Tensor-core FLOP/s of one device for ``width``-bit operands: the 8-bit peak over ``width / 8``."""
    return peak_fp8(device_type, info) / (width / 8)


def peak_bandwidth(device_type: str, info: dict) -> float:
    """DRAM bytes/s: AMD's constant per architecture; else double data rate x bus width in bytes x memory clock."""
    if device_type == "HIP":
        arch = arch_of(info)
        if arch not in AMD_BANDWIDTH:
            known = ", ".join(sorted(AMD_BANDWIDTH))
            raise ViewerError(f"util: no peak bandwidth for HIP arch {arch!r} (known: {known})")
        return AMD_BANDWIDTH[arch]
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
