#!/usr/bin/env python3
"""Profile files written by upstream Proton, and the numbers Triton's ``proton-viewer`` reads from them.

``tests/test_file_parity.py`` reads the files in ``tests/data/upstream/`` with our
viewer and checks it gets the numbers in ``expected.json``, the ones Triton's
viewer gets.  Until the lead runs this script on the GPU machine, the files are
hand-made from upstream's writer (``hand-made`` below; ``expected.json`` says so).

Commands (each prints what it wrote):

``write [DIR]``     (GPU machine, ``triton`` installed) run :func:`workload` under
                    ``import triton.profiler as proton`` and write ``DIR/upstream.hatchet``
                    and, where that Triton writes it, ``DIR/upstream.hatchet_msgpack``;
                    then ``expect``.  DIR defaults to tests/data/upstream.
``expect [DIR]``    (``triton`` and ``llnl-hatchet`` importable) write ``DIR/expected.json``:
                    Triton's viewer's values per node of ``DIR/upstream.hatchet``.
``hand-made [DIR]`` (no Triton needed) write the hand-made files the way upstream's writer
                    lays them out (third_party/proton/csrc/lib/Data/TreeData.cpp,
                    Dump/TreeDataHatchetMsgPackDump.cpp).
``values FILE [-m M1,M2,...]``  print, as JSON, Triton's viewer's values per node path of
                    FILE for each metric (what tests/test_file_parity_triton.py runs in a
                    private venv holding triton: set PROTON_TRITON_PYTHON to its python).

On the GPU machine: ``python3 -m pip install triton torch llnl-hatchet msgpack`` in a venv, then
``python3 scripts/upstream_fixtures.py write`` and commit tests/data/upstream/.
"""

from __future__ import annotations

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(os.path.dirname(HERE), "tests", "data", "upstream")
#: The metrics compared, as given to ``-m``: time, count, flops, bytes and their rates, a user metric
#: given inclusive, one exclusive, one property, and host time (exclusive in both writers).
METRICS = ["time/ns", "count", "avg_time/ns", "flops16", "bytes", "tflop16/s", "gbyte/s",
           "u", "a", "p", "cpu_time/ns"]


# ---------------------------------------------------------------- the workload ----
def workload(proton, launch) -> None:
    """What both writers profile: scopes with a user metric of each kind, two kernels, a timed scope.

    ``launch(name, flops16, bytes)`` runs one kernel whose launch metadata gives its flops and bytes.
    """
    with proton.scope("test0", {"u": 2.0, "a (exc)": 1.0, "p (pty)": 3.0}):
        launch("kernel_a", 4.0e9, 2.0e6)
        with proton.scope("test1", {"u": 5.0, "p (pty)": 7.0}):
            launch("kernel_b", 1.0e9, 8.0e6)
    with proton.scope("test1", {"u": 1.0, "a (exc)": 6.0, "p (pty)": 1.0}):
        pass
    with proton.cpu_timed_scope("host"):
        sum(range(1000))


def write(out_dir: str) -> None:
    """Run :func:`workload` with upstream Proton (GPU needed) and write its files into ``out_dir``."""
    import torch
    import triton
    import triton.language as tl
    import triton.profiler as proton

    def metadata(grid, kernel, args):
        return {"name": args["label"], "flops16": args["flops16"], "bytes": args["nbytes"]}

    @triton.jit(launch_metadata=metadata)
    def add_kernel(x, y, n, label: tl.constexpr, flops16, nbytes, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)

    x = torch.ones(4096, device="cuda")
    y = torch.empty_like(x)

    def launch(name, flops16, nbytes):
        add_kernel[(4,)](x, y, x.numel(), name, flops16, nbytes, BLOCK=1024)

    for name in ("kernel_a", "kernel_b"):  # compile outside the profile
        launch(name, 0.0, 0.0)
    torch.cuda.synchronize()
    os.makedirs(out_dir, exist_ok=True)
    formats = ["hatchet", "hatchet_msgpack"]
    for fmt in formats:
        stem = os.path.join(out_dir, "upstream")
        try:
            proton.start(stem, hook="triton")
        except Exception as exc:  # noqa: BLE001 - any upstream error: say it and go on
            print(f"upstream proton cannot start: {exc}")
            return
        workload(proton, launch)
        torch.cuda.synchronize()
        try:
            proton.finalize(output_format=fmt)
            print(f"wrote {stem}.{fmt} (triton {triton.__version__})")
        except Exception as exc:  # noqa: BLE001 - 3.6 writes no hatchet_msgpack
            print(f"triton {triton.__version__} does not write {fmt}: {str(exc).splitlines()[0]}")
    source = f"written by upstream Proton (triton {triton.__version__}) on {torch.cuda.get_device_name()}"
    packed = os.path.join(out_dir, "upstream.hatchet_msgpack")
    if not os.path.exists(packed) or os.path.getmtime(packed) < os.path.getmtime(stem + ".hatchet"):
        with open(stem + ".hatchet") as f:  # this Triton writes no MessagePack: pack its JSON as upstream's would
            doc = _upstream_order(json.load(f))
        with open(packed, "wb") as f:
            f.write(pack_as_upstream(doc))
        source += "; upstream.hatchet_msgpack packed from its upstream.hatchet as upstream's writer packs"
        print(f"wrote {packed} from the JSON file")
    expect(out_dir, source)


def _upstream_order(doc: list) -> list:
    """``doc`` with each node's keys in the order upstream's MessagePack writer packs them
    (frame, metrics, children; a kernel's time and count first), whatever order its JSON had."""
    first = ("time (ns)", "count", "device_id", "device_type")
    stack = [doc[0]]
    while stack:
        node = stack.pop()
        metrics = node.get("metrics", {})
        ordered = {k: metrics[k] for k in first if k in metrics}
        ordered.update((k, metrics[k]) for k in sorted(metrics) if k not in ordered)
        frame, children = node.get("frame", {}), node.get("children", [])
        node.clear()  # upstream's nodes hold these three keys only
        node.update(frame=frame, metrics=ordered, children=children)
        stack.extend(children)
    fields = ("clock_rate", "memory_clock_rate", "bus_width", "arch", "num_sms")
    for ids in doc[1].values() if len(doc) > 1 and isinstance(doc[1], dict) else ():
        for device_id, info in ids.items():
            ids[device_id] = {**{k: info[k] for k in fields if k in info}, **info}
    return doc


# -------------------------------------------------------------- hand-made files ----
def _node(name, metrics=None, children=()):
    return {"frame": {"name": name, "type": "function"}, "metrics": dict(metrics or {}), "children": list(children)}


def _kernel(name, ns, flops16, nbytes):
    return _node(name, {"time (ns)": ns, "count": 1, "device_id": "0", "device_type": "CUDA",
                        "bytes": nbytes, "flops16": flops16})  # kernel values first, then user ones by name


def hand_made_document() -> list:
    """The document upstream Proton writes for :func:`workload` (kernel times made up).

    Laid out as its writer does: the root marks only the kernel metrics
    (``count``/``time (ns)`` as 0); user metrics lose their ``(exc)``/``(pty)``
    suffix and are never on the root; launch metadata lands on the kernel, its
    computation in an empty ``__proton_launch_metadata`` scope; host time is
    ``cpu_time (ns)``; device info follows the tree.
    """
    meta = lambda: _node("__proton_launch_metadata")  # noqa: E731
    test1_inner = _node("test1", {"p": 7.0, "u": 5.0}, [meta(), _kernel("kernel_b", 3000, 1.0e9, 8.0e6)])
    test0 = _node("test0", {"a": 1.0, "p": 3.0, "u": 2.0}, [meta(), _kernel("kernel_a", 5000, 4.0e9, 2.0e6),
                                                            test1_inner])
    test1 = _node("test1", {"a": 6.0, "p": 1.0, "u": 1.0})
    host = _node("host", {"cpu_time (ns)": 20000})
    root = _node("ROOT", {"time (ns)": 0, "count": 0}, [test0, test1, host])
    devices = {"CUDA": {"0": {"clock_rate": 1980000, "memory_clock_rate": 2619000, "bus_width": 5120,
                              "arch": "90", "num_sms": 132}}}
    return [root, devices]


def pack_as_upstream(doc: list) -> bytes:
    """``doc`` as upstream's MessagePack writer packs it: node maps of frame, metrics, children, in
    that order, a kernel's values before the user's metrics (the order of ``doc``'s dicts)."""
    import msgpack

    return msgpack.packb(doc, use_bin_type=True)


def hand_made(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    doc = hand_made_document()
    with open(os.path.join(out_dir, "upstream.hatchet"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)  # nlohmann::json objects are sorted maps
    with open(os.path.join(out_dir, "upstream.hatchet_msgpack"), "wb") as f:
        f.write(pack_as_upstream(doc))
    print(f"wrote hand-made upstream.hatchet and upstream.hatchet_msgpack in {out_dir}")


# ------------------------------------------------------------- Triton's viewer ----
def triton_values(path: str, metrics) -> dict:
    """``{metric: {node path: value or None}}`` as Triton's viewer derives them (its ``parse``)."""
    from triton.profiler import viewer

    out = {}
    for metric in metrics:
        parsed = viewer.parse([metric], path)
        gf, columns = parsed if isinstance(parsed, tuple) else (None, None)
        if gf is None:
            raise SystemExit("this Triton's viewer.parse returns nothing: it is too old for this script")
        column = columns[0]
        values = {}
        for node in gf.dataframe.index:
            value = gf.dataframe.loc[node, column]
            if hasattr(value, "iloc"):  # one node on two rows: never in these files
                value = value.iloc[0]
            values[_path(node)] = None if value is None or (isinstance(value, float) and math.isnan(value)) \
                else float(value)
        out[metric] = values
    return out


def _path(node) -> str:
    names = []
    while node is not None:
        names.append(node.frame["name"])
        node = node.parents[0] if node.parents else None
    return "/".join(reversed(names))


def expect(out_dir: str, source: str | None = None) -> None:
    path = os.path.join(out_dir, "upstream.hatchet")
    if source is None:
        old = os.path.join(out_dir, "expected.json")
        source = json.load(open(old))["source"] if os.path.exists(old) else "unknown"
    import triton

    expected = {"source": source, "viewer": f"triton {triton.__version__} proton-viewer",
                "metrics": triton_values(path, METRICS)}
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    print(f"wrote {out_dir}/expected.json ({expected['viewer']}; files {source})")


def main(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "values":
        metrics = METRICS
        if "-m" in rest:
            i = rest.index("-m")
            metrics = rest[i + 1].split(",")
            rest = rest[:i] + rest[i + 2:]
        print(json.dumps(triton_values(rest[0], metrics), sort_keys=True))
        return 0
    out_dir = rest[0] if rest else DEFAULT_DIR
    if command == "write":
        write(out_dir)
    elif command == "expect":
        expect(out_dir)
    elif command == "hand-made":
        hand_made(out_dir)
        expect(out_dir, "hand-made from upstream's writer (TreeData.cpp, TreeDataHatchetMsgPackDump.cpp): "
                        "regenerate with `scripts/upstream_fixtures.py write` on a GPU machine")
    else:
        print(f"unknown command {command!r}: write, expect, hand-made or values", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
