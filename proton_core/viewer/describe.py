"""The root line's words: what the profile is (session, context, backend, devices)."""

from __future__ import annotations

import os


def device_words(devices: dict) -> list[str]:
    """``CUDA 0,1 (arch 90, 132 SMs)``: devices of one kind and shape grouped."""
    groups: dict = {}
    for kind, ids in devices.items():
        if not isinstance(ids, dict):
            continue
        for dev, info in ids.items():
            info = info if isinstance(info, dict) else {}
            shape = []
            if info.get("arch") not in (None, ""):
                shape.append(f"arch {info['arch']}")
            if info.get("num_sms"):
                shape.append(f"{info['num_sms']} {'CUs' if kind == 'HIP' else 'SMs'}")
            groups.setdefault((kind, ", ".join(shape)), []).append(str(dev))
    out = []
    for (kind, shape), ids in groups.items():
        ids.sort(key=lambda d: (len(d), d))
        out.append(f"{kind} {','.join(ids)}" + (f" ({shape})" if shape else ""))
    return out


def profile_words(table, files: int = 1, other: str | None = None) -> str:
    """``profile NAME, context C, backend B, CUDA 0 (...)``, from the file's metadata where it has some."""
    meta = table.metadata
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    name = name or os.path.splitext(os.path.basename(table.path))[0] or "?"
    words = [f"profile {name}" + (f" (+{files - 1} files)" if files > 1 else "")]
    if other:
        words[0] += f" minus {other}"
    for key in ("context", "backend"):
        if isinstance(meta.get(key), str) and meta[key]:
            words.append(f"{key} {meta[key]}")
    words += device_words(table.devices) or ["no device"]
    return ", ".join(words)
