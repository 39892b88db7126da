// rocprofiler-sdk as a tool: configuration, callbacks and the kernel-dispatch buffer (see sdk.h).
// Everything the SDK hands over goes straight into the Recorder.
#include "sdk.h"

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "markers.h"
#include "recorder.h"
#include "rocprofiler_sdk_api.h"

namespace proton_roc {

namespace {

// The layout facts the backend relies on (rocprofiler-sdk 0.5.0).
static_assert(offsetof(rocprofiler_buffer_tracing_kernel_dispatch_record_t, correlation_id) == 16, "layout");
static_assert(offsetof(rocprofiler_buffer_tracing_kernel_dispatch_record_t, start_timestamp) == 40, "layout");
static_assert(offsetof(rocprofiler_buffer_tracing_kernel_dispatch_record_t, dispatch_info) == 56, "layout");
static_assert(offsetof(rocprofiler_kernel_dispatch_info_t, dispatch_id) == 32, "layout");
static_assert(offsetof(rocprofiler_callback_tracing_kernel_dispatch_data_t, dispatch_info) == 24, "layout");
static_assert(offsetof(rocprofiler_callback_tracing_hip_api_data_t, args) == 8, "layout");
static_assert(offsetof(proton_hip_api_args_t, hipLaunchKernel.stream) == 48, "layout");
static_assert(offsetof(proton_hip_api_args_t, hipModuleLaunchKernel.stream) == 40, "layout");
static_assert(offsetof(rocprofiler_agent_v0_t, cu_count) == 72, "layout");

#define SDK_FUNCS(X)                            \
  X(rocprofiler_force_configure)                \
  X(rocprofiler_get_timestamp)                  \
  X(rocprofiler_get_status_string)              \
  X(rocprofiler_create_context)                 \
  X(rocprofiler_start_context)                  \
  X(rocprofiler_create_buffer)                  \
  X(rocprofiler_flush_buffer)                   \
  X(rocprofiler_configure_buffer_tracing_service) \
  X(rocprofiler_configure_callback_tracing_service) \
  X(rocprofiler_query_available_agents)         \
  X(rocprofiler_iterate_callback_tracing_kind_operations) \
  X(rocprofiler_query_callback_tracing_kind_operation_name)

struct SdkApi {
  void* handle = nullptr;
  std::string path;
#define DECLARE(name) name##_fn name = nullptr;
  SDK_FUNCS(DECLARE)
#undef DECLARE
  rocprofiler_get_version_fn rocprofiler_get_version = nullptr;  // optional
};
SdkApi api;

std::mutex attach_mu;
std::atomic<bool> g_attached{false};
AttachResult g_init_error;  // what failed inside the tool's initialize
rocprofiler_context_id_t g_context{0};
rocprofiler_buffer_id_t g_buffer{0};
int64_t g_clock_offset = 0;  // SDK timestamp - CLOCK_MONOTONIC, measured at attach
std::vector<Agent> g_agents;  // written before the context starts, read-only afterwards

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kWatermark = kBufferBytes - (kBufferBytes >> 3);

std::string status_text(rocprofiler_status_t s) {
  const char* t = api.rocprofiler_get_status_string ? api.rocprofiler_get_status_string(s) : nullptr;
  return t ? t : "rocprofiler status " + std::to_string(int(s));
}

uint32_t physical_of(uint64_t agent_handle) {
  for (const Agent& a : g_agents)
    if (a.handle == agent_handle) return a.physical;
  return 0xFFFFu;  // an agent the table lacks: kept apart, never merged into GPU 0
}

// A dispatch's key: the SDK's dispatch id (unique per dispatch), else its correlation id.
inline uint64_t dispatch_key(const rocprofiler_kernel_dispatch_info_t& info, uint64_t correlation) {
  return info.dispatch_id != 0 ? info.dispatch_id : correlation;
}

// ------------------------------------------------------------ callbacks ----
void on_dispatch_callback(rocprofiler_callback_tracing_record_t record, rocprofiler_user_data_t*, void*) {
  if (record.kind != ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH ||
      record.operation != ROCPROFILER_KERNEL_DISPATCH_ENQUEUE || record.phase != ROCPROFILER_CALLBACK_PHASE_ENTER)
    return;
  auto* data = static_cast<const rocprofiler_callback_tracing_kernel_dispatch_data_t*>(record.payload);
  recorder().on_launch(data ? dispatch_key(data->dispatch_info, record.correlation_id.internal)
                            : record.correlation_id.internal);
}

// HIP runtime calls that capture, instantiate and launch graphs, and launch kernels (a capture's contents).
enum HipRole : uint8_t { kNone, kBeginCapture, kEndCapture, kInstantiate, kGraphLaunch, kLaunch, kModuleLaunch };
constexpr int kMaxHipOps = 4096;
HipRole hip_roles[kMaxHipOps];
std::vector<rocprofiler_tracing_operation_t> hip_ops;

HipRole role_of_name(const char* name) {
  static const struct {
    const char* name;
    HipRole role;
  } table[] = {{"hipStreamBeginCapture", kBeginCapture}, {"hipStreamBeginCapture_spt", kBeginCapture},
               {"hipStreamEndCapture", kEndCapture},     {"hipStreamEndCapture_spt", kEndCapture},
               {"hipGraphInstantiate", kInstantiate},    {"hipGraphInstantiateWithFlags", kInstantiate},
               {"hipGraphLaunch", kGraphLaunch},         {"hipGraphLaunch_spt", kGraphLaunch},
               {"hipLaunchKernel", kLaunch},             {"hipLaunchKernel_spt", kLaunch},
               {"hipExtLaunchKernel", kLaunch},          {"hipLaunchCooperativeKernel", kLaunch},
               {"hipLaunchCooperativeKernel_spt", kLaunch}, {"hipModuleLaunchKernel", kModuleLaunch}};
  for (const auto& e : table)
    if (std::strcmp(name, e.name) == 0) return e.role;
  return kNone;
}

int collect_hip_op(rocprofiler_callback_tracing_kind_t kind, rocprofiler_tracing_operation_t op, void*) {
  const char* name = nullptr;
  uint64_t len = 0;
  if (op < 0 || op >= kMaxHipOps ||
      api.rocprofiler_query_callback_tracing_kind_operation_name(kind, op, &name, &len) != ROCPROFILER_STATUS_SUCCESS ||
      name == nullptr)
    return 0;
  HipRole role = role_of_name(name);
  if (role != kNone) {
    hip_roles[op] = role;
    hip_ops.push_back(op);
  }
  return 0;
}

void on_hip_api(rocprofiler_callback_tracing_record_t record, rocprofiler_user_data_t*, void*) {
  if (record.kind != ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API || record.operation < 0 ||
      record.operation >= kMaxHipOps || record.payload == nullptr)
    return;
  const proton_hip_api_args_t& a = static_cast<const rocprofiler_callback_tracing_hip_api_data_t*>(record.payload)->args;
  bool enter = record.phase == ROCPROFILER_CALLBACK_PHASE_ENTER;
  Recorder& rec = recorder();
  switch (hip_roles[record.operation]) {
    case kLaunch:
      if (enter) rec.on_capture_launch(reinterpret_cast<uint64_t>(a.hipLaunchKernel.stream));
      break;
    case kModuleLaunch:
      if (enter) rec.on_capture_launch(reinterpret_cast<uint64_t>(a.hipModuleLaunchKernel.stream));
      break;
    case kBeginCapture:
      if (enter) rec.on_capture_begin(reinterpret_cast<uint64_t>(a.hipStreamBeginCapture.stream));
      break;
    case kEndCapture:
      if (!enter)
        rec.on_capture_end(reinterpret_cast<uint64_t>(a.hipStreamEndCapture.stream),
                           a.hipStreamEndCapture.pGraph ? reinterpret_cast<uint64_t>(*a.hipStreamEndCapture.pGraph) : 0);
      break;
    case kInstantiate:
      if (!enter && a.hipGraphInstantiate.pGraphExec != nullptr)
        rec.on_instantiate(reinterpret_cast<uint64_t>(a.hipGraphInstantiate.graph),
                           reinterpret_cast<uint64_t>(*a.hipGraphInstantiate.pGraphExec));
      break;
    case kGraphLaunch:
      rec.on_graph_launch(reinterpret_cast<uint64_t>(a.hipGraphLaunch.graphExec), enter);
      break;
    default:
      break;
  }
}

void on_code_object(rocprofiler_callback_tracing_record_t record, rocprofiler_user_data_t*, void*) {
  if (record.kind != ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT ||
      record.operation != ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER ||
      record.phase != ROCPROFILER_CALLBACK_PHASE_LOAD || record.payload == nullptr)
    return;
  auto* sym = static_cast<const rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t*>(record.payload);
  recorder().on_kernel_symbol(sym->kernel_id, sym->kernel_name);
}

void on_marker(rocprofiler_callback_tracing_record_t record, rocprofiler_user_data_t*, void*) {
  if (record.kind != ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API || record.phase != ROCPROFILER_CALLBACK_PHASE_ENTER)
    return;
  if (record.operation == ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA) {
    auto* data = static_cast<const rocprofiler_callback_tracing_marker_api_data_t*>(record.payload);
    marker_push(data ? data->args.message_args.message : nullptr);
  } else if (record.operation == ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop) {
    marker_pop();
  }
}

void on_buffer(rocprofiler_context_id_t, rocprofiler_buffer_id_t, rocprofiler_record_header_t** headers, size_t n, void*,
               uint64_t drop_count) {
  Recorder& rec = recorder();
  if (drop_count) rec.add_dropped(drop_count);
  for (size_t i = 0; i < n; ++i) {
    const rocprofiler_record_header_t* h = headers[i];
    if (h == nullptr || h->category != ROCPROFILER_BUFFER_CATEGORY_TRACING ||
        h->kind != ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH || h->payload == nullptr)
      continue;
    auto* r = static_cast<const rocprofiler_buffer_tracing_kernel_dispatch_record_t*>(h->payload);
    uint64_t start = uint64_t(int64_t(r->start_timestamp) - g_clock_offset);
    uint64_t end = uint64_t(int64_t(r->end_timestamp) - g_clock_offset);
    rec.on_dispatch(dispatch_key(r->dispatch_info, r->correlation_id.internal), r->dispatch_info.kernel_id, physical_of(r->dispatch_info.agent_id.handle),
                    r->dispatch_info.queue_id.handle, start, end);
  }
}

rocprofiler_status_t collect_agents(rocprofiler_agent_version_t, const void** agents, size_t n, void*) {
  for (size_t i = 0; i < n; ++i) {
    auto* a = static_cast<const rocprofiler_agent_v0_t*>(agents[i]);
    if (a == nullptr || a->type != ROCPROFILER_AGENT_TYPE_GPU) continue;
    Agent out{};
    out.handle = a->id.handle;
    out.physical = uint32_t(a->logical_node_type_id);
    out.node_id = a->node_id;
    out.name = a->name ? a->name : "";
    out.product = a->product_name ? a->product_name : "";
    out.cu_count = a->cu_count;
    out.clock_mhz = a->max_engine_clk_fcompute;
    if (a->mem_banks != nullptr && a->mem_banks_count > 0) {
      out.memory_clock_mhz = a->mem_banks[0].mem_clk_max;
      out.bus_width = a->mem_banks[0].width;
    }
    g_agents.push_back(out);
  }
  return ROCPROFILER_STATUS_SUCCESS;
}

// ---------------------------------------------------------- the tool ----
#define TRY(call, what)                                 \
  do {                                                  \
    rocprofiler_status_t s_ = (call);                   \
    if (s_ != ROCPROFILER_STATUS_SUCCESS) {             \
      g_init_error.status = int(s_);                    \
      g_init_error.detail = std::string(what) + ": " + status_text(s_); \
      return -1;                                        \
    }                                                   \
  } while (0)

int tool_initialize(rocprofiler_client_finalize_t, void*) {
  TRY(api.rocprofiler_query_available_agents(ROCPROFILER_AGENT_INFO_VERSION_0, collect_agents,
                                             sizeof(rocprofiler_agent_v0_t), nullptr),
      "rocprofiler_query_available_agents");
  TRY(api.rocprofiler_create_context(&g_context), "rocprofiler_create_context");
  TRY(api.rocprofiler_create_buffer(g_context, kBufferBytes, kWatermark, ROCPROFILER_BUFFER_POLICY_LOSSLESS, on_buffer,
                                    nullptr, &g_buffer),
      "rocprofiler_create_buffer");
  TRY(api.rocprofiler_configure_buffer_tracing_service(g_context, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, nullptr, 0,
                                                       g_buffer),
      "kernel dispatch buffer tracing");
  rocprofiler_tracing_operation_t enqueue[] = {ROCPROFILER_KERNEL_DISPATCH_ENQUEUE};
  TRY(api.rocprofiler_configure_callback_tracing_service(g_context, ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH,
                                                         enqueue, 1, on_dispatch_callback, nullptr),
      "kernel dispatch callback tracing");
  rocprofiler_tracing_operation_t symbols[] = {ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER};
  TRY(api.rocprofiler_configure_callback_tracing_service(g_context, ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT, symbols, 1,
                                                         on_code_object, nullptr),
      "code object callback tracing");
  // HIP graphs: optional too (without them graph kernels are filed under the graph launch's path).
  api.rocprofiler_iterate_callback_tracing_kind_operations(ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API, collect_hip_op,
                                                           nullptr);
  if (!hip_ops.empty())
    api.rocprofiler_configure_callback_tracing_service(g_context, ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API,
                                                       hip_ops.data(), hip_ops.size(), on_hip_api, nullptr);
  rocprofiler_tracing_operation_t ranges[] = {ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA,
                                              ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop};
  // roctx is optional: a build of the SDK without marker tracing still profiles kernels.
  api.rocprofiler_configure_callback_tracing_service(g_context, ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API, ranges, 2,
                                                     on_marker, nullptr);
  rocprofiler_timestamp_t ts = 0;
  uint64_t before = monotonic_ns();
  api.rocprofiler_get_timestamp(&ts);
  uint64_t after = monotonic_ns();
  g_clock_offset = int64_t(ts) - int64_t(before + (after - before) / 2);
  // Started once and never stopped: the SDK does not reliably resume a stopped context, so sessions
  // come and go through the recorder's epoch instead.
  TRY(api.rocprofiler_start_context(g_context), "rocprofiler_start_context");
  g_attached.store(true, std::memory_order_release);
  return 0;
}

void tool_finalize(void*) {}

rocprofiler_tool_configure_result_t g_configure_result{sizeof(rocprofiler_tool_configure_result_t), tool_initialize,
                                                       tool_finalize, nullptr};

rocprofiler_tool_configure_result_t* configure_tool(uint32_t, const char*, uint32_t, rocprofiler_client_id_t* client) {
  if (client != nullptr) client->name = "proton";
  return &g_configure_result;
}

// -------------------------------------------------------------- HIP ----
void sync_hip(const std::vector<int>& devices) {
  void* h = nullptr;
  for (const char* name : {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"})
    if ((h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) != nullptr) break;
  if (h == nullptr) return;  // the program never loaded HIP: nothing of it runs
  auto get = reinterpret_cast<int (*)(int*)>(dlsym(h, "hipGetDevice"));
  auto set = reinterpret_cast<int (*)(int)>(dlsym(h, "hipSetDevice"));
  auto sync = reinterpret_cast<int (*)()>(dlsym(h, "hipDeviceSynchronize"));
  int current = 0;
  if (get && set && sync && get(&current) == 0) {
    sync();  // the calling thread's device, then the others that ran kernels
    for (int d : devices)
      if (d != current && set(d) == 0) sync();
    set(current);
  }
  dlclose(h);
}

}  // namespace

std::string load_sdk(const std::string& path) {
  if (api.handle != nullptr) return "";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return e ? e : "dlopen failed";
  }
  SdkApi loaded;
  loaded.handle = h;
  loaded.path = path;
#define RESOLVE(name)                                                     \
  loaded.name = reinterpret_cast<name##_fn>(dlsym(h, #name));             \
  if (loaded.name == nullptr) {                                           \
    dlclose(h);                                                           \
    return "symbol " #name " missing (not a rocprofiler-sdk library)";    \
  }
  SDK_FUNCS(RESOLVE)
#undef RESOLVE
  loaded.rocprofiler_get_version = reinterpret_cast<rocprofiler_get_version_fn>(dlsym(h, "rocprofiler_get_version"));
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(loaded.rocprofiler_force_configure), &info) && info.dli_fname)
    loaded.path = info.dli_fname;
  api = loaded;
  return "";
}

std::string sdk_path() { return api.path; }

std::string sdk_version() {
  uint32_t major = 0, minor = 0, patch = 0;
  if (api.rocprofiler_get_version == nullptr ||
      api.rocprofiler_get_version(&major, &minor, &patch) != ROCPROFILER_STATUS_SUCCESS)
    return "";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

AttachResult attach() {
  std::lock_guard<std::mutex> g(attach_mu);
  if (g_attached.load(std::memory_order_acquire)) return {};
  if (api.handle == nullptr) return {int(ROCPROFILER_STATUS_ERROR), "librocprofiler-sdk is not loaded"};
  if (g_init_error.status != 0) return g_init_error;  // the SDK takes one configuration per process
  g_init_error = {};
  rocprofiler_status_t s = api.rocprofiler_force_configure(configure_tool);
  if (s != ROCPROFILER_STATUS_SUCCESS) {
    g_init_error = {int(s), "rocprofiler_force_configure: " + status_text(s)};
    return g_init_error;
  }
  if (g_init_error.status != 0) return g_init_error;
  if (!g_attached.load(std::memory_order_acquire)) {
    // Configured, but the SDK never called initialize: it had been initialized already.
    g_init_error = {int(ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED),
                    "rocprofiler_force_configure returned without initializing the tool"};
    return g_init_error;
  }
  return {};
}

bool attached() { return g_attached.load(std::memory_order_acquire); }

void flush_records(const std::vector<int>& sync_devices, bool sync) {
  if (!g_attached.load(std::memory_order_acquire)) return;
  if (sync) sync_hip(sync_devices);
  api.rocprofiler_flush_buffer(g_buffer);
}

std::vector<Agent> gpu_agents() {
  if (!g_attached.load(std::memory_order_acquire)) return {};
  return g_agents;
}

}  // namespace proton_roc
