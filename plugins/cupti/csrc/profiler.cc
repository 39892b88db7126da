// CUPTI subscription, launch/resource callbacks and activity buffers.
// Everything CUPTI hands us goes straight into the Recorder.
#include "profiler.h"

#include <cupti.h>
#include <dlfcn.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "recorder.h"

namespace proton_cupti {

void note_graph_capture();

namespace {

// CUDA 12's libcupti fills CUpti_ActivityKernel9, CUDA 13's CUpti_ActivityKernel10;
// the fields read here sit at the same offsets in both (checked below).
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif
static_assert(offsetof(KernelRecord, correlationId) == 92, "kernel record layout changed");
static_assert(offsetof(KernelRecord, graphNodeId) == 144, "kernel record layout changed");

#define CUPTI_FUNCS(X)                           \
  X(cuptiSubscribe)                              \
  X(cuptiUnsubscribe)                            \
  X(cuptiEnableCallback)                         \
  X(cuptiActivityEnable)                         \
  X(cuptiActivityDisable)                        \
  X(cuptiActivityRegisterCallbacks)              \
  X(cuptiActivityGetNextRecord)                  \
  X(cuptiActivityGetNumDroppedRecords)           \
  X(cuptiActivityFlushAll)                       \
  X(cuptiGetGraphNodeId)                         \
  X(cuptiGetResultString)

struct CuptiApi {
  void* handle = nullptr;
  std::string path;
#define DECLARE(name) decltype(&::name) name = nullptr;
  CUPTI_FUNCS(DECLARE)
#undef DECLARE
  decltype(&::cuptiActivityRegisterTimestampCallback) cuptiActivityRegisterTimestampCallback = nullptr;  // optional
  decltype(&::cuptiFinalize) cuptiFinalize = nullptr;                                                      // optional
  decltype(&::cuptiGetVersion) cuptiGetVersion = nullptr;                                                  // optional
};
CuptiApi api;

struct DriverApi {
  bool tried = false;
  void* handle = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDevicePrimaryCtxGetState)(CUdevice, unsigned*, int*) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
};
DriverApi drv;
std::mutex drv_mu;

DriverApi& driver() {
  std::lock_guard<std::mutex> g(drv_mu);
  if (!drv.tried) {
    drv.tried = true;
    drv.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv.handle != nullptr) {
      drv.cuInit = reinterpret_cast<decltype(drv.cuInit)>(dlsym(drv.handle, "cuInit"));
      drv.cuDeviceGet = reinterpret_cast<decltype(drv.cuDeviceGet)>(dlsym(drv.handle, "cuDeviceGet"));
      drv.cuDeviceGetAttribute =
          reinterpret_cast<decltype(drv.cuDeviceGetAttribute)>(dlsym(drv.handle, "cuDeviceGetAttribute"));
      drv.cuCtxGetCurrent = reinterpret_cast<decltype(drv.cuCtxGetCurrent)>(dlsym(drv.handle, "cuCtxGetCurrent"));
      drv.cuCtxSynchronize =
          reinterpret_cast<decltype(drv.cuCtxSynchronize)>(dlsym(drv.handle, "cuCtxSynchronize"));
      // The versioned names are what cuda.h's macros resolve to.
      drv.cuDeviceGetCount = reinterpret_cast<decltype(drv.cuDeviceGetCount)>(dlsym(drv.handle, "cuDeviceGetCount"));
      drv.cuDevicePrimaryCtxGetState = reinterpret_cast<decltype(drv.cuDevicePrimaryCtxGetState)>(
          dlsym(drv.handle, "cuDevicePrimaryCtxGetState"));
      drv.cuDevicePrimaryCtxRetain =
          reinterpret_cast<decltype(drv.cuDevicePrimaryCtxRetain)>(dlsym(drv.handle, "cuDevicePrimaryCtxRetain"));
      drv.cuDevicePrimaryCtxRelease = reinterpret_cast<decltype(drv.cuDevicePrimaryCtxRelease)>(
          dlsym(drv.handle, "cuDevicePrimaryCtxRelease_v2"));
      drv.cuCtxPushCurrent =
          reinterpret_cast<decltype(drv.cuCtxPushCurrent)>(dlsym(drv.handle, "cuCtxPushCurrent_v2"));
      drv.cuCtxPopCurrent = reinterpret_cast<decltype(drv.cuCtxPopCurrent)>(dlsym(drv.handle, "cuCtxPopCurrent_v2"));
      drv.cuDeviceGetName = reinterpret_cast<decltype(drv.cuDeviceGetName)>(dlsym(drv.handle, "cuDeviceGetName"));
    }
  }
  return drv;
}

// Wait for the calling thread's current context, if it has one, and for every
// active primary context (what PyTorch, JAX and Triton launch into), so a flush
// from any thread, a periodic writer's too, delivers every kernel launched before it.
void sync_contexts() {
  DriverApi& d = driver();
  if (!d.cuCtxSynchronize) return;
  CUcontext ctx = nullptr;
  if (d.cuCtxGetCurrent && d.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr) d.cuCtxSynchronize();
  int count = 0;
  if (!d.cuDeviceGetCount || !d.cuDevicePrimaryCtxGetState || !d.cuDevicePrimaryCtxRetain ||
      !d.cuDevicePrimaryCtxRelease || !d.cuCtxPushCurrent || !d.cuCtxPopCurrent ||
      d.cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return;
  for (int dev = 0; dev < count; ++dev) {
    unsigned flags = 0;
    int active = 0;
    if (d.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) continue;
    CUcontext primary = nullptr;
    if (d.cuDevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS) continue;  // retain: it cannot go away meanwhile
    if (primary != ctx && d.cuCtxPushCurrent(primary) == CUDA_SUCCESS) {
      d.cuCtxSynchronize();
      CUcontext popped = nullptr;
      d.cuCtxPopCurrent(&popped);
    }
    d.cuDevicePrimaryCtxRelease(dev);
  }
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (api.cuptiGetResultString != nullptr) api.cuptiGetResultString(r, &s);
  return s ? std::string(s) : "CUPTI error " + std::to_string(int(r));
}

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + result_text(r));
}

// ------------------------------------------------------------- buffers ----
// Completed buffers are recycled; beyond a small pool they are unmapped, so
// memory goes back to the system when CUPTI had many buffers in flight (mmap,
// not malloc: glibc would keep freed 8 MiB blocks in its heap).
constexpr size_t kBufferSize = 8u << 20;
constexpr size_t kPoolMax = 2;
std::mutex pool_mu;
std::vector<uint8_t*> pool;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> g(pool_mu);
    if (!pool.empty()) {
      b = pool.back();
      pool.pop_back();
    }
  }
  if (b == nullptr) {
    void* p = mmap(nullptr, kBufferSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    b = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  *buffer = b;
  *size = b ? kBufferSize : 0;  // 0: CUPTI drops records and counts them
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Recorder& rec = recorder();
  CUpti_Activity* record = nullptr;
  while (api.cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<KernelRecord*>(record);
      rec.on_kernel(k->correlationId, k->name, k->deviceId, k->streamId, k->start, k->end, k->graphNodeId);
    }
  }
  size_t dropped = 0;
  if (api.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
    rec.add_dropped(dropped);
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> g(pool_mu);
  if (pool.size() < kPoolMax)
    pool.push_back(buffer);
  else
    munmap(buffer, kBufferSize);
}

uint64_t CUPTIAPI timestamp() { return monotonic_ns(); }

// ----------------------------------------------------------- callbacks ----
const CUpti_CallbackId kLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb->callbackSite == CUPTI_API_ENTER) {
      recorder().on_launch(cb->correlationId);
      if (pcs::sampling_on()) pcs::on_launch_enter(cb->context);  // one relaxed load when sampling is off
    } else if (pcs::sampling_on()) {
      pcs::on_launch_exit(cb->context);
    }
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    auto* res = static_cast<const CUpti_ResourceData*>(data);
    if (cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
      if (pcs::sampling_on()) pcs::on_resource(cbid, res);  // contexts and modules (enabled only while sampling)
      return;
    }
    auto* graph = static_cast<const CUpti_GraphData*>(res->resourceDescriptor);
    if (graph == nullptr || graph->node == nullptr) return;
    uint64_t id = 0;
    if (api.cuptiGetGraphNodeId(graph->node, &id) != CUPTI_SUCCESS) return;
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
      note_graph_capture();
      recorder().on_graph_node_created(id);
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && graph->originalNode != nullptr) {
      uint64_t original = 0;
      if (api.cuptiGetGraphNodeId(graph->originalNode, &original) == CUPTI_SUCCESS)
        recorder().on_graph_node_cloned(id, original);
    }
  }
}

CUpti_SubscriberHandle subscriber = nullptr;
bool activity_on = false;
// CONCURRENT_KERNEL normally; KERNEL (serial records) when PC sampling needs it.
CUpti_ActivityKind kernel_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
std::mutex state_mu;

}  // namespace

std::string load_cupti(const std::string& path) {
  if (api.handle != nullptr) return "";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return e ? e : "dlopen failed";
  }
  CuptiApi loaded;
  loaded.handle = h;
  loaded.path = path;
#define RESOLVE(name)                                                     \
  loaded.name = reinterpret_cast<decltype(loaded.name)>(dlsym(h, #name)); \
  if (loaded.name == nullptr) {                                           \
    dlclose(h);                                                           \
    return "symbol " #name " missing";                                    \
  }
  CUPTI_FUNCS(RESOLVE)
#undef RESOLVE
  loaded.cuptiActivityRegisterTimestampCallback = reinterpret_cast<decltype(loaded.cuptiActivityRegisterTimestampCallback)>(
      dlsym(h, "cuptiActivityRegisterTimestampCallback"));
  loaded.cuptiFinalize = reinterpret_cast<decltype(loaded.cuptiFinalize)>(dlsym(h, "cuptiFinalize"));
  loaded.cuptiGetVersion = reinterpret_cast<decltype(loaded.cuptiGetVersion)>(dlsym(h, "cuptiGetVersion"));
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(loaded.cuptiSubscribe), &info) && info.dli_fname) loaded.path = info.dli_fname;
  api = loaded;
  return "";
}

std::string cupti_path() { return api.path; }

namespace {

bool graph_nodes_on = true;
// Set by a graph captured while attached: from then on CUPTI keeps ~32 B per launch until
// cuptiFinalize (benchmarks/probes/rss_graph_probe.py).  Graph launches alone keep nothing once
// forced flushes stay out of the running program (periodic writer: drain between phase ends).
std::atomic<bool> graph_captured{false};
uint64_t records_at_attach = 0;

// Subscribe, enable the callbacks and kernel activity (state_mu held).
void attach_locked() {
  check(api.cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(on_callback), nullptr),
        "cuptiSubscribe");
  try {
    // Only once CUPTI is ours: another client's clock must stay its own.  CUPTI
    // accepts the timestamp callback only before activity is first enabled.
    if (api.cuptiActivityRegisterTimestampCallback != nullptr)
      api.cuptiActivityRegisterTimestampCallback(timestamp);
    for (CUpti_CallbackId cbid : kLaunchCbids)
      api.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);  // absent ids just fail
    if (graph_nodes_on) {
      check(api.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED),
            "enabling graph node callbacks");
      check(api.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED),
            "enabling graph node callbacks");
    }
    check(api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    check(api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel activity");
    kernel_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    activity_on = true;
  } catch (...) {
    api.cuptiUnsubscribe(subscriber);
    subscriber = nullptr;
    throw;
  }
  graph_captured.store(false, std::memory_order_relaxed);
  records_at_attach = recorder().stats().records;
}

// Deliver every record, then let go of CUPTI (state_mu held).
void detach_locked(bool finalize) {
  sync_contexts();  // no kernel may still owe a record when CUPTI detaches
  api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (activity_on) api.cuptiActivityDisable(kernel_kind);
  activity_on = false;
  kernel_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api.cuptiUnsubscribe(subscriber);
  subscriber = nullptr;
  // Detach CUPTI: state it keeps per process (after a CUDA graph was seen it
  // grows with every later launch) goes with it; the next attach starts afresh.
  if (finalize && api.cuptiFinalize != nullptr) api.cuptiFinalize();
}

}  // namespace

void note_graph_capture() { graph_captured.store(true, std::memory_order_relaxed); }

void start_profiling(bool graph_nodes) {
  std::lock_guard<std::mutex> g(state_mu);
  if (api.handle == nullptr) throw std::runtime_error("libcupti is not loaded");
  if (subscriber != nullptr) return;
  graph_nodes_on = graph_nodes;
  attach_locked();
}

void stop_profiling(bool detach) {
  std::lock_guard<std::mutex> g(state_mu);
  if (subscriber == nullptr) return;
  pcs::stop(subscriber);  // while still subscribed: disable sampling per context before CUPTI detaches
  detach_locked(detach);
  // CUPTI's function name strings of PC records may be shared with its activity
  // records: free them only once CUPTI is gone.
  if (detach && api.cuptiFinalize != nullptr) pcs::release_function_names();
}

uint64_t reattach_if_due(uint64_t min_records) {
  std::lock_guard<std::mutex> g(state_mu);
  if (subscriber == nullptr || api.cuptiFinalize == nullptr || !graph_captured.load(std::memory_order_relaxed))
    return 0;
  if (pcs::sampling_on()) return 0;  // cuptiFinalize would end PC sampling; the session stops it instead
  if (recorder().stats().records - records_at_attach < min_records) return 0;
  uint64_t t0 = monotonic_ns();
  detach_locked(true);
  attach_locked();
  uint64_t detached_ns = monotonic_ns() - t0;
#ifdef __GLIBC__
  // What CUPTI freed stays in malloc's heap as holes; hand it back so RSS shows the release.
  malloc_trim(0);
#endif
  return detached_ns;
}

void flush_activity(bool complete) {
  std::lock_guard<std::mutex> g(state_mu);
  if (subscriber == nullptr) return;
  if (!complete) {
    // Only buffers whose records are all complete: no device sync, nothing cut short.  A forced
    // flush from another thread while the program launches (the periodic writer's poll) made
    // CUPTI keep ~36 B for every later kernel after a graph launch: 3.5 MiB a phase in the soak.
    api.cuptiActivityFlushAll(0);
    return;
  }
  sync_contexts();  // kernels still running have no record yet
  api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

namespace {

// Switches the kernel activity kind (state_mu held): KERNEL gives the same
// records as CONCURRENT_KERNEL, with kernels serialized on the GPU.
bool use_serial_kernels_locked(bool serial) {
  if (subscriber == nullptr || !activity_on) return false;
  CUpti_ActivityKind want = serial ? CUPTI_ACTIVITY_KIND_KERNEL : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (kernel_kind == want) return true;
  api.cuptiActivityFlushAll(0);
  if (api.cuptiActivityDisable(kernel_kind) != CUPTI_SUCCESS) return false;
  if (api.cuptiActivityEnable(want) != CUPTI_SUCCESS) {
    api.cuptiActivityEnable(kernel_kind);
    return false;
  }
  kernel_kind = want;
  return true;
}

}  // namespace

pcs::StartError start_pcsampling(const pcs::Options& options) {
  std::lock_guard<std::mutex> g(state_mu);
  if (api.handle == nullptr || subscriber == nullptr) {
    pcs::StartError e;
    e.code = CUPTI_ERROR_NOT_INITIALIZED;
    e.what = "starting pcsampling";
    e.detail = "the cupti backend is not attached";
    return e;
  }
  pcs::Host host;
  host.subscriber = subscriber;
  host.use_serial_kernels = use_serial_kernels_locked;
  return pcs::start(options, host);
}

uint32_t cupti_version() {
  uint32_t v = 0;
  if (api.cuptiGetVersion == nullptr || api.cuptiGetVersion(&v) != CUPTI_SUCCESS) return 0;
  return v;
}

void* cupti_symbol(const char* name) { return api.handle ? dlsym(api.handle, name) : nullptr; }

std::string cupti_error_text(CUptiResult r) { return result_text(r); }

CUcontext current_context() {
  DriverApi& d = driver();
  CUcontext ctx = nullptr;
  if (d.cuCtxGetCurrent == nullptr || d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

std::vector<CUcontext> live_contexts() {
  std::vector<CUcontext> out;
  DriverApi& d = driver();
  CUcontext current = current_context();
  if (current != nullptr) out.push_back(current);
  int count = 0;
  if (!d.cuDeviceGetCount || !d.cuDevicePrimaryCtxGetState || !d.cuDevicePrimaryCtxRetain ||
      !d.cuDevicePrimaryCtxRelease || d.cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return out;
  for (int dev = 0; dev < count; ++dev) {
    unsigned flags = 0;
    int active = 0;
    if (d.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) continue;
    CUcontext primary = nullptr;
    if (d.cuDevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS) continue;
    if (std::find(out.begin(), out.end(), primary) == out.end()) out.push_back(primary);
    d.cuDevicePrimaryCtxRelease(dev);  // active: the program holds it
  }
  return out;
}

bool push_context(CUcontext ctx) {
  DriverApi& d = driver();
  return d.cuCtxPushCurrent != nullptr && d.cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
}

void pop_context() {
  DriverApi& d = driver();
  CUcontext popped = nullptr;
  if (d.cuCtxPopCurrent != nullptr) d.cuCtxPopCurrent(&popped);
}

int device_count() {
  DriverApi& d = driver();
  int count = 0;
  if (!d.cuInit || d.cuInit(0) != CUDA_SUCCESS || !d.cuDeviceGetCount || d.cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return 0;
  return count;
}

CUcontext retain_primary(int ordinal) {
  DriverApi& d = driver();
  CUdevice dev;
  CUcontext ctx = nullptr;
  if (!d.cuInit || d.cuInit(0) != CUDA_SUCCESS || !d.cuDeviceGet || d.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      !d.cuDevicePrimaryCtxRetain || d.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
    return nullptr;
  return ctx;
}

void release_primary(int ordinal) {
  DriverApi& d = driver();
  CUdevice dev;
  if (d.cuDeviceGet && d.cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS && d.cuDevicePrimaryCtxRelease)
    d.cuDevicePrimaryCtxRelease(dev);
}

std::string device_name(uint32_t ordinal) {
  DriverApi& d = driver();
  CUdevice dev;
  char name[256] = {0};
  if (!d.cuInit || d.cuInit(0) != CUDA_SUCCESS || !d.cuDeviceGet || d.cuDeviceGet(&dev, int(ordinal)) != CUDA_SUCCESS ||
      !d.cuDeviceGetName || d.cuDeviceGetName(name, sizeof(name) - 1, dev) != CUDA_SUCCESS)
    return "";
  return name;
}

std::map<std::string, std::string> device_info(uint32_t ordinal) {
  std::map<std::string, std::string> out;
  DriverApi& d = driver();
  if (!d.cuInit || !d.cuDeviceGet || !d.cuDeviceGetAttribute || d.cuInit(0) != CUDA_SUCCESS) return out;
  CUdevice dev;
  if (d.cuDeviceGet(&dev, int(ordinal)) != CUDA_SUCCESS) return out;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    return d.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
  };
  out["arch"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) +
                std::to_string(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  out["num_sms"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  out["clock_rate"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
  out["memory_clock_rate"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE));
  out["bus_width"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
  return out;
}

}  // namespace proton_cupti
