"""Reading hatchet profiles in the cupti tests (loading and path-following come from proton_core.testing)."""

import pytest

from proton_core.testing import child, load_profile as load  # noqa: F401


@pytest.fixture(scope="module")
def cuda_torch():
    """torch with a CUDA context made (imported by GPU test modules as their ``torch`` fixture)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return torch


def kernels(literal):
    """{kernel name: metrics} of a node's kernel children."""
    return {c["frame"]["name"]: c["metrics"] for c in literal["children"] if "device_id" in c["metrics"]}


def walk(literal, path=()):
    """Yield (path of names, node) for every node below ``literal``."""
    for c in literal["children"]:
        p = path + (c["frame"]["name"],)
        yield p, c
        yield from walk(c, p)


# ---- mode="pcsampling": line nodes below kernel nodes ----
def kernel_node(literal, name):
    """The kernel child called ``name`` of a node (its literal, with the line nodes below it)."""
    matches = [c for c in literal["children"] if c["frame"]["name"] == name and "device_id" in c["metrics"]]
    assert matches, (name, [c["frame"]["name"] for c in literal["children"]])
    return matches[0]


def sampled_lines(kernel_literal):
    """{line node name: metrics} of a kernel node's sample children (``file:line`` or ``sass+0x..``)."""
    return {c["frame"]["name"]: c["metrics"] for c in kernel_literal["children"] if "samples" in c["metrics"]}


def samples_below(literal):
    """Samples of every line node (a leaf below a kernel) below ``literal``."""
    return sum(int(n["metrics"].get("samples", 0)) for _, n in walk(literal)
               if not n["children"] and "device_id" not in n["metrics"])


def stall_totals(kernel_literal):
    """{stall metric: samples} summed over a kernel's lines."""
    out = {}
    for metrics in sampled_lines(kernel_literal).values():
        for key, value in metrics.items():
            if key.startswith("stall_"):
                out[key] = out.get(key, 0) + int(value)
    return out


class CorrelationIds:
    """Monotonic correlation ids, as CUPTI hands them out; each test module starts its own range, as
    the native recorder is one per process."""

    def __init__(self, start: int) -> None:
        self.next = start

    def __call__(self) -> int:
        self.next += 1
        return self.next


def recorder_backend(native):
    """The cupti backend minus the driver and libcupti, over the test bindings' recorder ``native``: configured,
    switched and flushed by its own methods (the contract suite, the native-stack sessions)."""
    from proton_cupti.backend import CuptiBackend, batch_from

    class RecorderBackend(CuptiBackend):
        def __init__(self) -> None:  # skips the driver and libcupti checks on purpose
            self.native = native
            self._devices = {}
            self._started = False
            self.context_setter = native.set_context

        def start(self, mode):
            native._test_reset()

        def flush(self):
            return batch_from(*native._test_flush(), self._devices, lambda device: {})

    return RecorderBackend
