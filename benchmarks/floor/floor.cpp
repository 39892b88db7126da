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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

PyObject* fail(const std::string& msg) {
  PyErr_SetString(PyExc_RuntimeError, msg.c_str());
  return nullptr;
}

PyObject* floor_start(PyObject*, PyObject* args) {
  const char* path = nullptr;
  long cfg = 0;
  if (!PyArg_ParseTuple(args, "s|l", &path, &cfg)) return nullptr;
  if (running) return fail("floor already started");
  std::string err;
  if (!load_library(path, err)) return fail(err);

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
  if (r != CUPTI_SUCCESS) return fail(describe("cuptiActivityRegisterCallbacks", r));
  r = api.subscribe(&subscriber, on_callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    subscriber = nullptr;
    return fail(describe("cuptiSubscribe", r));
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
    return fail(describe("cuptiEnableCallback (every launch cbid)", last));
  }
  r = (config & kNoActivity) ? CUPTI_SUCCESS : api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    api.unsubscribe(subscriber);
    subscriber = nullptr;
    return fail(describe("cuptiActivityEnable(CONCURRENT_KERNEL)", r));
  }
  running = true;
  Py_RETURN_NONE;
}

PyObject* floor_stop(PyObject*, PyObject* args) {
  int finalize = 0;
  if (!PyArg_ParseTuple(args, "|p", &finalize)) return nullptr;
  if (!running) return fail("floor not started");
  CUptiResult flush1, disable, flush2;
  Py_BEGIN_ALLOW_THREADS
  flush1 = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  disable = (config & kNoActivity) ? CUPTI_SUCCESS : api.activity_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  flush2 = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api.unsubscribe(subscriber);
  if (finalize && api.finalize != nullptr) api.finalize();
  Py_END_ALLOW_THREADS
  subscriber = nullptr;
  running = false;
  if (flush1 != CUPTI_SUCCESS) return fail(describe("cuptiActivityFlushAll", flush1));
  if (disable != CUPTI_SUCCESS) return fail(describe("cuptiActivityDisable", disable));
  if (flush2 != CUPTI_SUCCESS) return fail(describe("cuptiActivityFlushAll", flush2));
  return Py_BuildValue("(KKK)", static_cast<unsigned long long>(kernel_count.load()),
                       static_cast<unsigned long long>(kernel_ns.load()),
                       static_cast<unsigned long long>(dropped.load()));
}

PyObject* floor_launches(PyObject*, PyObject*) {
  std::lock_guard<std::mutex> guard(map_mutex);
  return Py_BuildValue("(KK)", static_cast<unsigned long long>(launches),
                       static_cast<unsigned long long>(correlation.size()));
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
