// Python bindings of the native backend: the few calls the core makes
// (start/stop/configure/set_epoch/set_context/flush).  The test-only entries
// live in testing.cc and exist only in PROTON_CUPTI_TESTING builds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "profiler.h"
#include "recorder.h"

namespace py = pybind11;
using namespace proton_cupti;

py::tuple proton_cupti::flush_all(bool collect_activity, bool complete) {
  if (collect_activity) {
    py::gil_scoped_release nogil;  // CUPTI's buffer thread must run while we wait
    flush_activity(complete);
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

namespace {

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

// For native scope sources (the nvtx plugin): set and read the calling thread's context
// from C, on threads that never hold the GIL (proton_core.plugin_api.NATIVE_CONTEXT_CAPSULE).
struct NativeContext {
  uint32_t version;
  void (*set)(uint64_t);
  uint64_t (*get)();
};
NativeContext native_context{1, &Recorder::set_context, &Recorder::context};

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
  m.add_object("native_context", py::capsule(&native_context, "proton.native_context.v1"));
  m.def("flush", [] { return flush_all(true); },
        "(nodes, records, events, dropped, device ids) recorded since the last flush");
  m.def("drain", [] { return flush_all(true, false); },
        "flush's tuple with what CUPTI has ready (complete buffers only): no device sync, no promise "
        "that earlier launches arrived");
  m.def("reattach_if_due", &reattach_if_due, py::arg("min_records"), py::call_guard<py::gil_scoped_release>(),
        "re-attach CUPTI when a graph launch made it keep memory per launch; ns detached, or 0");
  m.def(
      "stats",
      [] {
        Recorder::Stats s = recorder().stats();
        py::dict d;
        d["records"] = s.records;          // kernel records CUPTI delivered since start
        d["unsessioned"] = s.unsessioned;  // of them, launched while no session was active
        d["unmatched"] = s.unmatched;      // no launch seen for them (counted as dropped)
        d["zero_time"] = s.zero_time;      // end <= start: CUPTI gave no duration
        return d;
      },
      "counts of kernel records since start, for diagnostics");
  m.def("device_info", &device_dict, py::arg("ordinal"), "device properties through libcuda.so.1 ({} without it)");

#ifdef PROTON_CUPTI_TESTING
  bind_testing(m);
#endif
}
