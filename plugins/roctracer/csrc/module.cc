// Python bindings of the AMD backend: the few calls the core makes (start, configure, set_epoch,
// set_context, flush) and what the Python shell needs to find and describe the SDK.  The test-only
// entries (_test_*) are always built: they drive the same Recorder functions the SDK's callbacks do.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "markers.h"
#include "recorder.h"
#include "rocprofiler_sdk_api.h"
#include "sdk.h"

namespace py = pybind11;
using namespace proton_roc;

namespace {

py::tuple flush_tuple(bool collect, const std::vector<int>& sync_devices, bool sync = true) {
  if (collect) {
    py::gil_scoped_release nogil;  // the SDK's delivery thread may need the GIL (roctx scopes)
    flush_records(sync_devices, sync);
  }
  Recorder::FlushOut out = recorder().flush();
  py::list nodes, records, events;
  for (auto& n : out.nodes) {
    py::object value = py::none();
    if (n.kind == kNodeContext) value = py::int_(n.ctx);
    if (n.kind == kNodeFrame) value = py::str(n.frame);
    nodes.append(py::make_tuple(n.id, n.parent, n.kind, value));
  }
  for (auto& r : out.records) records.append(py::make_tuple(r.epoch, r.node, r.kernel, r.device, r.time_ns, r.count));
  for (auto& e : out.events)
    events.append(py::make_tuple(e.epoch, e.node, e.kernel, e.device, e.queue, e.start, e.end, e.launch, e.tid));
  return py::make_tuple(nodes, records, events, out.dropped, out.devices);
}

PyObject* set_context_fast(PyObject*, PyObject* arg) {
  unsigned long long ctx = PyLong_AsUnsignedLongLong(arg);
  if (ctx == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  Recorder::set_context(ctx);
  Py_RETURN_NONE;
}
PyMethodDef set_context_def = {"set_context", set_context_fast, METH_O,
                               "set_context(ctx): the calling thread's core context id is now ctx"};

// proton_core.native_api.NATIVE_CONTEXT_CAPSULE: native scope sources set contexts without the GIL.
struct NativeContext {
  uint32_t version;
  void (*set)(uint64_t);
  uint64_t (*get)();
  void (*set_provider)(uint64_t (*)(uint64_t));
};
NativeContext native_context{2, &Recorder::set_context, &Recorder::context, &Recorder::set_provider};

}  // namespace

PYBIND11_MODULE(_rocprofiler, m) {
  m.doc() = "Native rocprofiler-sdk backend of Proton (librocprofiler-sdk is loaded at run time).";
  m.attr("DECLARED_FROM") = PROTON_ROCPROFILER_SDK_DECLARED_FROM_STR;
  m.def("load_sdk", &load_sdk, py::arg("path"), "dlopen librocprofiler-sdk; '' on success, else the loader's error");
  m.def("sdk_path", &sdk_path, "the file librocprofiler-sdk was loaded from, '' if none");
  m.def("sdk_version", &sdk_version, "rocprofiler_get_version of the loaded library, '' if unknown");
  m.def(
      "attach",
      [] {
        AttachResult r;
        {
          py::gil_scoped_release nogil;
          r = attach();
        }
        return py::make_tuple(r.status, r.detail);
      },
      "configure Proton as a rocprofiler-sdk tool (once per process): (0, '') or (status, what failed)");
  m.def("attached", &attached);
  m.def("reset", [] { recorder().reset(); }, "a fresh trie and tables (a session starts)");
  m.def(
      "configure",
      [](bool python_frames, bool trace, std::vector<std::string> dirs, std::vector<std::string> files) {
        recorder().configure(python_frames, trace, std::move(dirs), std::move(files));
      },
      py::arg("python_frames"), py::arg("trace"), py::arg("internal_dirs") = std::vector<std::string>{},
      py::arg("internal_files") = std::vector<std::string>{});
  m.def("set_epoch", [](uint32_t e) { recorder().set_epoch(e); });
  m.def("switch_epochs", [](uint32_t every, uint32_t last) { recorder().switch_epochs(every, last); }, py::arg("every"),
        py::arg("last"));
  m.def("current_epoch", [] { return recorder().epoch(); });
  m.add_object("set_context", py::reinterpret_steal<py::object>(PyCFunction_NewEx(&set_context_def, nullptr, nullptr)));
  m.add_object("native_context", py::capsule(&native_context, "proton.native_context.v1"));
  m.def("flush", [](std::vector<int> sync_devices) { return flush_tuple(true, sync_devices); },
        py::arg("sync_devices") = std::vector<int>{},
        "(nodes, records, events, dropped, physical GPU indices) since the last flush, after the SDK handed over "
        "its buffer (the HIP devices named waited for first)");
  m.def("drain", [] { return flush_tuple(true, {}, false); },
        "flush's tuple with what the SDK has ready: no device sync, earlier launches may still be owed");
  m.def(
      "gpu_agents",
      [] {
        py::list out;
        for (const Agent& a : gpu_agents()) {
          py::dict d;
          d["handle"] = a.handle;
          d["physical"] = a.physical;
          d["node_id"] = a.node_id;
          d["name"] = a.name;
          d["product"] = a.product;
          d["cu_count"] = a.cu_count;
          d["clock_mhz"] = a.clock_mhz;
          d["memory_clock_mhz"] = a.memory_clock_mhz;
          d["bus_width"] = a.bus_width;
          out.append(d);
        }
        return out;
      },
      "the GPU agents the SDK reported (every GPU of the machine, whatever *_VISIBLE_DEVICES say)");
  m.def("enable_markers", [](bool on) {
    if (!enable_markers(on)) throw py::error_already_set();
  });
  m.def(
      "stats",
      [] {
        Recorder::Stats s = recorder().stats();
        py::dict d;
        d["launches"] = s.launches;
        d["records"] = s.records;
        d["unsessioned"] = s.unsessioned;
        d["unmatched"] = s.unmatched;
        d["zero_time"] = s.zero_time;
        d["sdk_dropped"] = s.sdk_dropped;
        d["roctx_misnested"] = marker_misnested();
        return d;
      },
      "counters since the last reset, for diagnostics");
  // ---- test bindings: the callbacks' own entry points, without the SDK ----
  m.def("_test_launch", [](uint64_t corr) { recorder().on_launch(corr); }, py::arg("corr"));
  m.def(
      "_test_dispatch",
      [](uint64_t corr, uint64_t kernel_id, uint32_t device, uint64_t queue, uint64_t start, uint64_t end) {
        recorder().on_dispatch(corr, kernel_id, device, queue, start, end);
      },
      py::arg("corr"), py::arg("kernel_id"), py::arg("device") = 0, py::arg("queue") = 0, py::arg("start") = 0,
      py::arg("end") = 0);
  m.def("_test_symbol", [](uint64_t kernel_id, const std::string& name) { recorder().on_kernel_symbol(kernel_id, name.c_str()); });
  m.def("_test_flush", [] { return flush_tuple(false, {}); });
  m.def(
      "_test_launch_loop",
      [](uint64_t n, uint64_t first_corr) {
        uint64_t t0 = monotonic_ns();
        for (uint64_t i = 0; i < n; ++i) {
          recorder().on_launch(first_corr + i);
          recorder().on_dispatch(first_corr + i, 1, 0, 0, 1000 * i, 1000 * i + 500);
        }
        return monotonic_ns() - t0;
      },
      py::arg("n"), py::arg("first_corr"), py::call_guard<py::gil_scoped_release>(),
      "n launches and their records through the recorder; the nanoseconds it took");
  m.attr("SLOTS") = Recorder::kSlots;
}
