// Python bindings of the native backend: the few calls the core makes
// (start/stop/configure/set_epoch/set_context/flush).  The test-only entries
// live in testing.cc and exist only in PROTON_CUPTI_TESTING builds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "pcsampling.h"
#include "profiler.h"
#include "recorder.h"

namespace py = pybind11;
using namespace proton_cupti;

py::tuple proton_cupti::flush_all(bool collect_activity, bool complete, bool with_metrics) {
  if (collect_activity) {
    uint32_t epoch_at_start = recorder().max_epoch();
    py::gil_scoped_release nogil;  // CUPTI's buffer thread must run while we wait
    flush_activity(complete);      // kernel records first: samples are attributed through them
    pcs::collect(complete, epoch_at_start);
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
  if (!with_metrics) return py::make_tuple(nodes, records, events, out.dropped, out.devices);
  py::list metrics;
  for (auto& m : pcs::store().take()) {
    py::list values;
    for (auto& kv : m.metrics) values.append(py::make_tuple(kv.first, kv.second));
    metrics.append(py::make_tuple(m.epoch, m.node, m.kernel, m.device, py::make_tuple(m.line), py::tuple(values)));
  }
  return py::make_tuple(nodes, records, events, out.dropped, out.devices, metrics);
}

py::dict proton_cupti::pcsampling_stats_dict() {
  pcs::SamplerStats s = pcs::sampler_stats();
  pcs::Store::Stats t = pcs::store().stats();
  py::dict d;
  d["on"] = s.on;
  d["collection"] = s.collection == pcs::kSerialized ? "serialized" : s.collection == pcs::kContinuous ? "continuous" : "";
  d["interval"] = s.period;
  d["kernel_activity"] = s.kernels_serial ? "serial" : "concurrent";
  d["contexts"] = s.contexts;
  d["enable_failures"] = s.enable_failures;
  d["get_errors"] = s.get_errors;
  d["hardware_full"] = s.hardware_full;
  d["restarts"] = s.restarts;
  d["drains"] = s.drains;
  d["staging_reads"] = s.staging_reads;
  d["last_error"] = s.last_error;
  d["stall_reasons"] = s.stall_reasons;
  d["function_names"] = s.function_names;
  d["buffers"] = t.buffers;
  d["pc_records"] = t.pc_records;
  d["samples_in"] = t.samples_in;
  d["attributed"] = t.attributed;
  d["unsessioned"] = t.unsessioned;
  d["unattributed"] = t.unattributed;
  d["late"] = t.late;
  d["pending_samples"] = t.pending_samples;
  d["total_samples"] = t.total_samples;
  d["dropped_samples"] = t.dropped_samples;
  d["non_user_samples"] = t.non_user_samples;
  d["pending_keys"] = t.pending_keys;
  d["window_keys"] = t.window_keys;
  d["last_keys"] = t.last_keys;
  d["out_keys"] = t.out_keys;
  d["functions"] = t.functions;
  d["lines"] = t.lines;
  d["metrics"] = t.metrics;
  d["cubins"] = pcs::lines().cubins();
  d["cubin_bytes"] = pcs::lines().cubin_bytes();
  d["line_cache"] = pcs::lines().cached();
  return d;
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
  uint32_t version;  // 2: set_provider is there
  void (*set)(uint64_t);
  uint64_t (*get)();
  void (*set_provider)(uint64_t (*)(uint64_t));
};
NativeContext native_context{2, &Recorder::set_context, &Recorder::context, &Recorder::set_provider};

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
  m.def("native_frames", [](bool on) { recorder().set_native_frames(on); }, py::arg("on"),
        "context='native': capture each launch's native call stack below the thread's context (names at flush)");
  m.def("set_epoch", [](uint32_t epoch) { recorder().set_epoch(epoch); });
  m.def("switch_epochs", [](uint32_t every, uint32_t last) { recorder().switch_epochs(every, last); },
        py::arg("every"), py::arg("last"),
        "after every `every` launches recorded, move on to the next epoch by itself, up to `last`");
  m.def("current_epoch", [] { return recorder().epoch(); }, "the epoch launches are tagged with now");
  m.add_object("set_context", py::reinterpret_steal<py::object>(PyCFunction_NewEx(&set_context_def, nullptr, nullptr)));
  m.add_object("native_context", py::capsule(&native_context, "proton.native_context.v1"));
  m.def("flush", [](bool with_metrics) { return flush_all(true, true, with_metrics); },
        py::arg("with_metrics") = false,
        "(nodes, records, events, dropped, device ids) recorded since the last flush; with_metrics adds the PC "
        "sampling metrics [(epoch, node, kernel, device, (line,), ((name, value), ...)), ...]");
  m.def("drain", [](bool with_metrics) { return flush_all(true, false, with_metrics); },
        py::arg("with_metrics") = false,
        "flush's tuple with what CUPTI has ready (complete buffers only): no device sync, no promise "
        "that earlier launches arrived");
  m.def(
      "pcsampling_start",
      [](const std::string& collection, uint32_t interval, uint32_t drain_ms, const std::string& kernels,
         bool restart, bool restart_each_drain, uint32_t buffer_mb) -> py::object {
        pcs::Options o;
        o.collection = collection == "serialized" ? pcs::kSerialized : pcs::kContinuous;
        o.period = interval;
        o.drain_ms = drain_ms;
        o.kernels = kernels == "serial" ? pcs::kKernelsSerial
                    : kernels == "concurrent" ? pcs::kKernelsConcurrent
                                              : pcs::kKernelsAuto;
        o.restart = restart;
        o.restart_each_drain = restart_each_drain;
        if (buffer_mb != 0) o.hardware_bytes = size_t(buffer_mb) << 20;
        pcs::StartError e;
        {
          py::gil_scoped_release nogil;
          e = start_pcsampling(o);
        }
        if (e.code == 0) return py::none();
        return py::make_tuple(e.code, e.device, e.what, e.detail);
      },
      py::arg("collection"), py::arg("interval"), py::arg("drain_ms"), py::arg("kernels") = "auto",
      py::arg("restart") = true, py::arg("restart_each_drain") = true, py::arg("buffer_mb") = 0,
      "start PC sampling on the attached backend (after start()); None, or (CUPTI code, device, what, detail) "
      "with nothing left enabled");
  m.def("pcsampling_stats", &pcsampling_stats_dict, "PC sampling counters and settings, for diagnostics");
  m.def(
      "register_cubin",
      [](py::bytes cubin) {
        std::string data = cubin;
        py::gil_scoped_release nogil;
        return pcs::register_cubin(data.data(), data.size());
      },
      py::arg("cubin"), "keep a cubin (by CUPTI's CRC) for PC -> source line mapping; False when it has no line table");
  m.def("cupti_version", &cupti_version, "cuptiGetVersion of the loaded libcupti (0 when unknown)");
  m.def("device_name", &device_name, py::arg("ordinal"), "the device's name through libcuda.so.1 ('' without it)");
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
        d["uncaptured_graph"] = s.uncaptured_graph;  // graph kernels whose graph was captured before start
        return d;
      },
      "counts of kernel records since start, for diagnostics");
  m.def("device_info", &device_dict, py::arg("ordinal"), "device properties through libcuda.so.1 ({} without it)");

#ifdef PROTON_CUPTI_TESTING
  bind_testing(m);
#endif
}
