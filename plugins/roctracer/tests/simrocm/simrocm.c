/* A simulated ROCm for the AMD backend's tests: librocprofiler-sdk's C API subset that Proton uses
 * (csrc/rocprofiler_sdk_api.h), plus simrocm_* functions the tests call (through ctypes) to play a
 * script: kernel symbols registered, dispatches from several threads, GPUs and queues, roctx
 * ranges, and the buffer delivered out of order with records dropped.
 *
 * What it keeps of the real SDK's contract: tools configure through rocprofiler_force_configure,
 * which fails with CONFIGURATION_LOCKED once the runtime made its first queue (simrocm_runtime_init)
 * or a tool was configured; contexts and services are made only inside the tool's initialize;
 * the kernel-dispatch callback's ENTER phase runs on the launching thread before the record exists;
 * buffers are delivered on another thread, with the count of dropped records; timestamps are in the
 * SDK's own clock (here CLOCK_MONOTONIC plus a fixed offset, so a backend that forgets to convert
 * is caught).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../csrc/rocprofiler_sdk_api.h"

#define API __attribute__((visibility("default")))
#define MAX_AGENTS 17
#define MAX_KERNELS 4096
#define MAX_CONTEXTS 8

/* The SDK's clock is ahead of CLOCK_MONOTONIC by this much. */
#define CLOCK_OFFSET_NS 500000000000ull

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int runtime_initialized, configured, in_initialize;
static rocprofiler_tool_configure_result_t* tool;

static int n_gpus = 4;
static rocprofiler_agent_v0_t agents[MAX_AGENTS];
static rocprofiler_agent_mem_bank_t banks[MAX_AGENTS];
static int n_agents;

static struct {
  uint64_t id;
  char* name;
} kernels[MAX_KERNELS];
static int n_kernels;

static int n_contexts, started[MAX_CONTEXTS];

static struct {
  int on;
  rocprofiler_context_id_t ctx;
  rocprofiler_callback_tracing_cb_t cb;
  void* args;
} code_object_svc, dispatch_svc, marker_svc, hip_svc;

static struct {
  int on;
  rocprofiler_context_id_t ctx;
  rocprofiler_buffer_tracing_cb_t cb;
  void* data;
} buffer;
static int dispatch_buffer_on;

static rocprofiler_buffer_tracing_kernel_dispatch_record_t* pending;
static size_t n_pending, cap_pending;
static uint64_t next_corr = 1000, next_dispatch = 1;
static uint64_t seed, drop_every, batch = 64;
static uint64_t stat_dispatched, stat_delivered, stat_dropped;

/* The calling thread's id, asked of the kernel once per thread (a syscall per callback would be the
 * simulator's cost, not the tool's). */
static uint64_t thread_id(void) {
  static __thread uint64_t tid;
  if (tid == 0) tid = (uint64_t)syscall(SYS_gettid);
  return tid;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + CLOCK_OFFSET_NS;
}

static void make_agents(void) {
  if (n_agents) return;
  memset(agents, 0, sizeof(agents));
  agents[0].size = sizeof(rocprofiler_agent_v0_t);
  agents[0].id.handle = 0x1000;
  agents[0].type = ROCPROFILER_AGENT_TYPE_CPU;
  agents[0].name = "AMD EPYC (simulated)";
  agents[0].node_id = 0;
  agents[0].logical_node_id = 0;
  agents[0].logical_node_type_id = 0;
  for (int i = 0; i < n_gpus && i + 1 < MAX_AGENTS; ++i) {
    rocprofiler_agent_v0_t* a = &agents[i + 1];
    a->size = sizeof(rocprofiler_agent_v0_t);
    a->id.handle = 0x2000 + (uint64_t)i * 0x10;
    a->type = ROCPROFILER_AGENT_TYPE_GPU;
    a->cu_count = 304;
    a->max_engine_clk_fcompute = 2100;
    banks[i].width = 8192;
    banks[i].mem_clk_max = 1300;
    a->mem_banks = &banks[i];
    a->mem_banks_count = 1;
    a->name = "gfx942";
    a->product_name = "AMD Instinct MI300X (simulated)";
    a->node_id = (uint32_t)i + 1;
    a->logical_node_id = i + 1;
    a->logical_node_type_id = i;
  }
  n_agents = n_gpus + 1;
}

/* ------------------------------------------------------- the SDK's API ---- */
API rocprofiler_status_t rocprofiler_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch) {
  *major = 0, *minor = 5, *patch = 0;
  return ROCPROFILER_STATUS_SUCCESS;
}

API const char* rocprofiler_get_status_string(rocprofiler_status_t status) {
  switch (status) {
    case ROCPROFILER_STATUS_SUCCESS: return "ROCPROFILER_STATUS_SUCCESS";
    case ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED: return "ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED";
    case ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND: return "ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND";
    case ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND: return "ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND";
    default: return "ROCPROFILER_STATUS_ERROR";
  }
}

API rocprofiler_status_t rocprofiler_get_timestamp(rocprofiler_timestamp_t* ts) {
  *ts = now_ns();
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_is_initialized(int* status) {
  *status = runtime_initialized || configured;
  return ROCPROFILER_STATUS_SUCCESS;
}

static void finalize_client(rocprofiler_client_id_t id) { (void)id; }

API rocprofiler_status_t rocprofiler_force_configure(rocprofiler_configure_func_t configure_func) {
  pthread_mutex_lock(&mu);
  if (runtime_initialized || configured) {
    pthread_mutex_unlock(&mu);
    return ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED;
  }
  configured = 1;
  pthread_mutex_unlock(&mu);
  make_agents();
  rocprofiler_client_id_t client = {"", 1};
  tool = configure_func(500, "0.5.0 (simrocm)", 0, &client);
  if (tool != NULL && tool->initialize != NULL) {
    in_initialize = 1;
    int rc = tool->initialize(finalize_client, tool->tool_data);
    in_initialize = 0;
    if (rc != 0) tool = NULL;
  }
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_create_context(rocprofiler_context_id_t* context_id) {
  if (!in_initialize) return ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED;
  if (n_contexts >= MAX_CONTEXTS) return ROCPROFILER_STATUS_ERROR;
  context_id->handle = (uint64_t)n_contexts++;
  return ROCPROFILER_STATUS_SUCCESS;
}

static void replay_kernels_locked(void);

API rocprofiler_status_t rocprofiler_start_context(rocprofiler_context_id_t context_id) {
  if (context_id.handle >= (uint64_t)n_contexts) return ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND;
  pthread_mutex_lock(&mu);
  started[context_id.handle] = 1;
  replay_kernels_locked();  /* code objects loaded before the context started are reported at start */
  pthread_mutex_unlock(&mu);
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_stop_context(rocprofiler_context_id_t context_id) {
  if (context_id.handle >= (uint64_t)n_contexts) return ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND;
  started[context_id.handle] = 0;
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_create_buffer(rocprofiler_context_id_t context, size_t size, size_t watermark,
                                                   rocprofiler_buffer_policy_t policy,
                                                   rocprofiler_buffer_tracing_cb_t callback, void* callback_data,
                                                   rocprofiler_buffer_id_t* buffer_id) {
  (void)size, (void)watermark, (void)policy;
  if (!in_initialize) return ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED;
  if (context.handle >= (uint64_t)n_contexts) return ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND;
  buffer.on = 1;
  buffer.ctx = context;
  buffer.cb = callback;
  buffer.data = callback_data;
  buffer_id->handle = 77;
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_configure_buffer_tracing_service(rocprofiler_context_id_t context_id,
                                                                      rocprofiler_buffer_tracing_kind_t kind,
                                                                      const rocprofiler_tracing_operation_t* ops,
                                                                      size_t n_ops, rocprofiler_buffer_id_t buffer_id) {
  (void)ops, (void)n_ops;
  if (!in_initialize) return ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED;
  if (context_id.handle >= (uint64_t)n_contexts) return ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND;
  if (buffer_id.handle != 77 || !buffer.on) return ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND;
  if (kind != ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH) return ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND;
  dispatch_buffer_on = 1;
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_configure_callback_tracing_service(rocprofiler_context_id_t context_id,
                                                                        rocprofiler_callback_tracing_kind_t kind,
                                                                        const rocprofiler_tracing_operation_t* ops,
                                                                        size_t n_ops,
                                                                        rocprofiler_callback_tracing_cb_t callback,
                                                                        void* callback_args) {
  (void)ops, (void)n_ops;
  if (!in_initialize) return ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED;
  if (context_id.handle >= (uint64_t)n_contexts) return ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND;
  if (kind == ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT) {
    code_object_svc.on = 1, code_object_svc.ctx = context_id, code_object_svc.cb = callback, code_object_svc.args = callback_args;
  } else if (kind == ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH) {
    dispatch_svc.on = 1, dispatch_svc.ctx = context_id, dispatch_svc.cb = callback, dispatch_svc.args = callback_args;
  } else if (kind == ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API) {
    hip_svc.on = 1, hip_svc.ctx = context_id, hip_svc.cb = callback, hip_svc.args = callback_args;
  } else if (kind == ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API) {
    marker_svc.on = 1, marker_svc.ctx = context_id, marker_svc.cb = callback, marker_svc.args = callback_args;
  } else {
    return ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND;
  }
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_query_available_agents(rocprofiler_agent_version_t version,
                                                            rocprofiler_query_available_agents_cb_t callback,
                                                            size_t agent_size, void* user_data) {
  if (version != ROCPROFILER_AGENT_INFO_VERSION_0 || agent_size != sizeof(rocprofiler_agent_v0_t))
    return ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI;
  make_agents();
  const void* ptrs[MAX_AGENTS];
  for (int i = 0; i < n_agents; ++i) ptrs[i] = &agents[i];
  return callback(version, ptrs, (size_t)n_agents, user_data);
}

/* HIP runtime API operations, numbered as this simulated HIP release does (a real one numbers them
 * otherwise: tools look them up by name). */
static const struct {
  int op;
  const char* name;
} hip_ops[] = {{300, "hipMalloc"},         {301, "hipLaunchKernel"},     {302, "hipModuleLaunchKernel"},
               {303, "hipStreamBeginCapture"}, {304, "hipStreamEndCapture"}, {305, "hipGraphInstantiate"},
               {306, "hipGraphLaunch"}};
enum { OP_LAUNCH = 301, OP_MODULE_LAUNCH = 302, OP_BEGIN = 303, OP_END = 304, OP_INSTANTIATE = 305, OP_GRAPH_LAUNCH = 306 };

API rocprofiler_status_t rocprofiler_iterate_callback_tracing_kind_operations(
    rocprofiler_callback_tracing_kind_t kind, rocprofiler_callback_tracing_kind_operation_cb_t callback, void* data) {
  if (kind != ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API) return ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND;
  for (size_t i = 0; i < sizeof(hip_ops) / sizeof(hip_ops[0]); ++i)
    if (callback(kind, hip_ops[i].op, data) != 0) break;
  return ROCPROFILER_STATUS_SUCCESS;
}

API rocprofiler_status_t rocprofiler_query_callback_tracing_kind_operation_name(rocprofiler_callback_tracing_kind_t kind,
                                                                                 rocprofiler_tracing_operation_t op,
                                                                                 const char** name, uint64_t* len) {
  if (kind != ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API) return ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND;
  for (size_t i = 0; i < sizeof(hip_ops) / sizeof(hip_ops[0]); ++i)
    if (hip_ops[i].op == op) {
      *name = hip_ops[i].name;
      if (len) *len = strlen(hip_ops[i].name);
      return ROCPROFILER_STATUS_SUCCESS;
    }
  return ROCPROFILER_STATUS_ERROR;
}

struct delivery {
  rocprofiler_buffer_tracing_kernel_dispatch_record_t* records;
  size_t n;
  uint64_t dropped;
};

static void* deliver_thread(void* arg) {
  struct delivery* d = (struct delivery*)arg;
  size_t step = batch ? batch : 64, done = 0;
  rocprofiler_record_header_t* headers = calloc(step, sizeof(rocprofiler_record_header_t));
  rocprofiler_record_header_t** ptrs = calloc(step, sizeof(rocprofiler_record_header_t*));
  uint64_t dropped = d->dropped;
  while (done < d->n || dropped) {
    size_t k = 0;
    for (; k < step && done < d->n; ++k, ++done) {
      headers[k].category = ROCPROFILER_BUFFER_CATEGORY_TRACING;
      headers[k].kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH;
      headers[k].payload = &d->records[done];
      ptrs[k] = &headers[k];
    }
    rocprofiler_buffer_id_t id = {77};
    buffer.cb(buffer.ctx, id, ptrs, k, buffer.data, dropped);
    dropped = 0;
  }
  free(headers);
  free(ptrs);
  return NULL;
}

API rocprofiler_status_t rocprofiler_flush_buffer(rocprofiler_buffer_id_t buffer_id) {
  if (buffer_id.handle != 77 || !buffer.on) return ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND;
  pthread_mutex_lock(&mu);
  struct delivery d = {pending, n_pending, 0};
  pending = NULL, n_pending = cap_pending = 0;
  /* Out of order: a seeded shuffle (a real GPU completes dispatches of one queue out of order too). */
  if (seed != 0) {
    uint64_t s = seed;
    for (size_t i = d.n; i > 1; --i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      size_t j = (size_t)((s >> 33) % i);
      rocprofiler_buffer_tracing_kernel_dispatch_record_t t = d.records[i - 1];
      d.records[i - 1] = d.records[j];
      d.records[j] = t;
    }
  }
  if (drop_every != 0) {  /* the SDK's buffer overflowed: every drop_every-th record is lost and counted */
    size_t kept = 0;
    for (size_t i = 0; i < d.n; ++i) {
      if ((i + 1) % drop_every == 0) {
        d.dropped++;
        continue;
      }
      d.records[kept++] = d.records[i];
    }
    d.n = kept;
  }
  stat_delivered += d.n;
  stat_dropped += d.dropped;
  pthread_mutex_unlock(&mu);
  if (d.n || d.dropped) {
    pthread_t t;
    pthread_create(&t, NULL, deliver_thread, &d);
    pthread_join(t, NULL);
  }
  free(d.records);
  return ROCPROFILER_STATUS_SUCCESS;
}

/* --------------------------------------------------------- the script ---- */
static void replay_kernels_locked(void) {
  if (!code_object_svc.on || !started[code_object_svc.ctx.handle]) return;
  for (int i = 0; i < n_kernels; ++i) {
    rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t data;
    memset(&data, 0, sizeof(data));
    data.size = sizeof(data);
    data.kernel_id = kernels[i].id;
    data.kernel_name = kernels[i].name;
    rocprofiler_callback_tracing_record_t r;
    memset(&r, 0, sizeof(r));
    r.context_id = code_object_svc.ctx;
    r.kind = ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT;
    r.operation = ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER;
    r.phase = ROCPROFILER_CALLBACK_PHASE_LOAD;
    r.payload = &data;
    rocprofiler_user_data_t user = {0};
    code_object_svc.cb(r, &user, code_object_svc.args);
  }
}

/* Agents the runtime will report: call before anything configures. */
API void simrocm_set_gpus(int n) {
  n_gpus = n < 1 ? 1 : (n > MAX_AGENTS - 1 ? MAX_AGENTS - 1 : n);
  n_agents = 0;
  make_agents();
}

/* The runtime made its first HSA queue: from now on a tool can no longer be configured. */
API void simrocm_runtime_init(void) { runtime_initialized = 1; }

/* Whether a tool configured and initialized successfully. */
API int simrocm_tool_attached(void) { return tool != NULL; }

/* A code object with this kernel symbol was loaded. */
API void simrocm_register_kernel(uint64_t kernel_id, const char* name) {
  pthread_mutex_lock(&mu);
  if (n_kernels < MAX_KERNELS) {
    kernels[n_kernels].id = kernel_id;
    kernels[n_kernels].name = strdup(name);
    n_kernels++;
    if (code_object_svc.on && started[code_object_svc.ctx.handle]) {
      int saved = n_kernels;  /* report just this one */
      rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t data;
      memset(&data, 0, sizeof(data));
      data.size = sizeof(data);
      data.kernel_id = kernel_id;
      data.kernel_name = kernels[saved - 1].name;
      rocprofiler_callback_tracing_record_t r;
      memset(&r, 0, sizeof(r));
      r.context_id = code_object_svc.ctx;
      r.kind = ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT;
      r.operation = ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER;
      r.phase = ROCPROFILER_CALLBACK_PHASE_LOAD;
      r.payload = &data;
      rocprofiler_user_data_t user = {0};
      code_object_svc.cb(r, &user, code_object_svc.args);
    }
  }
  pthread_mutex_unlock(&mu);
}

/* Delivery script: shuffle seed (0: in dispatch order), drop every n-th record (0: none), records per callback. */
API void simrocm_script(uint64_t shuffle_seed, uint64_t drop_every_n, uint64_t records_per_callback) {
  seed = shuffle_seed;
  drop_every = drop_every_n;
  batch = records_per_callback ? records_per_callback : 64;
}

/* One kernel dispatch from the calling thread on GPU `gpu` (its logical_node_type_id), queue `queue`:
 * it starts `delay_ns` after now and runs `duration_ns`.  Returns its correlation id, 0 if no tool
 * traces dispatches. */
static uint64_t dispatch_with(uint64_t corr, uint64_t kernel_id, int gpu, uint64_t queue, uint64_t delay_ns,
                              uint64_t duration_ns);

API uint64_t simrocm_dispatch(uint64_t kernel_id, int gpu, uint64_t queue, uint64_t delay_ns, uint64_t duration_ns) {
  make_agents();
  if (gpu < 0 || gpu >= n_gpus) return 0;
  pthread_mutex_lock(&mu);
  uint64_t corr = next_corr++;
  pthread_mutex_unlock(&mu);
  return dispatch_with(corr, kernel_id, gpu, queue, delay_ns, duration_ns);
}

static uint64_t dispatch_with(uint64_t corr, uint64_t kernel_id, int gpu, uint64_t queue, uint64_t delay_ns,
                              uint64_t duration_ns) {
  pthread_mutex_lock(&mu);
  uint64_t dispatch_id = next_dispatch++;
  pthread_mutex_unlock(&mu);
  __atomic_add_fetch(&stat_dispatched, 1, __ATOMIC_RELAXED);
  rocprofiler_kernel_dispatch_info_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  info.agent_id = agents[gpu + 1].id;
  info.queue_id.handle = queue;
  info.kernel_id = kernel_id;
  info.dispatch_id = dispatch_id;
  uint64_t tid = thread_id();
  if (dispatch_svc.on && started[dispatch_svc.ctx.handle]) {
    rocprofiler_callback_tracing_kernel_dispatch_data_t data;
    memset(&data, 0, sizeof(data));
    data.size = sizeof(data);
    data.dispatch_info = info;
    rocprofiler_callback_tracing_record_t r;
    memset(&r, 0, sizeof(r));
    r.context_id = dispatch_svc.ctx;
    r.thread_id = tid;
    r.correlation_id.internal = corr;
    r.kind = ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH;
    r.operation = ROCPROFILER_KERNEL_DISPATCH_ENQUEUE;
    r.payload = &data;
    rocprofiler_user_data_t user = {0};
    r.phase = ROCPROFILER_CALLBACK_PHASE_ENTER;
    dispatch_svc.cb(r, &user, dispatch_svc.args);
    r.phase = ROCPROFILER_CALLBACK_PHASE_EXIT;
    dispatch_svc.cb(r, &user, dispatch_svc.args);
  }
  if (!(dispatch_buffer_on && started[buffer.ctx.handle])) return 0;
  rocprofiler_buffer_tracing_kernel_dispatch_record_t rec;
  memset(&rec, 0, sizeof(rec));
  rec.size = sizeof(rec);
  rec.kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH;
  rec.operation = ROCPROFILER_KERNEL_DISPATCH_COMPLETE;
  rec.correlation_id.internal = corr;
  rec.thread_id = tid;
  rec.start_timestamp = now_ns() + delay_ns;
  rec.end_timestamp = rec.start_timestamp + duration_ns;
  rec.dispatch_info = info;
  pthread_mutex_lock(&mu);
  if (n_pending == cap_pending) {
    cap_pending = cap_pending ? cap_pending * 2 : 1024;
    pending = realloc(pending, cap_pending * sizeof(*pending));
  }
  pending[n_pending++] = rec;
  pthread_mutex_unlock(&mu);
  return corr;
}

static void marker_call(int op, const char* message) {
  if (!(marker_svc.on && started[marker_svc.ctx.handle])) return;
  rocprofiler_callback_tracing_marker_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  data.args.message_args.message = message;
  rocprofiler_callback_tracing_record_t r;
  memset(&r, 0, sizeof(r));
  r.context_id = marker_svc.ctx;
  r.thread_id = thread_id();
  r.kind = ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API;
  r.operation = op;
  r.payload = &data;
  rocprofiler_user_data_t user = {0};
  r.phase = ROCPROFILER_CALLBACK_PHASE_ENTER;
  marker_svc.cb(r, &user, marker_svc.args);
  r.phase = ROCPROFILER_CALLBACK_PHASE_EXIT;
  marker_svc.cb(r, &user, marker_svc.args);
}

/* roctxRangePushA / roctxRangePop on the calling thread. */
API void simrocm_range_push(const char* message) { marker_call(ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA, message); }
API void simrocm_range_pop(void) { marker_call(ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop, NULL); }

/* (dispatched, delivered, dropped) so far. */
API void simrocm_stats(uint64_t* dispatched, uint64_t* delivered, uint64_t* dropped) {
  *dispatched = stat_dispatched;
  *delivered = stat_delivered;
  *dropped = stat_dropped;
}



/* A do-nothing tool with the services Proton configures (the benchmark's baseline: what the
 * simulator itself costs per dispatch once a tool traces dispatches). */
static void null_callback(rocprofiler_callback_tracing_record_t r, rocprofiler_user_data_t* u, void* a) {
  (void)r, (void)u, (void)a;
}
static void null_buffer(rocprofiler_context_id_t c, rocprofiler_buffer_id_t b, rocprofiler_record_header_t** h,
                        size_t n, void* d, uint64_t drops) {
  (void)c, (void)b, (void)h, (void)n, (void)d, (void)drops;
}
static int null_initialize(rocprofiler_client_finalize_t f, void* d) {
  (void)f, (void)d;
  rocprofiler_context_id_t ctx;
  rocprofiler_buffer_id_t buf;
  rocprofiler_create_context(&ctx);
  rocprofiler_create_buffer(ctx, 8u << 20, 7u << 20, ROCPROFILER_BUFFER_POLICY_LOSSLESS, null_buffer, NULL, &buf);
  rocprofiler_configure_buffer_tracing_service(ctx, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, NULL, 0, buf);
  rocprofiler_configure_callback_tracing_service(ctx, ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH, NULL, 0,
                                                 null_callback, NULL);
  rocprofiler_start_context(ctx);
  return 0;
}
static rocprofiler_tool_configure_result_t null_result = {sizeof(rocprofiler_tool_configure_result_t),
                                                          null_initialize, NULL, NULL};
static rocprofiler_tool_configure_result_t* null_configure(uint32_t v, const char* s, uint32_t p,
                                                           rocprofiler_client_id_t* c) {
  (void)v, (void)s, (void)p, (void)c;
  return &null_result;
}
API int simrocm_null_tool(void) { return (int)rocprofiler_force_configure(null_configure); }

/* ---- HIP graphs: stream capture, instantiation and graph launches ---- */
#define MAX_GRAPH_KERNELS 256
#define MAX_GRAPHS 64
static struct {
  uint64_t stream;
  int capturing;
  uint64_t kernels[MAX_GRAPH_KERNELS];
  int n;
} graphs[MAX_GRAPHS];
static int n_graphs;

static void hip_call(int op, rocprofiler_callback_tracing_hip_api_data_t* data, int phase, uint64_t corr) {
  if (!(hip_svc.on && started[hip_svc.ctx.handle])) return;
  rocprofiler_callback_tracing_record_t r;
  memset(&r, 0, sizeof(r));
  r.context_id = hip_svc.ctx;
  r.thread_id = thread_id();
  r.correlation_id.internal = corr;
  r.kind = ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API;
  r.operation = op;
  r.phase = phase;
  r.payload = data;
  rocprofiler_user_data_t user = {0};
  hip_svc.cb(r, &user, hip_svc.args);
}

/* hipStreamBeginCapture(stream); returns the graph being built (its handle once ended). */
API uint64_t simrocm_capture_begin(uint64_t stream) {
  pthread_mutex_lock(&mu);
  int g = n_graphs < MAX_GRAPHS ? n_graphs++ : MAX_GRAPHS - 1;
  graphs[g].stream = stream, graphs[g].capturing = 1, graphs[g].n = 0;
  pthread_mutex_unlock(&mu);
  rocprofiler_callback_tracing_hip_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  data.args.hipStreamBeginCapture.stream = (void*)stream;
  hip_call(OP_BEGIN, &data, ROCPROFILER_CALLBACK_PHASE_ENTER, 0);
  hip_call(OP_BEGIN, &data, ROCPROFILER_CALLBACK_PHASE_EXIT, 0);
  return 0x6000 + (uint64_t)g;
}

/* A kernel launched on `stream` from the calling thread: captured (no dispatch) if the stream is
 * capturing, else dispatched.  `module`: through hipModuleLaunchKernel (Triton) rather than hipLaunchKernel. */
API uint64_t simrocm_launch(uint64_t kernel_id, uint64_t stream, int module, int gpu, uint64_t duration_ns) {
  rocprofiler_callback_tracing_hip_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  if (module)
    data.args.hipModuleLaunchKernel.stream = (void*)stream;
  else
    data.args.hipLaunchKernel.stream = (void*)stream;
  int op = module ? OP_MODULE_LAUNCH : OP_LAUNCH;
  pthread_mutex_lock(&mu);
  uint64_t corr = next_corr++;
  int g = -1;
  for (int i = 0; i < n_graphs; ++i)
    if (graphs[i].capturing && graphs[i].stream == stream) g = i;
  pthread_mutex_unlock(&mu);
  hip_call(op, &data, ROCPROFILER_CALLBACK_PHASE_ENTER, corr);
  uint64_t out = 0;
  if (g >= 0) {
    if (graphs[g].n < MAX_GRAPH_KERNELS) graphs[g].kernels[graphs[g].n++] = kernel_id;
  } else {
    out = dispatch_with(corr, kernel_id, gpu, stream, 0, duration_ns);
  }
  hip_call(op, &data, ROCPROFILER_CALLBACK_PHASE_EXIT, corr);
  return out;
}

/* hipStreamEndCapture(stream, &graph). */
API uint64_t simrocm_capture_end(uint64_t stream) {
  int g = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n_graphs; ++i)
    if (graphs[i].capturing && graphs[i].stream == stream) g = i;
  if (g >= 0) graphs[g].capturing = 0;
  pthread_mutex_unlock(&mu);
  void* graph = g >= 0 ? (void*)(0x6000 + (uint64_t)g) : NULL;
  rocprofiler_callback_tracing_hip_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  data.args.hipStreamEndCapture.stream = (void*)stream;
  void* out = NULL;
  data.args.hipStreamEndCapture.pGraph = &out;
  hip_call(OP_END, &data, ROCPROFILER_CALLBACK_PHASE_ENTER, 0);
  out = graph;
  hip_call(OP_END, &data, ROCPROFILER_CALLBACK_PHASE_EXIT, 0);
  return (uint64_t)graph;
}

/* hipGraphInstantiate(&exec, graph): the executable's handle. */
API uint64_t simrocm_instantiate(uint64_t graph) {
  static uint64_t next_exec = 0x9000;
  rocprofiler_callback_tracing_hip_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  void* exec = NULL;
  data.args.hipGraphInstantiate.pGraphExec = &exec;
  data.args.hipGraphInstantiate.graph = (void*)graph;
  hip_call(OP_INSTANTIATE, &data, ROCPROFILER_CALLBACK_PHASE_ENTER, 0);
  exec = (void*)((next_exec++ << 8) | (graph & 0xff));
  hip_call(OP_INSTANTIATE, &data, ROCPROFILER_CALLBACK_PHASE_EXIT, 0);
  return (uint64_t)exec;
}

/* hipGraphLaunch(exec, stream): every captured kernel dispatched in capture order, on the calling
 * thread, all with the launch's correlation id; kernel i runs (i + 1) * duration_ns. */
API void simrocm_graph_launch(uint64_t exec, uint64_t stream, int gpu, uint64_t duration_ns) {
  int g = (int)(exec & 0xff);
  rocprofiler_callback_tracing_hip_api_data_t data;
  memset(&data, 0, sizeof(data));
  data.size = sizeof(data);
  data.args.hipGraphLaunch.graphExec = (void*)exec;
  data.args.hipGraphLaunch.stream = (void*)stream;
  pthread_mutex_lock(&mu);
  uint64_t corr = next_corr++;
  pthread_mutex_unlock(&mu);
  hip_call(OP_GRAPH_LAUNCH, &data, ROCPROFILER_CALLBACK_PHASE_ENTER, corr);
  if (g >= 0 && g < n_graphs)
    for (int i = 0; i < graphs[g].n; ++i)
      dispatch_with(corr, graphs[g].kernels[i], gpu, stream, 0, (uint64_t)(i + 1) * duration_ns);
  hip_call(OP_GRAPH_LAUNCH, &data, ROCPROFILER_CALLBACK_PHASE_EXIT, corr);
}

/* n hipLaunchKernel calls of one kernel from the calling thread (the HIP API callbacks, then the
 * dispatch), as fast as the callbacks allow: the benchmark's launch loop, no ctypes call per launch.
 * Returns the nanoseconds it took. */
API uint64_t simrocm_dispatch_loop(uint64_t n, uint64_t kernel_id, int gpu) {
  uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < n; ++i) simrocm_launch(kernel_id, 1, 0, gpu, 100);
  return now_ns() - t0;
}
