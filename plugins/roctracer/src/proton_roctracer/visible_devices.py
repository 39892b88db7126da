"""Which physical GPU a HIP device ordinal is, under ``ROCR_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``
and ``CUDA_VISIBLE_DEVICES``.

rocprofiler-sdk names every GPU of the machine (its agents come from the kernel driver's topology,
``logical_node_type_id`` 0..N-1), whatever those variables hide; the program's device ``cuda:k`` /
``hipSetDevice(k)`` is the k-th GPU left visible.  The ROCm runtime applies ``ROCR_VISIBLE_DEVICES``
first (indices into all GPUs); HIP then applies ``HIP_VISIBLE_DEVICES``, or ``CUDA_VISIBLE_DEVICES``
when that is unset, as indices into what ROCr left.  Profiles name devices by HIP ordinal, as
torch and Triton do.
"""

from __future__ import annotations

import os


def _indices(value: str | None, count: int) -> list[int] | None:
    """The listed indices in order (None: the variable is unset); parsing stops at the first entry that
    is not an index below ``count`` or repeats one, as the runtimes do.  UUIDs (``GPU-...``) are not
    resolvable here and end the list too."""
    if value is None:
        return None
    out: list[int] = []
    for item in value.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= count or int(item) in out:
            break
        out.append(int(item))
    return out


def hip_ordinals(physical_count: int, environ=None) -> dict[int, int]:
    """{physical GPU index: HIP ordinal} for the GPUs the program can see."""
    env = os.environ if environ is None else environ
    rocr = _indices(env.get("ROCR_VISIBLE_DEVICES"), physical_count)
    after_rocr = list(range(physical_count)) if rocr is None else rocr
    hip_value = env.get("HIP_VISIBLE_DEVICES")
    if hip_value is None:
        hip_value = env.get("CUDA_VISIBLE_DEVICES")
    hip = _indices(hip_value, len(after_rocr))
    visible = after_rocr if hip is None else [after_rocr[i] for i in hip]
    return {physical: ordinal for ordinal, physical in enumerate(visible)}
