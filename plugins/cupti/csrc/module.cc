// Python bindings of the native backend: the few calls the core makes
// (start/stop/configure/set_epoch/set_context/flush) plus test-only entries
// that drive the same Recorder functions CUPTI's callbacks use.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "profiler.h"
#include "pyframes.h"
#include "recorder.h"

namespace py = pybind11;
using namespace proton_cupti;

namespace {

py::tuple flush_all(bool collect_activity) {
  if (collect_activity) {
    py::gil_scoped_release nogil;  // CUPTI's buffer thread must run while we wait
    flush_activity();
  }
  Recorder::FlushOut out = recorder().flush();  // frame names need the GIL
  py::list nodes, records, events;
  for (auto& n : out.nodes) {
    py::object value = py::none();
    if (n.kind == kNodeContext) value = py::int_(n.ctx);
    if (n.kind == kNodeFrame) value = py::str(n.frame);
    nodes.append(py::make_tuple(n.id, n.parent, n.kind, value));
  }
  for (auto& r : out.records) records.append(py::make_tuple(r.epoch, r.node, r.kernel, r.device, r.time_ns, r.count));
  for (auto& e : out.events)
    events.append(py::make_tuple(e.epoch, e.node, e.kernel, e.device, e.stream, e.start, e.end, e.launch, e.tid));
  return py::make_tuple(nodes, records, events, out.dropped, out.devices);
}

py::dict device_dict(uint32_t ordinal) {
  py::dict d;
  for (auto& kv : device_info(ordinal)) {
    if (kv.first == "arch")
      d[py::str(kv.first)] = kv.second;
    else
      d[py::str(kv.first)] = std::stoll(kv.second);
  }
  return d;
}

// The scope hot path calls this on every enter and exit: a plain METH_O
// function costs a fraction of a pybind11 call (no overload dispatch).
PyObject* set_context_fast(PyObject*, PyObject* arg) {
  unsigned long long ctx = PyLong_AsUnsignedLongLong(arg);
  if (ctx == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  Recorder::set_context(ctx);
  Py_RETURN_NONE;
}

PyMethodDef set_context_def = {"set_context", set_context_fast, METH_O,
                               "set_context(ctx): the calling thread's core context id is now ctx"};

}  // namespace

PYBIND11_MODULE(_cupti, m) {
  m.doc() = "Native CUPTI backend of Proton (libcupti is loaded at run time).";

  m.def("load_cupti", &load_cupti, py::arg("path"),
        "dlopen libcupti from a path or soname; returns '' on success or the loader's error");
  m.def("cupti_path", &cupti_path, "the file libcupti was loaded from, '' if none");
  m.def(
      "start",
      [] {
        recorder().reset();
        start_profiling();
      },
      "reset the call-path trie and tables, subscribe to CUPTI and enable kernel activity");
  m.def("stop", [] { stop_profiling(true); }, py::call_guard<py::gil_scoped_release>(),
        "flush, disable activity, unsubscribe and detach CUPTI (cuptiFinalize)");
  m.def(
      "configure",
      [](bool python_frames, bool trace, std::vector<std::string> dirs, std::vector<std::string> files) {
        recorder().configure(python_frames, trace, std::move(dirs), std::move(files));
      },
      py::arg("python_frames"), py::arg("trace"), py::arg("internal_dirs") = std::vector<std::string>{},
      py::arg("internal_files") = std::vector<std::string>{});
  m.def("set_epoch", [](uint32_t epoch) { recorder().set_epoch(epoch); });
  m.add_object("set_context", py::reinterpret_steal<py::object>(PyCFunction_NewEx(&set_context_def, nullptr, nullptr)));
  m.def("flush", [] { return flush_all(true); },
        "(nodes, records, events, dropped, device ids) recorded since the last flush");
  m.def("device_info", &device_dict, py::arg("ordinal"), "device properties through libcuda.so.1 ({} without it)");

  // ---- test-only: synthetic launches and records through the real code path ----
  m.def("_test_reset", [] { recorder().reset(); });
  m.def("_test_launch", [](uint32_t corr) { recorder().on_launch(corr); }, py::arg("corr"),
        "what the launch callback does for correlation id `corr` on this thread");
  m.def(
      "_test_kernel",
      [](uint32_t corr, const std::string& name, uint32_t device, uint32_t stream, uint64_t start, uint64_t end,
         uint64_t graph_node_id) { recorder().on_kernel(corr, name.c_str(), device, stream, start, end, graph_node_id); },
      py::arg("corr"), py::arg("name"), py::arg("device") = 0, py::arg("stream") = 7, py::arg("start") = 0,
      py::arg("end") = 0, py::arg("graph_node_id") = 0, "feed one kernel activity record");
  m.def(
      "_test_start",
      [](bool graph_nodes) {
        recorder().reset();
        start_profiling(graph_nodes);
      },
      py::arg("graph_nodes"), "start, optionally without the graph-node resource callbacks (diagnostics)");
  m.def("_test_stop", [](bool detach) { stop_profiling(detach); }, py::arg("detach"),
        py::call_guard<py::gil_scoped_release>(), "stop, optionally without cuptiFinalize (diagnostics)");
  m.def("_test_launch_nogil", [](uint32_t corr) { recorder().on_launch(corr); }, py::arg("corr"),
        py::call_guard<py::gil_scoped_release>(),
        "as _test_launch, with the GIL released first (as PyTorch does around its launches)");
  m.def("_test_raw_frames", [] { return proton_raw_frames_supported() != 0; },
        "whether python frames are read from the interpreter directly (no GIL taken per launch)");
  m.def("_test_graph_node", [](uint64_t id) { recorder().on_graph_node_created(id); });
  m.def("_test_graph_clone", [](uint64_t id, uint64_t original) { recorder().on_graph_node_cloned(id, original); });
  m.def("_test_flush", [] { return flush_all(false); });
  m.def("_test_node_count", [] { return recorder().node_count(); });
  m.def("_test_launch_noop", &launch_noop_loop, py::arg("n"), py::call_guard<py::gil_scoped_release>(),
        "launch the empty kernel proton_noop n times through cuLaunchKernel; '' or the error");
  m.attr("SLOTS") = Recorder::kSlots;
}
