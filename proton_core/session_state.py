"""One profiling session: its settings, its phases, and the filing of what backends deliver into them.

The manager (:mod:`proton_core.manager`) opens and closes sessions; routing
(:mod:`proton_core.routing`) hands each record to the sessions of its epoch,
which file it here under the call path their base context spells.
"""

from __future__ import annotations

from . import graph_capture_torch, graph_metrics, log
from .activity import ACTIVITY
from .backend import NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, CAPTURED_AT
from .context import OP, ROOT_ID, THREAD, TREE
from .contexts.base import CAPTURED
from .graph_metrics import CAPTURE
from .model import Profile, Trace
from .model.trace import KernelEvent, KernelSlice
from .model.tree import merge_metrics
from .metrics import PROPERTY, parse_name as parse_metric_name, read_tensor
from .phases import Phases
from .tallies import Tallies


class Session:
    """One profiling session, as lifecycle hooks see it.

    Read-only for plugins: ``id``, ``name`` (output path without extension),
    ``context`` (the base context's name), ``data`` (``tree``/``trace``),
    ``backend`` (the backend's name), ``mode``, ``output_format``, ``active``
    and ``profile`` (the :class:`~proton_core.model.Profile` being filled;
    ``proton_session_finalizing`` may add metrics to ``profile.tree``).
    """

    def __init__(self, sid, name, base_name, base, data, backend_state, mode, layers, output_format):
        self.id = sid
        self.name = name
        self.context = base_name
        self.base = base
        self.data = data
        self.backend_state = backend_state
        self.mode = mode
        self.layers = layers  # [(name, ContextSource)]
        self.output_format = output_format
        self.active = True
        self.closed = False  # detached from its backend; only writing is left
        self.phases = Phases(lambda: Profile(name, base_name, data, trace=Trace() if data == "trace" else None,
                                             backend=backend_state.name))
        self.pending: list = []  # (phase, path, MetricName, tensor) read at flush
        #: (phase, path, id) -> [((MetricName, tensor), ...), replays]: tensors given while a CUDA graph was
        #: captured, counted at each replay of it and read at flush (graph_metrics)
        self.replayed_tensors: dict = {}
        self.tallies = Tallies()  # per-launch numbers, counted until the next settle
        self.warned_untimed = False
        self.writer = None  # periodic.Writer with mode="periodic_flushing"
        self.parts: list[str] = []  # files periodic writing wrote
        self.nvtx = True  # NVTX ranges become scopes (start(nvtx=False): not in this session)
        self._paths: dict[int, tuple] = {0: ()}
        graph_capture_torch.watch()  # metrics given while torch captures a CUDA graph count at its replays

    @property
    def backend(self) -> str:
        return self.backend_state.name

    @property
    def profile(self) -> Profile:
        """The current phase's profile (after finalize: everything the session wrote)."""
        return self.phases.profiles[self.phases.current]

    @profile.setter
    def profile(self, profile: Profile) -> None:
        self.phases.profiles[self.phases.current] = profile

    # -------------------------------------------------------------- paths ----
    def elements(self, node_id: int) -> tuple:
        """The (kind, name) path of a backend node, spelled by this session's base context."""
        cached = self._paths.get(node_id)
        if cached is not None:
            return cached
        chain = []
        nodes = self.backend_state.nodes
        while node_id not in self._paths:
            parent, kind, value = nodes[node_id]
            chain.append((node_id, kind, value))
            node_id = parent
        path = self._paths[node_id]
        for nid, kind, value in reversed(chain):
            if kind == NODE_CONTEXT:
                path = path + tuple(self.base.spell_context(value))
            elif kind == NODE_FRAME:
                path = path + tuple(self.base.spell_frame(value))
            elif kind == NODE_CAPTURED_AT:
                path = path + ((CAPTURED, CAPTURED_AT),)
            self._paths[nid] = path
        return path

    def kernel_path(self, elements, kernel: str):
        """Names of the kernel's parent path, its node name (an op renames it) and the properties a
        layer gave the kernel node (``[(metric name, number)]``, e.g. the scopes an XLA fusion spans)."""
        if elements and elements[-1][0] == OP:
            kernel = elements[-1][1]
            elements = elements[:-1]
        path = tuple(name for _, name in elements)
        properties = ()
        for _, layer in self.layers:
            rewritten = layer.rewrite(path, kernel)
            path, kernel = rewritten[0], rewritten[1]
            if len(rewritten) > 2 and rewritten[2]:
                properties = rewritten[2]
        return path, kernel, properties

    def add_record(self, phase, node_id, kernel, device_id, time_ns, count) -> None:
        profile = self.phases.profile_for(phase)
        if profile is None:  # its phase was cleared before it was complete
            self.phases.late += count
            return
        path, kernel, properties = self.kernel_path(self.elements(node_id), kernel)
        profile.tree.add_kernel(path, kernel, self.backend_state.device_type, device_id, time_ns, count)
        if properties:
            profile.tree.add_metrics(path + (kernel,), [(parse_metric_name(n), v) for n, v in properties])
        self.phases.counts[phase] = self.phases.counts.get(phase, 0) + count

    def add_kernel_metrics(self, phase, node_id, kernel, device_id, sub_path, metrics, names) -> bool:
        """File one ``Batch.kernel_metrics`` entry at ``path(node_id) / kernel / *sub_path`` of the
        phase's tree; ``names`` maps each metric name of ``metrics`` to ``(key, is_property)`` (checked
        by the manager).  The node is found once per (node, kernel, device, sub_path) and tree, so a
        flush costs a dict lookup per entry.  False: the phase was cleared before it was complete."""
        profile = self.phases.profile_for(phase)
        if profile is None:
            return False
        tree = profile.tree
        key = (node_id, kernel, device_id, sub_path)
        node = tree.kernel_nodes.get(key)
        if node is None:
            top = (node_id, kernel, device_id, ())
            node = tree.kernel_nodes.get(top)
            if node is None:  # the kernel's node: the one add_record files at
                path, name, _ = self.kernel_path(self.elements(node_id), kernel)
                node = tree.kernel_nodes[top] = tree.node(path).child(name)
                tree.device_ids.setdefault(self.backend_state.device_type, set()).add(device_id)
            for part in sub_path:
                node = node.child(part)
                node.inner = True
            tree.kernel_nodes[key] = node
        store = node.metrics
        for name, value in metrics:
            metric, is_property = names[name]
            store[metric] = value if is_property else store.get(metric, 0) + value
        return True

    def add_event(self, phase, node_id, kernel, device_id, stream, start, end, launch, tid) -> None:
        profile = self.phases.profile_for(phase)
        if profile is None:
            return  # counted with its record
        path, kernel, _ = self.kernel_path(self.elements(node_id), kernel)
        profile.trace.kernels.append(
            KernelEvent(path, kernel, self.backend_state.device_type, device_id, stream, start, end, launch, tid)
        )

    def add_kernel_slice(self, phase, node_id, kernel, device_id, launch_id, track, name, start, end) -> bool:
        """File one ``Batch.kernel_slices`` entry (trace sessions); False: its phase was cleared."""
        profile = self.phases.profile_for(phase)
        if profile is None:
            return False
        path, kernel, _ = self.kernel_path(self.elements(node_id), kernel)
        profile.trace.kernel_slices.append(KernelSlice(path, kernel, self.backend_state.device_type, device_id,
                                                       launch_id, track, name, start, end))
        return True

    def add_metrics(self, elements, parsed) -> None:
        path = tuple(name for _, name in elements)
        numbers = []
        for name, value in parsed:
            if isinstance(value, (int, float, str, list)):
                numbers.append((name, value))
            else:
                self.pending.append((self.phases.current, path, name, value))
        if numbers:
            self._supersede(path, numbers)
            self.profile.tree.add_metrics(path, numbers)

    def _supersede(self, path, numbers) -> None:
        """A property set now from a plain number replaces the 0-d tensors set before it at the same node, which
        are read only at finalize and would otherwise win as read last.  ``path``: a tuple, or None to spell
        the calling thread's (only when such a tensor is pending: rare)."""
        if not self.pending:
            return
        props = {name for name, _ in numbers if name.kind == PROPERTY}
        if not props:
            return
        if path is None:
            path = tuple(name for _, name in self.base.here())
        phase = self.phases.current
        self.pending = [p for p in self.pending if not (p[0] == phase and p[1] == path and p[2] in props)]

    def add_numbers_here(self, numbers) -> None:
        """``add_metrics`` of checked plain numbers at the calling thread's context, for per-launch hooks:
        the node is looked up once per context id (python-context sessions take the general path)."""
        if CAPTURE.on:  # a CUDA graph is being captured: its replays file what this thread gives
            numbers = graph_metrics.divert(self, numbers)
            if not numbers:
                return
        if self.base.python_frames:
            self.add_metrics(self.base.here(), numbers)
            return
        if not self.tallies.add(THREAD.current, numbers):
            self._merge_at(THREAD.current, numbers)

    def _merge_at(self, ctx: int, numbers) -> None:
        merge_metrics(self.node_at(ctx), numbers)

    def node_at(self, ctx: int):
        """The tree node of context ``ctx`` in the current phase.  Where the base spells a context as its
        parent's path plus its own name (``incremental``), a new context's node is one step below its
        parent's, found from the nearest known ancestor: a path of any depth costs one step per new context."""
        tree = self.profile.tree
        nodes = tree.context_nodes
        node = nodes.get(ctx)
        if node is not None:
            return node
        if not self.base.incremental:
            node = nodes[ctx] = tree.node(tuple(name for _, name in self.base.spell_context(ctx)))
            return node
        chain = []
        while ctx != ROOT_ID and ctx not in nodes:
            parent, _, name = TREE.entry(ctx)
            chain.append((ctx, name))
            ctx = parent
        node = tree.root if ctx == ROOT_ID else nodes[ctx]
        for known, name in reversed(chain):
            node = nodes[known] = node.child(name)
        return node

    def add_metrics_here(self, parsed) -> None:
        """``add_metrics`` at the calling thread's context (tensor values are read at finalize, by path)."""
        if CAPTURE.on:  # a CUDA graph is being captured: its replays file what this thread gives
            parsed = graph_metrics.divert(self, parsed)
            if not parsed:
                return
        if not self.base.incremental:
            self.add_metrics(self.base.here(), parsed)
            return
        numbers = [(name, value) for name, value in parsed if isinstance(value, (int, float, str, list))]
        if len(numbers) != len(parsed):
            path = tuple(name for _, name in self.base.here())
            self.pending.extend((self.phases.current, path, name, value) for name, value in parsed
                                if not isinstance(value, (int, float, str, list)))
        if numbers:
            self._supersede(None, numbers)
            merge_metrics(self.node_at(THREAD.current), numbers)

    def settle(self) -> None:
        """Multiply the counted per-launch numbers into the current phase (manager lock held)."""
        if self.tallies.settle(self._merge_at):
            ACTIVITY.generation += 1

    def end_phase(self) -> int:
        """Close the current phase and open the next (manager lock held): what was counted so far goes to
        the phase that ends.  Returns the new phase's number."""
        self.settle()
        return self.phases.advance()

    def count_replayed_tensors(self, path: tuple, tensors: tuple) -> None:
        """One replay of a CUDA graph given ``tensors`` (``((MetricName, tensor), ...)``) at ``path``: counted
        in the current phase, read at flush (:meth:`resolve_pending`)."""
        key = (self.phases.current, path, id(tensors))
        entry = self.replayed_tensors.get(key)
        if entry is None:
            self.replayed_tensors[key] = [tensors, 1]
        else:
            entry[1] += 1

    def resolve_pending(self) -> None:
        """Read the tensor metric values; a bad one is left out with one warning, never the profile."""
        if self.replayed_tensors:
            counted, self.replayed_tensors = self.replayed_tensors, {}
            graph_metrics.resolve(self, counted)
        pending, self.pending = self.pending, []
        for phase, path, name, tensor in pending:
            profile = self.phases.profile_for(phase)
            if profile is None:
                continue
            try:
                value = read_tensor(name.key, tensor)
            except Exception as exc:
                where = "/".join(path) or "ROOT"
                log.warn(f"session {self.id} ({self.name}): {str(exc).splitlines()[0]} at {where}; "
                         "that value is left out of the profile")
                continue
            profile.tree.add_metrics(path, [(name, value)])

    def same_settings(self, context, data, backend, mode, layers, output_format) -> str | None:
        """None when a start() with these settings may share this open session, else what differs."""
        wanted = {"context": context, "data": data, "mode": mode, "hook": [n for n, _ in layers],
                  "output_format": output_format}
        have = {"context": self.context, "data": self.data, "mode": self.mode, "hook": [n for n, _ in self.layers],
                "output_format": self.output_format}
        if backend is not None:
            wanted["backend"], have["backend"] = backend, self.backend
        differ = [f"{k}={have[k]!r} (asked: {wanted[k]!r})" for k in wanted if wanted[k] != have[k]]
        return ", ".join(differ) or None

