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

#include <string>

#include "bindings.h"
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

}  // namespace

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
  m.def("_test_flush", [] { return flush_all(false); });
  m.def("_test_node_count", [] { return recorder().node_count(); });
  m.def("_test_launch_noop", &launch_noop_loop, py::arg("n"), py::call_guard<py::gil_scoped_release>(),
        "launch the empty kernel proton_noop n times through cuLaunchKernel; '' or the error");
  m.attr("SLOTS") = Recorder::kSlots;
}

}  // namespace proton_cupti
