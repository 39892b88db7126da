/* A simulated CUPTI for CPU CI, built by the tests as libcupti.so and loaded by the cupti backend
 * through PROTON_CUPTI_LIB_PATH; it links the simulated driver (libcuda_sim.c, libcuda.so.1) and
 * attaches to it when loaded.
 *
 * It implements the CUPTI calls profiler.cc resolves, with the contract the backend relies on:
 * one subscriber per process (a second gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; so does
 * the first while SIM_CUPTI_TAKEN=1, another tool holding CUPTI); driver API and resource callbacks
 * only for the ids enabled; kernel records (the real CUpti_ActivityKernel10 of the toolkit's headers)
 * only while a kernel activity kind is on, KERNEL and CONCURRENT_KERNEL never both; buffers asked of
 * the client's request callback and handed back full or at cuptiActivityFlushAll; records that find
 * no buffer counted, and handed out once, by cuptiActivityGetNumDroppedRecords; timestamps from the
 * client's timestamp callback, which is accepted only before activity is first enabled.  Kernels end as
 * they are launched, or (sim_set_async) only when their context is synchronized: a forced flush before that
 * hands their records over cut short, without times, as CUPTI does with kernels still running.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "sim_tool.h"

typedef CUpti_ActivityKernel10 KernelRecord;
#define RECORD_SIZE sizeof(KernelRecord)
_Static_assert(sizeof(KernelRecord) % 8 == 0, "records are 8-byte aligned in a buffer");

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Subscription and callbacks. */
static struct CUpti_Subscriber_st {
  int unused;
} the_subscriber;
static int subscribed;
static CUpti_CallbackFunc callback;
static void* userdata;
static uint8_t driver_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint8_t resource_on[CUPTI_CBID_RESOURCE_SIZE];

/* Activity. */
static uint8_t kind_on[CUPTI_ACTIVITY_KIND_COUNT];
static int activity_ever_on;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc timestamp_cb;
static struct {
  uint8_t* data;
  size_t size, used;
} current;
static uint64_t drop_next, dropped_unreported;
static uint32_t correlation;

/* Per device and stream, when its last kernel ended: kernels of a stream run one after another. */
#define CLOCK_DEVICES 8
#define CLOCK_STREAMS 64
static uint64_t stream_end[CLOCK_DEVICES][CLOCK_STREAMS];

/* sim_stat counters. */
static uint64_t st_records, st_delivered, st_buffers, st_dropped, st_flushes, st_forced, st_finalizes,
    st_subscribes, st_api_callbacks, st_resource_callbacks, st_lost_at_finalize, st_refused_buffers, st_incomplete;

static uint64_t now_ns(void) {
  if (timestamp_cb) return timestamp_cb();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ results ---- */
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_NOT_COMPATIBLE: *str = "CUPTI_ERROR_NOT_COMPATIBLE"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (version == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

/* ---------------------------------------------------------- callbacks ---- */
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc cb, void* data) {
  if (subscriber == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* taken = getenv("SIM_CUPTI_TAKEN");
  pthread_mutex_lock(&mu);
  if (subscribed || (taken && strcmp(taken, "1") == 0)) {
    pthread_mutex_unlock(&mu);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  subscribed = 1;
  callback = cb;
  userdata = data;
  ++st_subscribes;
  pthread_mutex_unlock(&mu);
  *subscriber = &the_subscriber;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  pthread_mutex_lock(&mu);
  if (!subscribed || subscriber != &the_subscriber) {
    pthread_mutex_unlock(&mu);
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  subscribed = 0;
  callback = NULL;
  userdata = NULL;
  memset(driver_on, 0, sizeof driver_on);
  memset(resource_on, 0, sizeof resource_on);
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  CUptiResult r = CUPTI_SUCCESS;
  pthread_mutex_lock(&mu);
  if (!subscribed || subscriber != &the_subscriber)
    r = CUPTI_ERROR_INVALID_PARAMETER;
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
    driver_on[cbid] = enable != 0;
  else if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid > 0 && cbid < CUPTI_CBID_RESOURCE_SIZE)
    resource_on[cbid] = enable != 0;
  else
    r = CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_unlock(&mu);
  return r;
}

/* The subscriber's callback, if it asked for this id; read under the lock, called without it. */
static CUpti_CallbackFunc callback_for(uint8_t* on, uint32_t size, uint32_t cbid, void** data) {
  CUpti_CallbackFunc cb = NULL;
  pthread_mutex_lock(&mu);
  if (subscribed && cbid < size && on[cbid]) {
    cb = callback;
    *data = userdata;
  }
  pthread_mutex_unlock(&mu);
  return cb;
}

static __thread uint64_t correlation_data;

static void api_callback(CUpti_ApiCallbackSite site, uint32_t cbid, const char* fn, const char* symbol, CUcontext ctx,
                         uint32_t corr) {
  void* data = NULL;
  CUpti_CallbackFunc cb = callback_for(driver_on, CUPTI_DRIVER_TRACE_CBID_SIZE, cbid, &data);
  if (cb == NULL) return;
  CUpti_CallbackData info;
  memset(&info, 0, sizeof info);
  info.callbackSite = site;
  info.functionName = fn;
  info.symbolName = symbol;
  info.context = ctx;
  info.contextUid = ctx ? ((const struct sim_ctx*)ctx)->uid : 0;
  info.correlationData = &correlation_data;
  info.correlationId = corr;
  __atomic_add_fetch(&st_api_callbacks, 1, __ATOMIC_RELAXED);
  cb(data, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &info);
}

static uint32_t on_api_enter(uint32_t cbid, const char* fn, const char* symbol, CUcontext ctx) {
  uint32_t corr = __atomic_add_fetch(&correlation, 1, __ATOMIC_RELAXED);  /* every API call has one */
  api_callback(CUPTI_API_ENTER, cbid, fn, symbol, ctx, corr);
  return corr;
}

static void on_api_exit(uint32_t cbid, const char* fn, const char* symbol, CUcontext ctx, uint32_t corr) {
  api_callback(CUPTI_API_EXIT, cbid, fn, symbol, ctx, corr);
}

static void on_graph_node(uint32_t cbid, CUcontext ctx, CUgraph graph, CUgraphNode node, CUgraphNode original,
                          CUgraphExec exec) {
  void* data = NULL;
  CUpti_CallbackFunc cb = callback_for(resource_on, CUPTI_CBID_RESOURCE_SIZE, cbid, &data);
  if (cb == NULL) return;
  CUpti_GraphData graph_data;
  memset(&graph_data, 0, sizeof graph_data);
  graph_data.graph = graph;
  graph_data.originalGraph = original ? graph : NULL;
  graph_data.node = node;
  graph_data.originalNode = original;
  graph_data.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
  graph_data.graphExec = exec;
  CUpti_ResourceData res;
  memset(&res, 0, sizeof res);
  res.context = ctx;
  res.resourceDescriptor = &graph_data;
  __atomic_add_fetch(&st_resource_callbacks, 1, __ATOMIC_RELAXED);
  cb(data, CUPTI_CB_DOMAIN_RESOURCE, cbid, &res);
}

CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t* nodeId) {
  if (node == NULL || nodeId == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  *nodeId = ((const struct sim_graph_node*)node)->id;
  return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------ activity ---- */
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  CUptiResult r = CUPTI_SUCCESS;
  pthread_mutex_lock(&mu);
  if ((kind == CUPTI_ACTIVITY_KIND_KERNEL && kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) ||
      (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind_on[CUPTI_ACTIVITY_KIND_KERNEL])) {
    r = CUPTI_ERROR_NOT_COMPATIBLE;
  } else {
    kind_on[kind] = 1;
    activity_ever_on = 1;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  pthread_mutex_lock(&mu);
  kind_on[kind] = 0;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc comp) {
  if (req == NULL || comp == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&mu);
  requested = req;
  completed = comp;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc cb) {
  if (cb == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  CUptiResult r = CUPTI_SUCCESS;
  pthread_mutex_lock(&mu);
  if (activity_ever_on)
    r = CUPTI_ERROR_INVALID_OPERATION;
  else
    timestamp_cb = cb;
  pthread_mutex_unlock(&mu);
  return r;
}

/* Hands a buffer to the client (never with the lock held: the client reads records in the callback). */
static void deliver(CUpti_BuffersCallbackCompleteFunc comp, uint8_t* data, size_t size, size_t used) {
  if (data == NULL || comp == NULL) return;
  __atomic_add_fetch(&st_delivered, used / RECORD_SIZE, __ATOMIC_RELAXED);
  __atomic_add_fetch(&st_buffers, 1, __ATOMIC_RELAXED);
  comp(NULL, 0, data, size, used);
}

/* Kernels still running (sim_set_async): their records are made when their context is synchronized. */
struct running {
  CUcontext ctx;
  uint32_t device, context_id, stream, corr, graph_id;
  const char* name;
  uint64_t duration, graph_node_id;
};
static int async_on;
static struct running* running;
static size_t n_running, cap_running;

/* Writes one kernel record (incomplete: no timestamps, as CUPTI leaves a kernel a forced flush cut short). */
static void make_record(uint32_t device, uint32_t context_id, uint32_t stream, const char* name, uint32_t corr,
                        uint64_t duration, uint64_t graph_node_id, uint32_t graph_id, int incomplete) {
  uint8_t* full = NULL;
  size_t full_size = 0, full_used = 0;
  CUpti_BuffersCallbackCompleteFunc comp = NULL;
  pthread_mutex_lock(&mu);
  CUpti_ActivityKind kind = kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                            : kind_on[CUPTI_ACTIVITY_KIND_KERNEL]          ? CUPTI_ACTIVITY_KIND_KERNEL
                                                                           : CUPTI_ACTIVITY_KIND_INVALID;
  if (kind == CUPTI_ACTIVITY_KIND_INVALID || requested == NULL) {
    pthread_mutex_unlock(&mu);
    return;
  }
  comp = completed;
  if (drop_next > 0) {
    --drop_next;
    ++dropped_unreported;
    ++st_dropped;
    pthread_mutex_unlock(&mu);
    return;
  }
  if (current.data != NULL && current.used + RECORD_SIZE > current.size) {  /* full: hand it over */
    full = current.data;
    full_size = current.size;
    full_used = current.used;
    current.data = NULL;
  }
  if (current.data == NULL) {
    uint8_t* data = NULL;
    size_t size = 0, max_records = 0;
    requested(&data, &size, &max_records);
    if (data == NULL || size < RECORD_SIZE) {  /* the client declined: the record is dropped */
      ++st_refused_buffers;
      ++dropped_unreported;
      ++st_dropped;
      pthread_mutex_unlock(&mu);
      deliver(comp, full, full_size, full_used);
      return;
    }
    current.data = data;
    current.size = size;
    current.used = 0;
  }
  uint64_t start = 0, end = 0;
  if (!incomplete) {
    start = now_ns();
    uint64_t* lane = &stream_end[device % CLOCK_DEVICES][stream % CLOCK_STREAMS];
    if (start < *lane) start = *lane;
    end = *lane = start + duration;
  }
  KernelRecord* k = (KernelRecord*)(current.data + current.used);
  memset(k, 0, RECORD_SIZE);
  k->kind = kind;
  k->start = start;
  k->end = end;
  k->completed = end;
  k->queued = k->submitted = start;
  k->deviceId = device;
  k->contextId = context_id;
  k->streamId = stream;
  k->gridX = k->gridY = k->gridZ = 1;
  k->blockX = 128;
  k->blockY = k->blockZ = 1;
  k->correlationId = corr;
  k->name = name;
  k->graphNodeId = graph_node_id;
  k->graphId = graph_id;
  current.used += RECORD_SIZE;
  ++st_records;
  if (incomplete) ++st_incomplete;
  pthread_mutex_unlock(&mu);
  deliver(comp, full, full_size, full_used);
}

static void on_kernel(CUcontext ctx, uint32_t device, uint32_t context_id, uint32_t stream, const char* name,
                      uint32_t corr, uint64_t duration, uint64_t graph_node_id, uint32_t graph_id) {
  pthread_mutex_lock(&mu);
  if (async_on) {
    if (n_running == cap_running) {
      size_t cap = cap_running ? 2 * cap_running : 64;
      struct running* grown = realloc(running, cap * sizeof *running);
      if (grown == NULL) {  /* out of memory: the kernel ends now */
        pthread_mutex_unlock(&mu);
        make_record(device, context_id, stream, name, corr, duration, graph_node_id, graph_id, 0);
        return;
      }
      running = grown;
      cap_running = cap;
    }
    struct running r = {ctx, device, context_id, stream, corr, graph_id, name, duration, graph_node_id};
    running[n_running++] = r;
    pthread_mutex_unlock(&mu);
    return;
  }
  pthread_mutex_unlock(&mu);
  make_record(device, context_id, stream, name, corr, duration, graph_node_id, graph_id, 0);
}

/* Ends the running kernels of `ctx` (every context: NULL) in launch order, complete or cut short. */
static void end_running(CUcontext ctx, int incomplete) {
  for (;;) {
    struct running r;
    int found = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_running && !found; ++i) {
      if (ctx != NULL && running[i].ctx != ctx) continue;
      r = running[i];
      memmove(&running[i], &running[i + 1], (n_running - i - 1) * sizeof *running);
      --n_running;
      found = 1;
    }
    pthread_mutex_unlock(&mu);
    if (!found) return;
    make_record(r.device, r.context_id, r.stream, r.name, r.corr, r.duration, r.graph_node_id, r.graph_id, incomplete);
  }
}

static void on_synchronized(CUcontext ctx) { end_running(ctx, 0); }

static void on_set_async(int on) {
  pthread_mutex_lock(&mu);
  async_on = on;
  pthread_mutex_unlock(&mu);
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) end_running(NULL, 1);  /* cut short: no times */
  pthread_mutex_lock(&mu);
  if (completed == NULL) {
    pthread_mutex_unlock(&mu);
    return CUPTI_ERROR_INVALID_OPERATION;
  }
  ++st_flushes;
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) ++st_forced;
  uint8_t* data = NULL;
  size_t size = 0, used = 0;
  if (current.data != NULL && current.used > 0) {  /* every record here is complete: both kinds of flush */
    data = current.data;
    size = current.size;
    used = current.used;
    current.data = NULL;
  }
  CUpti_BuffersCallbackCompleteFunc comp = completed;
  pthread_mutex_unlock(&mu);
  deliver(comp, data, size, used);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes, CUpti_Activity** record) {
  if (buffer == NULL || record == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  uint8_t* next = *record == NULL ? buffer : (uint8_t*)*record + RECORD_SIZE;
  if (next + RECORD_SIZE > buffer + validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind = ((CUpti_Activity*)next)->kind;
  if (kind != CUPTI_ACTIVITY_KIND_KERNEL && kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
    return CUPTI_ERROR_INVALID_KIND;
  *record = (CUpti_Activity*)next;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t* dropped) {
  (void)streamId;
  if (dropped == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context != NULL) {  /* every drop here is in the global queue */
    *dropped = 0;
    return CUPTI_SUCCESS;
  }
  pthread_mutex_lock(&mu);
  *dropped = (size_t)dropped_unreported;
  dropped_unreported = 0;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

/* Detaches CUPTI: every setting goes; records still in a buffer are lost (counted: "lost_at_finalize"). */
CUptiResult CUPTIAPI cuptiFinalize(void) {
  pthread_mutex_lock(&mu);
  ++st_finalizes;
  st_lost_at_finalize += current.data ? current.used / RECORD_SIZE : 0;
  memset(&current, 0, sizeof current);
  memset(kind_on, 0, sizeof kind_on);
  activity_ever_on = 0;
  requested = NULL;
  completed = NULL;
  timestamp_cb = NULL;
  subscribed = 0;
  callback = NULL;
  memset(driver_on, 0, sizeof driver_on);
  memset(resource_on, 0, sizeof resource_on);
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

/* --------------------------------------------------- the driver's tool ---- */
static void on_drop(uint64_t n) {
  pthread_mutex_lock(&mu);
  drop_next += n;
  pthread_mutex_unlock(&mu);
}

static uint64_t on_stat(const char* name) {
  static const struct {
    const char* name;
    const uint64_t* value;
  } counters[] = {
      {"records", &st_records},           {"delivered", &st_delivered},
      {"buffers", &st_buffers},           {"dropped", &st_dropped},
      {"flushes", &st_flushes},           {"forced_flushes", &st_forced},
      {"finalizes", &st_finalizes},       {"subscribes", &st_subscribes},
      {"api_callbacks", &st_api_callbacks}, {"resource_callbacks", &st_resource_callbacks},
      {"lost_at_finalize", &st_lost_at_finalize}, {"refused_buffers", &st_refused_buffers},
      {"incomplete", &st_incomplete},
  };
  if (strcmp(name, "subscribed") == 0) return (uint64_t)subscribed;
  if (strcmp(name, "kernel_activity") == 0) {
    if (kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    return kind_on[CUPTI_ACTIVITY_KIND_KERNEL] ? CUPTI_ACTIVITY_KIND_KERNEL : 0;
  }
  if (strcmp(name, "timestamp_callback") == 0) return timestamp_cb != NULL;
  if (strcmp(name, "pending") == 0) return current.data ? current.used / RECORD_SIZE : 0;
  if (strcmp(name, "running") == 0) return n_running;
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; ++i)
    if (strcmp(name, counters[i].name) == 0) return __atomic_load_n(counters[i].value, __ATOMIC_RELAXED);
  return 0;
}

static const struct sim_tool cupti_tool = {on_api_enter, on_api_exit, on_kernel,     on_graph_node,
                                           on_drop,      on_stat,     on_set_async, on_synchronized};

__attribute__((constructor)) static void attach(void) { sim_cuda_set_tool(&cupti_tool); }
__attribute__((destructor)) static void detach(void) { sim_cuda_set_tool(NULL); }
