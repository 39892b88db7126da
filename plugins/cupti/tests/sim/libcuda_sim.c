/* A simulated CUDA driver for CPU CI, built by the tests as libcuda.so.1 (the name the backend and
 * the driver checks dlopen) and found through LD_LIBRARY_PATH.
 *
 * It answers the driver calls the cupti backend resolves (profiler.cc's DriverApi: devices, their
 * attributes and names, primary contexts, the current-context stack, cuCtxSynchronize), loads
 * CUDA_INJECTION64_PATH at cuInit and calls its InitializeInjection as the real driver does, and
 * exports sim_* calls that play a program's GPU work: kernel launches, stream-captured graphs, their
 * instantiation and replays.  Each of those is told to the attached tool (the simulated CUPTI,
 * sim_tool.h), which makes the callbacks and activity records of it.
 *
 * Devices: SIM_CUDA_DEVICES (default 2), compute capability 9.0, 132 SMs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "sim_tool.h"

#define MAX_DEVICES 8
#define MAX_STACK 16
#define MAX_GRAPHS 256
#define MAX_NODES 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized, n_devices = 2;
static struct sim_ctx primaries[MAX_DEVICES];
static const struct sim_tool* volatile tool;
static uint64_t n_syncs, n_launches, n_inits;
static int injection_state;  /* 0 none asked, 1 called (its return in injection_result), -1 load failed, -2 no symbol */
static int injection_result;

static __thread CUcontext stack[MAX_STACK];
static __thread int depth;

static int async_kernels;  /* sim_set_async, told to each tool that attaches */

SIM_API void sim_cuda_set_tool(const struct sim_tool* t) {
  if (t) t->set_async(async_kernels);
  tool = t;
}

/* ------------------------------------------------------------- devices ---- */
static int valid_device(CUdevice d) { return initialized && d >= 0 && d < n_devices; }

/* The real driver loads the injection library named by CUDA_INJECTION64_PATH during cuInit and calls
 * its InitializeInjection; a nested cuInit from there finds the driver initialized already. */
static void inject(void) {
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (path == NULL || !*path) return;
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    fprintf(stderr, "sim libcuda: cannot load CUDA_INJECTION64_PATH %s: %s\n", path, dlerror());
    injection_state = -1;
    return;
  }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (init == NULL) {
    injection_state = -2;
    return;
  }
  injection_state = 1;
  injection_result = init();
}

SIM_API CUresult cuInit(unsigned flags) {
  (void)flags;
  pthread_mutex_lock(&mu);
  ++n_inits;
  if (initialized) {
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
  }
  const char* env = getenv("SIM_CUDA_DEVICES");
  if (env && *env) n_devices = atoi(env);
  if (n_devices < 0) n_devices = 0;
  if (n_devices > MAX_DEVICES) n_devices = MAX_DEVICES;
  for (int d = 0; d < MAX_DEVICES; ++d) {
    primaries[d].device = d;
    primaries[d].uid = (uint32_t)d + 1;
  }
  initialized = 1;
  pthread_mutex_unlock(&mu);
  inject();  /* outside the lock: the tool may call back into the driver */
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDriverGetVersion(int* v) {
  if (v == NULL) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = n_devices;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev == NULL || ordinal < 0 || ordinal >= n_devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "Proton Sim GPU %d", (int)dev);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ contexts ---- */
SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned* flags, int* active) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags) *flags = 0;
  if (active) *active = primaries[dev].retained > 0;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  ++primaries[dev].retained;
  pthread_mutex_unlock(&mu);
  *ctx = (CUcontext)&primaries[dev];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  CUresult r = primaries[dev].retained > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  if (r == CUDA_SUCCESS) --primaries[dev].retained;
  pthread_mutex_unlock(&mu);
  return r;
}

SIM_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *ctx = depth > 0 ? stack[depth - 1] : NULL;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (depth == 0) {
    if (ctx != NULL) stack[depth++] = ctx;
  } else if (ctx == NULL) {
    --depth;
  } else {
    stack[depth - 1] = ctx;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == NULL || depth == MAX_STACK) return CUDA_ERROR_INVALID_VALUE;
  stack[depth++] = ctx;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext top = stack[--depth];
  if (ctx) *ctx = top;
  return CUDA_SUCCESS;
}

/* The current context's running kernels end (sim_set_async); counted in sim_stat "syncs". */
SIM_API CUresult cuCtxSynchronize(void) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  __atomic_add_fetch(&n_syncs, 1, __ATOMIC_RELAXED);
  const struct sim_tool* t = tool;
  if (t) t->synchronized(stack[depth - 1]);
  return CUDA_SUCCESS;
}

/* The device's primary context, retained once and made current when the thread has none (what the
 * runtime API does at a thread's first call on a device). */
static struct sim_ctx* context_for(uint32_t device) {
  if (!initialized) cuInit(0);
  if (device >= (uint32_t)n_devices) return NULL;
  struct sim_ctx* c = &primaries[device];
  pthread_mutex_lock(&mu);
  if (c->retained == 0) c->retained = 1;
  pthread_mutex_unlock(&mu);
  if (depth == 0) stack[depth++] = (CUcontext)c;
  return c;
}

/* ------------------------------------------------------------ launches ---- */
/* Kernel names live as long as their module, so records may point at them after the caller's string is
 * gone: the driver keeps one copy of each name for the process's life. */
#define NAME_SLOTS 4096
static const char* names[NAME_SLOTS];

static const char* intern(const char* name) {
  if (name == NULL) return NULL;
  uint64_t h = 1469598103934665603ull;
  for (const char* p = name; *p; ++p) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  pthread_mutex_lock(&mu);
  const char* out = NULL;
  for (uint64_t i = 0; i < NAME_SLOTS && out == NULL; ++i) {
    const char** slot = &names[(h + i) % NAME_SLOTS];
    if (*slot == NULL) *slot = strdup(name);
    if (strcmp(*slot, name) == 0) out = *slot;
  }
  pthread_mutex_unlock(&mu);
  return out;  /* NULL only when the table is full */
}

static uint32_t api_enter(uint32_t cbid, const char* fn, const char* symbol, CUcontext ctx) {
  const struct sim_tool* t = tool;
  return t ? t->api_enter(cbid, fn, symbol, ctx) : 0;
}

static void api_exit(uint32_t cbid, const char* fn, const char* symbol, CUcontext ctx, uint32_t corr) {
  const struct sim_tool* t = tool;
  if (t) t->api_exit(cbid, fn, symbol, ctx, corr);
}

static void kernel_done(struct sim_ctx* c, uint32_t stream, const char* name, uint32_t corr, uint64_t duration,
                        uint64_t node_id, uint32_t graph_id) {
  const struct sim_tool* t = tool;
  if (t) t->kernel((CUcontext)c, (uint32_t)c->device, c->uid, stream, name, corr, duration, node_id, graph_id);
}

/* cuLaunchKernel of `kernel` on a device and stream, running for duration_ns: the API callbacks on the
 * calling thread, then the kernel's record.  Returns the launch's correlation id (0: no tool). */
SIM_API uint32_t sim_launch(const char* kernel, uint32_t device, uint32_t stream, uint64_t duration_ns) {
  struct sim_ctx* c = context_for(device);
  kernel = intern(kernel);
  if (c == NULL || kernel == NULL) return 0;
  CUcontext ctx = (CUcontext)c;
  uint32_t corr = api_enter(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", kernel, ctx);
  api_exit(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", kernel, ctx, corr);
  __atomic_add_fetch(&n_launches, 1, __ATOMIC_RELAXED);
  kernel_done(c, stream, kernel, corr, duration_ns, 0, 0);
  return corr;
}

/* n launches of one kernel (many records quickly: full buffers, soak). */
SIM_API void sim_launch_many(const char* kernel, uint32_t device, uint32_t stream, uint64_t duration_ns, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) sim_launch(kernel, device, stream, duration_ns);
}

struct thread_launches {
  const char* kernel;
  uint32_t device, stream;
  uint64_t duration, n;
};
static void* launch_thread(void* arg) {
  struct thread_launches* job = (struct thread_launches*)arg;
  sim_launch_many(job->kernel, job->device, job->stream, job->duration, job->n);
  return NULL;
}

/* n launches from a new thread of the program's (no Python on it), joined before returning: 0 on success. */
SIM_API int sim_launch_on_thread(const char* kernel, uint32_t device, uint32_t stream, uint64_t duration_ns,
                                 uint64_t n) {
  struct thread_launches job = {intern(kernel), device, stream, duration_ns, n};
  pthread_t t;
  if (job.kernel == NULL || pthread_create(&t, NULL, launch_thread, &job) != 0) return -1;
  return pthread_join(t, NULL);
}

/* -------------------------------------------------------------- graphs ---- */
struct sim_graph {
  int n;
  uint32_t device;
  struct sim_graph_node nodes[MAX_NODES];
};
struct sim_exec {
  struct sim_graph* graph;
  uint32_t id;
  struct sim_graph_node nodes[MAX_NODES];
};
static struct sim_graph graphs[MAX_GRAPHS];
static struct sim_exec execs[MAX_GRAPHS];
static int n_graphs, n_execs;
static uint64_t next_node_id = 1000;

static void graph_node(uint32_t cbid, struct sim_ctx* c, void* graph, struct sim_graph_node* node,
                       struct sim_graph_node* original, void* exec) {
  const struct sim_tool* t = tool;
  if (t) t->graph_node(cbid, (CUcontext)c, (CUgraph)graph, (CUgraphNode)node, (CUgraphNode)original, (CUgraphExec)exec);
}

/* Stream capture of n kernel launches on `stream`: each launch's API callbacks run (no kernel runs)
 * and its node is created.  Returns the graph (1-based; 0 on failure). */
SIM_API uint64_t sim_graph_capture(const char* const* kernels, int n, uint32_t device, uint32_t stream) {
  (void)stream;
  struct sim_ctx* c = context_for(device);
  if (c == NULL || n <= 0 || n > MAX_NODES) return 0;
  const char* interned[MAX_NODES];
  for (int i = 0; i < n; ++i)
    if ((interned[i] = intern(kernels[i])) == NULL) return 0;
  pthread_mutex_lock(&mu);
  if (n_graphs == MAX_GRAPHS) {
    pthread_mutex_unlock(&mu);
    return 0;
  }
  struct sim_graph* g = &graphs[n_graphs++];
  uint64_t handle = (uint64_t)n_graphs;
  g->n = n;
  g->device = device;
  for (int i = 0; i < n; ++i) {
    g->nodes[i].id = next_node_id++;
    g->nodes[i].kernel = interned[i];
  }
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; ++i) {
    CUcontext ctx = (CUcontext)c;
    uint32_t corr = api_enter(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", g->nodes[i].kernel, ctx);
    graph_node(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, c, g, &g->nodes[i], NULL, NULL);
    api_exit(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", g->nodes[i].kernel, ctx, corr);
  }
  return handle;
}

/* cuGraphInstantiate: every node cloned into the executable graph.  Returns it (1-based; 0 on failure). */
SIM_API uint64_t sim_graph_instantiate(uint64_t graph) {
  if (graph == 0 || graph > (uint64_t)n_graphs) return 0;
  struct sim_graph* g = &graphs[graph - 1];
  pthread_mutex_lock(&mu);
  if (n_execs == MAX_GRAPHS) {
    pthread_mutex_unlock(&mu);
    return 0;
  }
  struct sim_exec* e = &execs[n_execs++];
  uint64_t handle = (uint64_t)n_execs;
  e->graph = g;
  e->id = (uint32_t)handle;
  for (int i = 0; i < g->n; ++i) {
    e->nodes[i].id = next_node_id++;
    e->nodes[i].kernel = g->nodes[i].kernel;
  }
  pthread_mutex_unlock(&mu);
  struct sim_ctx* c = context_for(g->device);
  for (int i = 0; i < g->n; ++i)
    graph_node(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, c, g, &e->nodes[i], &g->nodes[i], e);
  return handle;
}

/* cuGraphLaunch of an executable graph on `stream`: one API call, then every node's kernel runs for
 * duration_ns under that call's correlation id with its graph node id.  Returns the correlation id. */
SIM_API uint32_t sim_graph_launch(uint64_t exec, uint32_t stream, uint64_t duration_ns) {
  if (exec == 0 || exec > (uint64_t)n_execs) return 0;
  struct sim_exec* e = &execs[exec - 1];
  struct sim_ctx* c = context_for(e->graph->device);
  CUcontext ctx = (CUcontext)c;
  uint32_t corr = api_enter(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", NULL, ctx);
  api_exit(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", NULL, ctx, corr);
  __atomic_add_fetch(&n_launches, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < e->graph->n; ++i)
    kernel_done(c, stream, e->nodes[i].kernel, corr, duration_ns, e->nodes[i].id, e->id);
  return corr;
}

/* ---------------------------------------------------------- test hooks ---- */
/* The next n kernel records find no activity buffer space (CUPTI counts them as dropped). */
SIM_API void sim_drop(uint64_t n) {
  const struct sim_tool* t = tool;
  if (t) t->drop(n);
}

/* 1: kernels keep running until their context is synchronized (a forced flush before that delivers their
 * records incomplete, without times, as CUPTI does); 0 (the default): kernels end as they are launched. */
SIM_API void sim_set_async(int on) {
  async_kernels = on;
  const struct sim_tool* t = tool;
  if (t) t->set_async(on);
}

/* A counter by name: the driver's ("syncs", "launches", "inits", "injection", "injection_result",
 * "tool") or else the tool's (libcupti_sim.c). */
SIM_API int64_t sim_stat(const char* name) {
  if (strcmp(name, "syncs") == 0) return (int64_t)n_syncs;
  if (strcmp(name, "launches") == 0) return (int64_t)n_launches;
  if (strcmp(name, "inits") == 0) return (int64_t)n_inits;
  if (strcmp(name, "injection") == 0) return injection_state;
  if (strcmp(name, "injection_result") == 0) return injection_result;
  if (strcmp(name, "tool") == 0) return tool != NULL;
  const struct sim_tool* t = tool;
  return t ? (int64_t)t->stat(name) : 0;
}
