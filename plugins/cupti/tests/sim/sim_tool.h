/* The seam between the simulated driver (libcuda_sim.c, built as libcuda.so.1) and the simulated
 * CUPTI (libcupti_sim.c, built as libcupti.so).  As in the real stack, the driver does the work
 * (contexts, launches, graphs) and tells the attached tool what happened; the tool (CUPTI) turns
 * that into callbacks and activity records.  libcupti.so links libcuda.so.1 and attaches itself
 * from its constructor, so loading CUPTI is all it takes.
 */
#pragma once

#include <cuda.h>
#include <stdint.h>

#define SIM_API __attribute__((visibility("default")))

struct sim_tool {
  /* A driver API call begins on the calling thread: the correlation id CUPTI gives it. */
  uint32_t (*api_enter)(uint32_t cbid, const char* function, const char* symbol, CUcontext ctx);
  void (*api_exit)(uint32_t cbid, const char* function, const char* symbol, CUcontext ctx, uint32_t corr);
  /* A kernel finished on the device (records are complete as soon as they are made). */
  void (*kernel)(CUcontext ctx, uint32_t device, uint32_t context_id, uint32_t stream, const char* name,
                 uint32_t corr, uint64_t duration_ns, uint64_t graph_node_id, uint32_t graph_id);
  /* A resource event on a graph node (CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED / _CLONED). */
  void (*graph_node)(uint32_t cbid, CUcontext ctx, CUgraph graph, CUgraphNode node, CUgraphNode original,
                     CUgraphExec exec);
  /* The next n kernel records find no buffer space (the test's sim_drop). */
  void (*drop)(uint64_t n);
  /* A counter of the tool's, by name (sim_stat); 0 for a name it does not know. */
  uint64_t (*stat)(const char* name);
  /* sim_set_async: kernels of a context stay running until it is synchronized (1), or end at launch (0). */
  void (*set_async)(int on);
  /* cuCtxSynchronize on a context: its running kernels end. */
  void (*synchronized)(CUcontext ctx);
};

/* Exported by libcuda.so.1: a tool attaches (non-NULL) or detaches (NULL). */
SIM_API void sim_cuda_set_tool(const struct sim_tool* tool);

/* A simulated context: what CUcontext points at (a primary context per device). */
struct sim_ctx {
  int device;
  uint32_t uid;  /* CUpti_CallbackData.contextUid and the records' contextId */
  int retained;
};

/* A simulated graph node: what CUgraphNode points at.  The id is what cuptiGetGraphNodeId returns. */
struct sim_graph_node {
  uint64_t id;
  const char* kernel;
};
