// The bare-CUPTI floor: the least any CUPTI-based kernel profiler must do.
//
// It enables the same activity kind as Proton (CONCURRENT_KERNEL), registers
// one driver-API callback on the kernel-launch cbids that stores
// correlationId -> launch number in a mutex-guarded hash map, and a
// buffer-completed callback that only counts kernels and sums durations.
// Whatever a real profiler costs above this is its own overhead.
//
// CUPTI is dlopen'ed (never linked) so one build works with any libcupti the
// process already has; the headers are used only for types and constants.
//
// Two builds of this one file (benchmarks/floor/build.py): the Python module
// _proton_floor (start/stop from a Python process), and, with -DFLOOR_INJECTION,
// libproton_floor_inject.so, which any CUDA program loads through
// CUDA_INJECTION64_PATH: its InitializeInjection starts the same floor and at exit
// it writes what it saw as JSON to the file named by PROTON_FLOOR_OUT (decision
// 0305).  The floor itself (start, stop, the callbacks) is plain C++ used by both.
#ifndef FLOOR_INJECTION
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

// Kernel records keep start/end at the same offsets in every CUpti_ActivityKernelN.
constexpr size_t kStartOffset = 16;
constexpr size_t kEndOffset = 24;
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
static_assert(offsetof(CUpti_ActivityKernel10, start) == kStartOffset, "kernel record layout changed");
static_assert(offsetof(CUpti_ActivityKernel10, end) == kEndOffset, "kernel record layout changed");
#endif
#ifdef FLOOR_INJECTION
// The injection build also counts kernels per name (read from the records at buffer completion, off the
// launch path), so a program's counts can be checked kernel by kernel against the floor's.
constexpr size_t kNameOffset = 104;
static_assert(offsetof(CUpti_ActivityKernel9, name) == kNameOffset, "kernel record layout changed");
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
static_assert(offsetof(CUpti_ActivityKernel10, name) == kNameOffset, "kernel record layout changed");
#endif
std::mutex names_mutex;
std::map<std::string, uint64_t> kernels_by_name;
#endif

constexpr size_t kBufferBytes = 8u << 20;

struct Api {
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) num_dropped = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;  // optional: probes detach CUPTI with it
};

Api api;
void* lib_handle = nullptr;
std::string lib_path_loaded;
CUpti_SubscriberHandle subscriber = nullptr;
bool running = false;

// start()'s config bits, for probes that take CUPTI apart (0, the floor itself, by default).
constexpr long kNoCallbacks = 1;    // no driver-API launch callbacks
constexpr long kNoActivity = 2;     // no kernel activity records
constexpr long kNoCorrelation = 4;  // callbacks count launches but keep no correlation map
constexpr long kNoGraphLaunchCallbacks = 8;  // callbacks on kernel launches only, not on cuGraphLaunch
long config = 0;

std::mutex map_mutex;
std::unordered_map<uint32_t, uint64_t> correlation;  // correlationId -> launch number
uint64_t launches = 0;

std::atomic<uint64_t> kernel_count{0};
std::atomic<uint64_t> kernel_ns{0};
std::atomic<uint64_t> dropped{0};

const CUpti_CallbackId kLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

std::string describe(const char* what, CUptiResult r) {
  const char* s = nullptr;
  if (api.result_string == nullptr || api.result_string(r, &s) != CUPTI_SUCCESS || s == nullptr) s = "unknown";
  return std::string(what) + " failed: " + s + " (" + std::to_string(static_cast<int>(r)) + ")";
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  if (posix_memalign(&p, 8, kBufferBytes) != 0) p = nullptr;
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  uint64_t n = 0, ns = 0;
  CUpti_Activity* record = nullptr;
  if (buffer != nullptr) {
    while (api.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      uint64_t start = 0, end = 0;
      std::memcpy(&start, reinterpret_cast<const char*>(record) + kStartOffset, sizeof start);
      std::memcpy(&end, reinterpret_cast<const char*>(record) + kEndOffset, sizeof end);
      if (end > start) ns += end - start;
      ++n;
#ifdef FLOOR_INJECTION
      const char* name = nullptr;
      std::memcpy(&name, reinterpret_cast<const char*>(record) + kNameOffset, sizeof name);
      std::lock_guard<std::mutex> guard(names_mutex);
      ++kernels_by_name[name ? name : "<unnamed>"];
#endif
    }
  }
  kernel_count += n;
  kernel_ns += ns;
  size_t lost = 0;
  if (api.num_dropped != nullptr && api.num_dropped(ctx, stream, &lost) == CUPTI_SUCCESS) dropped += lost;
  std::free(buffer);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || data == nullptr) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  std::lock_guard<std::mutex> guard(map_mutex);
  ++launches;
  if (!(config & kNoCorrelation)) correlation[info->correlationId] = launches;
}

template <typename T>
bool load(T& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<T>(dlsym(lib_handle, name));
  if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

bool load_library(const char* path, std::string& err) {
  if (lib_handle != nullptr) {
    if (lib_path_loaded != path) {
      err = "floor already loaded " + lib_path_loaded + ", cannot switch to " + path;
      return false;
    }
    return true;
  }
  lib_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib_handle == nullptr) {
    const char* e = dlerror();
    err = std::string("dlopen(") + path + ") failed: " + (e ? e : "unknown");
    return false;
  }
  std::string missing;
  load(api.result_string, "cuptiGetResultString", missing);
  load(api.subscribe, "cuptiSubscribe", missing);
  load(api.unsubscribe, "cuptiUnsubscribe", missing);
  load(api.enable_callback, "cuptiEnableCallback", missing);
  load(api.activity_enable, "cuptiActivityEnable", missing);
  load(api.activity_disable, "cuptiActivityDisable", missing);
  load(api.register_callbacks, "cuptiActivityRegisterCallbacks", missing);
  load(api.flush_all, "cuptiActivityFlushAll", missing);
  load(api.next_record, "cuptiActivityGetNextRecord", missing);
  load(api.num_dropped, "cuptiActivityGetNumDroppedRecords", missing);
  api.finalize = reinterpret_cast<decltype(api.finalize)>(dlsym(lib_handle, "cuptiFinalize"));
  if (!missing.empty()) {
    err = std::string(path) + " lacks: " + missing;
    dlclose(lib_handle);
    lib_handle = nullptr;
    api = Api();
    return false;
  }
  lib_path_loaded = path;
  return true;
}

// ---- the floor: plain C++, used by the Python module and the injection library alike ----
struct Totals {
  uint64_t kernels = 0, time_ns = 0, dropped = 0;
};

// Loads `path` (once), subscribes and enables kernel records; false with `err` said where it cannot.
bool floor_start_core(const char* path, long cfg, std::string& err) {
  if (running) {
    err = "floor already started";
    return false;
  }
  if (!load_library(path, err)) return false;

  config = cfg;
  kernel_count = 0;
  kernel_ns = 0;
  dropped = 0;
  {
    std::lock_guard<std::mutex> guard(map_mutex);
    correlation.clear();
    launches = 0;
  }
  CUptiResult r = api.register_callbacks(on_buffer_requested, on_buffer_completed);
  if (r != CUPTI_SUCCESS) {
    err = describe("cuptiActivityRegisterCallbacks", r);
    return false;
  }
  r = api.subscribe(&subscriber, on_callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    subscriber = nullptr;
    err = describe("cuptiSubscribe", r);
    return false;
  }
  int enabled = 0;
  CUptiResult last = CUPTI_SUCCESS;
  for (CUpti_CallbackId cbid : kLaunchCbids) {
    if (config & kNoCallbacks) {
      ++enabled;
      break;
    }
    if ((config & kNoGraphLaunchCallbacks) &&
        (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz))
      continue;
    CUptiResult e = api.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
    if (e == CUPTI_SUCCESS) ++enabled; else last = e;
  }
  if (enabled == 0) {
    api.unsubscribe(subscriber);
    subscriber = nullptr;
    err = describe("cuptiEnableCallback (every launch cbid)", last);
    return false;
  }
  r = (config & kNoActivity) ? CUPTI_SUCCESS : api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    api.unsubscribe(subscriber);
    subscriber = nullptr;
    err = describe("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    return false;
  }
  running = true;
  return true;
}

// Flushes, disables, flushes again and unsubscribes (then cuptiFinalize if asked); the floor is stopped
// afterwards whatever failed.  Touches no Python: the module calls it without the GIL.
bool floor_stop_core(bool finalize, Totals& out, std::string& err) {
  if (!running) {
    err = "floor not started";
    return false;
  }
  CUptiResult flush1 = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CUptiResult disable =
      (config & kNoActivity) ? CUPTI_SUCCESS : api.activity_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  CUptiResult flush2 = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api.unsubscribe(subscriber);
  if (finalize && api.finalize != nullptr) api.finalize();
  subscriber = nullptr;
  running = false;
  if (flush1 != CUPTI_SUCCESS) {
    err = describe("cuptiActivityFlushAll", flush1);
    return false;
  }
  if (disable != CUPTI_SUCCESS) {
    err = describe("cuptiActivityDisable", disable);
    return false;
  }
  if (flush2 != CUPTI_SUCCESS) {
    err = describe("cuptiActivityFlushAll", flush2);
    return false;
  }
  out.kernels = kernel_count.load();
  out.time_ns = kernel_ns.load();
  out.dropped = dropped.load();
  return true;
}

// (launch callbacks seen, distinct correlation ids kept)
void floor_launches_core(uint64_t& seen, uint64_t& distinct) {
  std::lock_guard<std::mutex> guard(map_mutex);
  seen = launches;
  distinct = correlation.size();
}

#ifndef FLOOR_INJECTION
// ---- the Python module _proton_floor ----
PyObject* fail(const std::string& msg) {
  PyErr_SetString(PyExc_RuntimeError, msg.c_str());
  return nullptr;
}

PyObject* floor_start(PyObject*, PyObject* args) {
  const char* path = nullptr;
  long cfg = 0;
  if (!PyArg_ParseTuple(args, "s|l", &path, &cfg)) return nullptr;
  std::string err;
  if (!floor_start_core(path, cfg, err)) return fail(err);
  Py_RETURN_NONE;
}

PyObject* floor_stop(PyObject*, PyObject* args) {
  int finalize = 0;
  if (!PyArg_ParseTuple(args, "|p", &finalize)) return nullptr;
  if (!running) return fail("floor not started");
  Totals totals;
  std::string err;
  bool ok;
  Py_BEGIN_ALLOW_THREADS
  ok = floor_stop_core(finalize != 0, totals, err);
  Py_END_ALLOW_THREADS
  if (!ok) return fail(err);
  return Py_BuildValue("(KKK)", static_cast<unsigned long long>(totals.kernels),
                       static_cast<unsigned long long>(totals.time_ns),
                       static_cast<unsigned long long>(totals.dropped));
}

PyObject* floor_launches(PyObject*, PyObject*) {
  uint64_t seen = 0, distinct = 0;
  floor_launches_core(seen, distinct);
  return Py_BuildValue("(KK)", static_cast<unsigned long long>(seen), static_cast<unsigned long long>(distinct));
}

PyObject* floor_library(PyObject*, PyObject*) {
  return PyUnicode_FromString(lib_path_loaded.c_str());
}

PyMethodDef methods[] = {
    {"start", floor_start, METH_VARARGS,
     "start(libcupti_path, config=0): subscribe and enable kernel records (config bits: 1 no callbacks, "
     "2 no activity, 4 no correlation map, 8 no cuGraphLaunch callbacks)"},
    {"stop", floor_stop, METH_VARARGS,
     "stop(finalize=False) -> (kernel_count, total_time_ns, dropped); flushes first, then cuptiFinalize if asked"},
    {"launches", floor_launches, METH_NOARGS, "launches() -> (callbacks seen, distinct correlation ids)"},
    {"library", floor_library, METH_NOARGS, "the libcupti path loaded, '' if none"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_proton_floor", "bare-CUPTI overhead floor", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__proton_floor(void) { return PyModule_Create(&module); }
#else
// ---- the injection library libproton_floor_inject.so (CUDA_INJECTION64_PATH) ----
std::string injection_error;  // why the floor did not start or stop, written into the output

void json_string(FILE* f, const std::string& s) {
  std::fputc('"', f);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') std::fprintf(f, "\\%c", c);
    else if (c < 0x20) std::fprintf(f, "\\u%04x", c);
    else std::fputc(c, f);
  }
  std::fputc('"', f);
}

// {"kernels", "time_ns", "dropped", "launches", "per_kernel": {name: count}, "libcupti", "error"} to
// $PROTON_FLOOR_OUT (a program run under the floor has its stdout to itself).
void write_result(const Totals& totals, uint64_t seen) {
  const char* path = std::getenv("PROTON_FLOOR_OUT");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "floor: PROTON_FLOOR_OUT is not set: %llu kernels, %llu dropped\n",
                 static_cast<unsigned long long>(totals.kernels), static_cast<unsigned long long>(totals.dropped));
    return;
  }
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "floor: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "{\"kernels\": %llu, \"time_ns\": %llu, \"dropped\": %llu, \"launches\": %llu, \"per_kernel\": {",
               static_cast<unsigned long long>(totals.kernels), static_cast<unsigned long long>(totals.time_ns),
               static_cast<unsigned long long>(totals.dropped), static_cast<unsigned long long>(seen));
  {
    std::lock_guard<std::mutex> guard(names_mutex);
    const char* sep = "";
    for (const auto& kv : kernels_by_name) {
      std::fputs(sep, f);
      json_string(f, kv.first);
      std::fprintf(f, ": %llu", static_cast<unsigned long long>(kv.second));
      sep = ", ";
    }
  }
  std::fputs("}, \"libcupti\": ", f);
  json_string(f, lib_path_loaded);
  std::fputs(", \"error\": ", f);
  if (injection_error.empty()) std::fputs("null", f); else json_string(f, injection_error);
  std::fputs("}\n", f);
  std::fclose(f);
}

// The program ends (return from main or exit()): stop the floor, which flushes every record, and write.
void at_exit() {
  Totals totals;
  uint64_t seen = 0, distinct = 0;
  if (running) {
    floor_launches_core(seen, distinct);
    std::string err;
    if (!floor_stop_core(false, totals, err)) injection_error = err;
  }
  write_result(totals, seen);
}

}  // namespace

// Called by the CUDA driver in cuInit, once per process.  libcupti from PROTON_FLOOR_CUPTI (else the
// loader's libcupti.so), config bits from PROTON_FLOOR_CONFIG (0: the floor itself).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] {
    const char* lib = std::getenv("PROTON_FLOOR_CUPTI");
    if (lib == nullptr || *lib == '\0') lib = "libcupti.so";
    const char* cfg = std::getenv("PROTON_FLOOR_CONFIG");
    std::string err;
    if (!floor_start_core(lib, cfg ? std::strtol(cfg, nullptr, 0) : 0, err)) {
      injection_error = err;
      std::fprintf(stderr, "floor: %s\n", err.c_str());
    } else {
      result = 1;
    }
    std::atexit(at_exit);  // the output is written either way: an error is said in it
  });
  return result;
}
#endif
