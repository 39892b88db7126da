// Test-only bindings, compiled only with the CMake option PROTON_CUPTI_TESTING=ON
// (scripts/install.sh and scripts/gpu_check.sh set it; release wheels lack
// this file).  They feed synthetic launches and records through the same
// Recorder functions CUPTI's callbacks use, and launch an empty kernel in a
// tight loop for the GPU tests and probes.
#ifndef PROTON_CUPTI_TESTING
#error "testing.cc belongs to PROTON_CUPTI_TESTING builds only"
#endif

#include <cuda.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>

#include <pybind11/stl.h>

#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings.h"
#include "native_stack.h"
#include "pcsampling.h"
#include "profiler.h"
#include "pyframes.h"
#include "recorder.h"

namespace py = pybind11;

namespace proton_cupti {

namespace {

// A PTX kernel that does nothing, launched in a tight driver-API loop: the
// fastest way to push millions of launches through the callbacks in tests.
const char kNoopPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry proton_noop()\n{\n  ret;\n}\n";

std::string launch_noop_loop(uint64_t n) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return "libcuda.so.1 cannot be loaded";
  auto sym = [&](const char* name) { return dlsym(h, name); };
  auto cuInit = reinterpret_cast<CUresult (*)(unsigned)>(sym("cuInit"));
  auto cuCtxGetCurrent = reinterpret_cast<CUresult (*)(CUcontext*)>(sym("cuCtxGetCurrent"));
  auto cuCtxSetCurrent = reinterpret_cast<CUresult (*)(CUcontext)>(sym("cuCtxSetCurrent"));
  auto cuDevicePrimaryCtxRetain = reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(sym("cuDevicePrimaryCtxRetain"));
  auto cuModuleLoadData = reinterpret_cast<CUresult (*)(CUmodule*, const void*)>(sym("cuModuleLoadData"));
  auto cuModuleGetFunction =
      reinterpret_cast<CUresult (*)(CUfunction*, CUmodule, const char*)>(sym("cuModuleGetFunction"));
  auto cuLaunchKernel = reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                      unsigned, unsigned, CUstream, void**, void**)>(
      sym("cuLaunchKernel"));
  auto cuCtxSynchronize = reinterpret_cast<CUresult (*)()>(sym("cuCtxSynchronize"));
  if (!cuInit || !cuLaunchKernel || cuInit(0) != CUDA_SUCCESS) return "cuInit failed";
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  if (ctx == nullptr) {
    if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
      return "no CUDA context";
  }
  static CUfunction fn = nullptr;
  if (fn == nullptr) {
    CUmodule mod;
    if (cuModuleLoadData(&mod, kNoopPtx) != CUDA_SUCCESS) return "cuModuleLoadData failed";
    if (cuModuleGetFunction(&fn, mod, "proton_noop") != CUDA_SUCCESS) return "cuModuleGetFunction failed";
  }
  for (uint64_t i = 0; i < n; ++i)
    if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
      return "cuLaunchKernel failed at launch " + std::to_string(i);
  cuCtxSynchronize();
  return "";
}

int collection_of(const std::string& name) {
  if (name == "continuous") return pcs::kContinuous;
  if (name == "serialized") return pcs::kSerialized;
  if (name.empty()) return pcs::kOff;
  throw py::value_error("collection must be 'continuous', 'serialized' or ''");
}

// A CUpti_PCSamplingData buffer as CUPTI fills it, built from Python tuples:
// pcs = [(cubin crc, function name, pc offset, correlation id, [(stall index, samples), ...]), ...].
void ingest_synthetic(const py::list& pcs, const std::vector<std::pair<uint32_t, std::string>>& stall_reasons,
                      uint32_t device, uint64_t total_samples, uint64_t dropped_samples, uint64_t non_user) {
  std::unordered_map<uint32_t, uint32_t> slots;
  for (const auto& r : stall_reasons) slots[r.first] = pcs::store().slot(r.second);
  size_t n = pcs.size();
  std::vector<std::string> names(n);
  std::vector<std::vector<CUpti_PCSamplingStallReason>> reasons(n);
  std::vector<CUpti_PCSamplingPCData> records(n);
  for (size_t i = 0; i < n; ++i) {
    py::tuple t = pcs[i].cast<py::tuple>();
    names[i] = t[1].cast<std::string>();
    for (auto item : t[4].cast<py::list>()) {
      py::tuple r = item.cast<py::tuple>();
      CUpti_PCSamplingStallReason reason;
      reason.pcSamplingStallReasonIndex = r[0].cast<uint32_t>();
      reason.samples = r[1].cast<uint32_t>();
      reasons[i].push_back(reason);
    }
    CUpti_PCSamplingPCData& p = records[i];
    std::memset(&p, 0, sizeof(p));
    p.size = sizeof(CUpti_PCSamplingPCData);
    p.cubinCrc = t[0].cast<uint64_t>();
    p.functionName = const_cast<char*>(names[i].c_str());
    p.pcOffset = t[2].cast<uint64_t>();
    p.correlationId = t[3].cast<uint32_t>();
    p.stallReasonCount = reasons[i].size();
    p.stallReason = reasons[i].data();
  }
  CUpti_PCSamplingData data;
  std::memset(&data, 0, sizeof(data));
  data.size = sizeof(CUpti_PCSamplingData);
  data.collectNumPcs = n;
  data.totalNumPcs = n;
  data.pPcData = records.data();
  data.totalSamples = total_samples;
  data.droppedSamples = dropped_samples;
  data.nonUsrKernelsTotalSamples = non_user;
  pcs::store().ingest(data, device, slots);
}

// ---- context="native": stand-ins for a user's code that launches ----
uint32_t g_user_corr = 0;
int g_compared = 0;

int launch_in_compare(const void*, const void*) {
  if (g_compared++ == 0) recorder().on_launch(g_user_corr);
  return 0;
}

// Frame-pointer walk, for the cost comparison with backtrace() only (decision 0316): the recorder does
// not use it, since libcuda and libcupti keep no frame pointers to walk through.
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int frame_pointer_walk(uintptr_t* out, int max) {
  uintptr_t* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  int n = 0;
  while (fp != nullptr && n < max) {
    out[n++] = fp[1];
    uintptr_t* next = reinterpret_cast<uintptr_t*>(fp[0]);
    if (next <= fp || reinterpret_cast<uintptr_t>(next) - reinterpret_cast<uintptr_t>(fp) > (1u << 20) ||
        (reinterpret_cast<uintptr_t>(next) & 7u) != 0)
      break;
    fp = next;
  }
  return n;
}

// `depth` frames (with frame pointers) deeper, the mean ns of one capture of `method` and the frames it gave.
__attribute__((noinline, optimize("no-omit-frame-pointer"))) std::pair<double, int> capture_cost_at(
    int depth, int method, int iterations, int walk) {
  if (depth > 0) {
    std::pair<double, int> r = capture_cost_at(depth - 1, method, iterations, walk);
    asm volatile("" ::: "memory");  // no tail call: each level keeps its frame
    return r;
  }
  uintptr_t pcs[native_stack::kMaxFrames];
  int n = 0;
  uint64_t t0 = monotonic_ns();
  for (int i = 0; i < iterations; ++i) {
    switch (method) {
      case 0:
        n = native_stack::capture(pcs, native_stack::kMaxFrames);
        break;
      case 1:
        n = native_stack::glibc_backtrace(pcs, native_stack::kMaxFrames);
        break;
      case 2:
        n = native_stack::libunwind_backtrace(pcs, native_stack::kMaxFrames);
        break;
      default:  // the frame-pointer walk stops at our own frames: the callers above them keep none to follow
        n = frame_pointer_walk(pcs, walk);
    }
    asm volatile("" : : "r"(pcs) : "memory");
  }
  return {double(monotonic_ns() - t0) / iterations, n};
}

}  // namespace

// The tests' stand-ins for a user's functions (their own section: native_stack.cc counts their frames as
// the user's).  No inlining, no tail calls: each keeps its frame, so its name is the path's leaf.
#define PROTON_TEST_USER __attribute__((noinline, used, visibility("default"), section("proton_test_user")))

PROTON_TEST_USER void test_user_launch(uint32_t corr) {
  recorder().on_launch(corr);
  asm volatile("" ::: "memory");
}

// Launches from a callback of libc's qsort: libc stands in for the CUDA libraries between the user's call
// and the launch callback.
PROTON_TEST_USER void test_user_launch_through_libc(uint32_t corr) {
  int items[2] = {2, 1};
  g_user_corr = corr;
  g_compared = 0;
  std::qsort(items, 2, sizeof(int), launch_in_compare);
  asm volatile("" ::: "memory");
}

PROTON_TEST_USER std::string test_user_noop_launches(uint64_t n, int depth) {
  if (depth > 0) {  // one more native frame of the user's between the loop and the caller
    std::string error = test_user_noop_launches(n, depth - 1);
    asm volatile("" ::: "memory");
    return error;
  }
  std::string error = launch_noop_loop(n);
  asm volatile("" ::: "memory");
  return error;
}

// What the CUPTI callback does for a launch, as a plain C function: a test library's code calls it
// through a pointer (its own frames then sit between the user's and the callback's).
void launch_callback(uint32_t corr) { recorder().on_launch(corr); }

void bind_testing(py::module_& m) {
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
  m.def("_test_flush", [](bool with_metrics) { return flush_all(false, true, with_metrics); },
        py::arg("with_metrics") = false);
  // ---- PC sampling: the store and the line mapping, without CUPTI's sampler ----
  m.def("_test_pcs_reset", [](const std::string& collection) { pcs::store().reset(collection_of(collection)); },
        py::arg("collection"), "reset the sample store; 'continuous'/'serialized' also note kernel records");
  m.def("_test_pcs_ingest", &ingest_synthetic, py::arg("pcs"), py::arg("stall_reasons"), py::arg("device") = 0,
        py::arg("total_samples") = 0, py::arg("dropped_samples") = 0, py::arg("non_user_samples") = 0,
        "fold one synthetic CUpti_PCSamplingData buffer into the store");
  m.def(
      "_test_pcs_attribute",
      [](bool final) { pcs::store().attribute(pcs::lines(), pcs::correlate_function(), final); },
      py::arg("final"), "attribute pending samples to the noted kernel records");
  m.def("_test_pcs_retire_below", [](uint32_t epoch) { pcs::store().retire_below(epoch); }, py::arg("epoch"),
        "what a complete flush does after attributing: epochs older than `epoch` take no more samples");
  m.def("_test_max_epoch", [] { return recorder().max_epoch(); });
  m.def(
      "_test_pcs_register_cubin",
      [](py::bytes cubin, uint64_t crc) {
        std::string data = cubin;
        return pcs::lines().add_cubin(crc, data.data(), data.size());
      },
      py::arg("cubin"), py::arg("crc"), "keep a cubin under a given CRC (CUPTI computes none without a driver)");
  m.def("_test_pcs_stall_metric", &pcs::stall_metric_name, py::arg("cupti_name"));
  m.def("_test_pcs_not_issued", &pcs::stall_not_issued, py::arg("cupti_name"));
  m.def(
      "_test_pcs_line_name",
      [](uint32_t line, const std::string& file, const std::string& dir, const std::string& function) {
        return pcs::source_line_name(line, file.c_str(), dir.c_str(), function.c_str());
      },
      py::arg("line"), py::arg("file"), py::arg("dir"), py::arg("function") = "");
  m.def("_test_pcs_sass_name", &pcs::sass_name, py::arg("pc_offset"));
  m.def(
      "_test_pcs_has_line_info",
      [](py::bytes cubin) {
        std::string data = cubin;
        return pcs::cubin_has_line_info(data.data(), data.size());
      },
      py::arg("cubin"));
  m.def("_test_pcs_split", &pcs::split_count, py::arg("count"), py::arg("weights"));
  m.def("_test_pcs_correlation_available", [] { return pcs::correlate_function() != nullptr; },
        "whether libcupti is loaded with cuptiGetSassToSourceCorrelation");
  m.def("_test_node_count", [] { return recorder().node_count(); });
  m.def("_test_launch_noop", &launch_noop_loop, py::arg("n"), py::call_guard<py::gil_scoped_release>(),
        "launch the empty kernel proton_noop n times through cuLaunchKernel; '' or the error");
  m.def("_test_user_launch", &test_user_launch, py::arg("corr"),
        "launch `corr` from test_user_launch, a function counted as the user's (context='native' tests)");
  m.def("_test_user_launch_through_libc", &test_user_launch_through_libc, py::arg("corr"),
        "launch `corr` from a qsort comparator called by test_user_launch_through_libc");
  m.def("_test_user_noop_launches", &test_user_noop_launches, py::arg("n"), py::arg("depth") = 0,
        py::call_guard<py::gil_scoped_release>(),
        "as _test_launch_noop, from test_user_noop_launches called `depth` times over (functions counted as the "
        "user's)");
  m.def(
      "_test_native_exclude",
      [](std::vector<std::string> prefixes) {
        native_stack::set_extra_excluded(std::move(prefixes));
        recorder().forget_native_addresses();
      },
      py::arg("prefixes"),
      "library file names beginning with one of these count as launch machinery too (replaces the last list)");
  m.def(
      "_test_native_capture_ns",
      [](const std::string& method, int depth, int iterations) {
        const char* const methods[] = {"capture", "backtrace", "libunwind", "frame_pointers"};
        int index = -1;
        for (int i = 0; i < 4; ++i)
          if (method == methods[i]) index = i;
        if (index < 0) throw py::value_error("method must be 'capture', 'backtrace', 'libunwind' or 'frame_pointers'");
        if (iterations <= 0 || depth < 0 || depth > 100) throw py::value_error("depth 0..100, iterations > 0");
        native_stack::warm_up();
        return capture_cost_at(depth, index, iterations, depth + 2);
      },
      py::arg("method"), py::arg("depth"), py::arg("iterations"),
      "(mean ns of one native stack capture `depth` frames deeper than here, frames it gave; -1: unavailable); "
      "capture is what the recorder uses");
  m.def("_test_native_unwinder", [] {
    native_stack::warm_up();
    return std::string(native_stack::unwinder());
  }, "the unwinder native stacks are captured with: 'libunwind' or 'backtrace' (glibc)");
  m.def("_test_launch_callback_address", [] { return reinterpret_cast<uintptr_t>(&launch_callback); },
        "the address of a C function void(uint32_t corr) that does what the launch callback does");
  m.def("_test_native_cap_libunwind", &native_stack::test_cap_libunwind, py::arg("frames"),
        "libunwind gives at most `frames` frames from now on (0: all), as where it cannot step over a frame");
  m.attr("SLOTS") = Recorder::kSlots;
}

}  // namespace proton_cupti
