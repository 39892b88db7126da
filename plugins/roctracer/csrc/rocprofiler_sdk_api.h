/* The subset of rocprofiler-sdk's C API that Proton's AMD backend uses, declared here so that the
 * plugin builds without ROCm (librocprofiler-sdk is dlopen'ed at run time, never linked).
 *
 * Taken from rocprofiler-sdk 0.5.0 (ROCm 6.3), ROCm/rocprofiler-sdk commit 8ab1ed7 (2024-10-10),
 * headers include/rocprofiler-sdk/{fwd,registration,context,buffer,buffer_tracing,
 * callback_tracing,agent,rocprofiler}.h and marker/api_id.h.  Enumerator values are written out
 * (they are ABI); only the struct members this plugin reads are relied on, and every struct keeps
 * the upstream member order and types so its layout matches.  Types from other ROCm headers
 * (hsa_agent_t, HSA_ENGINE_VERSION, ...) are spelled as the integers of the same size.
 *
 * The simulated ROCm of the tests (tests/simrocm/simrocm.c) implements exactly these functions.
 * Plain C: the simulator includes it too.
 */
#ifndef PROTON_ROCPROFILER_SDK_API_H
#define PROTON_ROCPROFILER_SDK_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTON_ROCPROFILER_SDK_DECLARED_FROM_STR "rocprofiler-sdk 0.5.0 (ROCm 6.3)"

typedef enum {
  ROCPROFILER_STATUS_SUCCESS = 0,
  ROCPROFILER_STATUS_ERROR = 1,
  ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND = 2,
  ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND = 3,
  ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND = 4,
  ROCPROFILER_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED = 14,
  ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED = 15, /* already configured, or being configured */
  ROCPROFILER_STATUS_ERROR_NOT_IMPLEMENTED = 16,
  ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI = 17,
  ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT = 18,
} rocprofiler_status_t;

typedef enum { ROCPROFILER_AGENT_TYPE_NONE = 0, ROCPROFILER_AGENT_TYPE_CPU = 1, ROCPROFILER_AGENT_TYPE_GPU = 2 } rocprofiler_agent_type_t;

typedef enum {
  ROCPROFILER_CALLBACK_PHASE_NONE = 0,
  ROCPROFILER_CALLBACK_PHASE_ENTER = 1,
  ROCPROFILER_CALLBACK_PHASE_LOAD = 1, /* code objects */
  ROCPROFILER_CALLBACK_PHASE_EXIT = 2,
  ROCPROFILER_CALLBACK_PHASE_UNLOAD = 2,
} rocprofiler_callback_phase_t;

typedef enum {
  ROCPROFILER_CALLBACK_TRACING_NONE = 0,
  ROCPROFILER_CALLBACK_TRACING_HIP_RUNTIME_API = 5,
  ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API = 7,
  ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT = 10,
  ROCPROFILER_CALLBACK_TRACING_KERNEL_DISPATCH = 12,
} rocprofiler_callback_tracing_kind_t;

typedef enum {
  ROCPROFILER_BUFFER_TRACING_NONE = 0,
  ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH = 11,
} rocprofiler_buffer_tracing_kind_t;

typedef enum { ROCPROFILER_BUFFER_CATEGORY_NONE = 0, ROCPROFILER_BUFFER_CATEGORY_TRACING = 1 } rocprofiler_buffer_category_t;

typedef enum {
  ROCPROFILER_CODE_OBJECT_NONE = 0,
  ROCPROFILER_CODE_OBJECT_LOAD = 1,
  ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER = 2,
} rocprofiler_code_object_operation_t;

typedef enum {
  ROCPROFILER_KERNEL_DISPATCH_NONE = 0,
  ROCPROFILER_KERNEL_DISPATCH_ENQUEUE = 1, /* ENTER on the launching thread, before the packet */
  ROCPROFILER_KERNEL_DISPATCH_COMPLETE = 2,
} rocprofiler_kernel_dispatch_operation_t;

typedef enum {
  ROCPROFILER_MARKER_CORE_API_ID_roctxMarkA = 0,
  ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA = 1,
  ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop = 2,
  ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStartA = 3,
  ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStop = 4,
} rocprofiler_marker_core_api_id_t;

typedef enum {
  ROCPROFILER_BUFFER_POLICY_NONE = 0,
  ROCPROFILER_BUFFER_POLICY_DISCARD = 1,
  ROCPROFILER_BUFFER_POLICY_LOSSLESS = 2,
} rocprofiler_buffer_policy_t;

typedef enum { ROCPROFILER_AGENT_INFO_VERSION_NONE = 0, ROCPROFILER_AGENT_INFO_VERSION_0 = 1 } rocprofiler_agent_version_t;

typedef uint64_t rocprofiler_timestamp_t;
typedef uint64_t rocprofiler_thread_id_t;
typedef int32_t rocprofiler_tracing_operation_t;
typedef uint64_t rocprofiler_kernel_id_t;
typedef uint64_t rocprofiler_dispatch_id_t;

typedef union rocprofiler_user_data_t {
  uint64_t value;
  void* ptr;
} rocprofiler_user_data_t;

typedef struct { uint64_t handle; } rocprofiler_context_id_t;
typedef struct { uint64_t handle; } rocprofiler_queue_id_t;
typedef struct { uint64_t handle; } rocprofiler_buffer_id_t;
typedef struct { uint64_t handle; } rocprofiler_agent_id_t;

typedef struct {
  uint64_t internal;
  rocprofiler_user_data_t external;
} rocprofiler_correlation_id_t;

typedef struct rocprofiler_dim3_t {
  uint32_t x, y, z;
} rocprofiler_dim3_t;

typedef struct rocprofiler_callback_tracing_record_t {
  rocprofiler_context_id_t context_id;
  rocprofiler_thread_id_t thread_id;
  rocprofiler_correlation_id_t correlation_id;
  rocprofiler_callback_tracing_kind_t kind;
  rocprofiler_tracing_operation_t operation;
  rocprofiler_callback_phase_t phase;
  void* payload;
} rocprofiler_callback_tracing_record_t;

typedef struct {
  union {
    struct {
      uint32_t category; /* rocprofiler_buffer_category_t */
      uint32_t kind;
    };
    uint64_t hash;
  };
  void* payload;
} rocprofiler_record_header_t;

typedef struct rocprofiler_kernel_dispatch_info_t {
  uint64_t size;
  rocprofiler_agent_id_t agent_id;
  rocprofiler_queue_id_t queue_id;
  rocprofiler_kernel_id_t kernel_id;
  rocprofiler_dispatch_id_t dispatch_id;
  uint32_t private_segment_size;
  uint32_t group_segment_size;
  rocprofiler_dim3_t workgroup_size;
  rocprofiler_dim3_t grid_size;
  uint8_t reserved_padding[56];
} rocprofiler_kernel_dispatch_info_t;

typedef struct rocprofiler_buffer_tracing_kernel_dispatch_record_t {
  uint64_t size;
  rocprofiler_buffer_tracing_kind_t kind;
  rocprofiler_kernel_dispatch_operation_t operation;
  rocprofiler_correlation_id_t correlation_id;
  rocprofiler_thread_id_t thread_id;
  rocprofiler_timestamp_t start_timestamp;
  rocprofiler_timestamp_t end_timestamp;
  rocprofiler_kernel_dispatch_info_t dispatch_info;
} rocprofiler_buffer_tracing_kernel_dispatch_record_t;

typedef struct rocprofiler_callback_tracing_kernel_dispatch_data_t {
  uint64_t size;
  rocprofiler_timestamp_t start_timestamp;
  rocprofiler_timestamp_t end_timestamp;
  rocprofiler_kernel_dispatch_info_t dispatch_info;
} rocprofiler_callback_tracing_kernel_dispatch_data_t;

typedef struct {
  uint64_t size;
  uint64_t kernel_id;
  uint64_t code_object_id;
  const char* kernel_name;
  uint64_t kernel_object;
  uint32_t kernarg_segment_size;
  uint32_t kernarg_segment_alignment;
  uint32_t group_segment_size;
  uint32_t private_segment_size;
  uint32_t sgpr_count;
  uint32_t arch_vgpr_count;
  uint32_t accum_vgpr_count;
} rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t;

/* Marker (roctx) calls: the first member of the argument union of roctxMarkA, roctxRangePushA and
 * roctxRangeStartA is the message. */
typedef struct {
  uint64_t size;
  union {
    struct {
      const char* message;
    } message_args;
    uint64_t range_id;
  } args;
  uint64_t retval;
} rocprofiler_callback_tracing_marker_api_data_t;

/* HIP runtime API calls (callback tracing kind HIP_RUNTIME_API): the argument structs of the calls
 * that capture, instantiate and launch HIP graphs and launch kernels, from include/rocprofiler-sdk/
 * hip/api_args.h (rocprofiler_hip_api_args_t; hipStream_t, hipGraph_t, hipGraphExec_t are pointers).
 * Operation ids are looked up by name at run time (rocprofiler_query_callback_tracing_kind_operation_name),
 * never hard-coded: they grow with every HIP release. */
typedef union {
  struct {
    void* stream;
    int mode;
  } hipStreamBeginCapture;
  struct {
    void* stream;
    void** pGraph;
  } hipStreamEndCapture;
  struct {
    void** pGraphExec;
    void* graph;
  } hipGraphInstantiate; /* also hipGraphInstantiateWithFlags: the same first two members */
  struct {
    void* graphExec;
    void* stream;
  } hipGraphLaunch;
  struct {
    const void* function_address;
    rocprofiler_dim3_t numBlocks;
    rocprofiler_dim3_t dimBlocks;
    void** args;
    size_t sharedMemBytes;
    void* stream;
  } hipLaunchKernel; /* also hipExtLaunchKernel and (same offsets) hipLaunchCooperativeKernel */
  struct {
    void* func;
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void* stream;
  } hipModuleLaunchKernel;
} proton_hip_api_args_t;

typedef struct {
  uint64_t size;
  proton_hip_api_args_t args; /* the prefix of rocprofiler_hip_api_args_t that Proton reads */
} rocprofiler_callback_tracing_hip_api_data_t;

typedef struct rocprofiler_agent_mem_bank_t {
  uint32_t heap_type; /* HSA_HEAPTYPE */
  uint32_t flags;     /* HSA_MEMORYPROPERTY */
  uint32_t width;       /* bits of the memory interface */
  uint32_t mem_clk_max; /* MHz */
  uint64_t size_in_bytes;
} rocprofiler_agent_mem_bank_t;

typedef struct rocprofiler_agent_v0_t {
  uint64_t size;
  rocprofiler_agent_id_t id;
  rocprofiler_agent_type_t type;
  uint32_t cpu_cores_count;
  uint32_t simd_count;
  uint32_t mem_banks_count;
  uint32_t caches_count;
  uint32_t io_links_count;
  uint32_t cpu_core_id_base;
  uint32_t simd_id_base;
  uint32_t max_waves_per_simd;
  uint32_t lds_size_in_kb;
  uint32_t gds_size_in_kb;
  uint32_t num_gws;
  uint32_t wave_front_size;
  uint32_t num_xcc;
  uint32_t cu_count;
  uint32_t array_count;
  uint32_t num_shader_banks;
  uint32_t simd_arrays_per_engine;
  uint32_t cu_per_simd_array;
  uint32_t simd_per_cu;
  uint32_t max_slots_scratch_cu;
  uint32_t gfx_target_version;
  uint16_t vendor_id;
  uint16_t device_id;
  uint32_t location_id;
  uint32_t domain;
  uint32_t drm_render_minor;
  uint32_t num_sdma_engines;
  uint32_t num_sdma_xgmi_engines;
  uint32_t num_sdma_queues_per_engine;
  uint32_t num_cp_queues;
  uint32_t max_engine_clk_ccompute;
  uint32_t max_engine_clk_fcompute; /* MHz */
  uint32_t sdma_fw_version;         /* HSA_ENGINE_VERSION */
  uint32_t fw_version;              /* HSA_ENGINE_ID */
  uint32_t capability;              /* HSA_CAPABILITY */
  uint32_t cu_per_engine;
  uint32_t max_waves_per_cu;
  uint32_t family_id;
  uint32_t workgroup_max_size;
  uint32_t grid_max_size;
  uint64_t local_mem_size;
  uint64_t hive_id;
  uint64_t gpu_id;
  rocprofiler_dim3_t workgroup_max_dim;
  rocprofiler_dim3_t grid_max_dim;
  const rocprofiler_agent_mem_bank_t* mem_banks;
  const void* caches;
  const void* io_links;
  const char* name; /* gfx942, ... */
  const char* vendor_name;
  const char* product_name;
  const char* model_name;
  uint32_t node_id;
  int32_t logical_node_id;
  int32_t logical_node_type_id; /* n-th agent of its type: what *_VISIBLE_DEVICES index */
  int32_t reserved_padding0;
} rocprofiler_agent_v0_t;

typedef struct rocprofiler_client_id_t {
  const char* name;
  const uint32_t handle;
} rocprofiler_client_id_t;

typedef void (*rocprofiler_client_finalize_t)(rocprofiler_client_id_t);
typedef int (*rocprofiler_tool_initialize_t)(rocprofiler_client_finalize_t finalize_func, void* tool_data);
typedef void (*rocprofiler_tool_finalize_t)(void* tool_data);

typedef struct rocprofiler_tool_configure_result_t {
  size_t size;
  rocprofiler_tool_initialize_t initialize;
  rocprofiler_tool_finalize_t finalize;
  void* tool_data;
} rocprofiler_tool_configure_result_t;

typedef rocprofiler_tool_configure_result_t* (*rocprofiler_configure_func_t)(uint32_t version, const char* runtime_version,
                                                                              uint32_t priority,
                                                                              rocprofiler_client_id_t* client_id);

typedef void (*rocprofiler_buffer_tracing_cb_t)(rocprofiler_context_id_t context, rocprofiler_buffer_id_t buffer_id,
                                                rocprofiler_record_header_t** headers, size_t num_headers, void* data,
                                                uint64_t drop_count);
typedef void (*rocprofiler_callback_tracing_cb_t)(rocprofiler_callback_tracing_record_t record,
                                                  rocprofiler_user_data_t* user_data, void* callback_data);
typedef int (*rocprofiler_callback_tracing_kind_operation_cb_t)(rocprofiler_callback_tracing_kind_t kind,
                                                                rocprofiler_tracing_operation_t operation, void* data);
typedef rocprofiler_status_t (*rocprofiler_query_available_agents_cb_t)(rocprofiler_agent_version_t version,
                                                                        const void** agents, size_t num_agents,
                                                                        void* user_data);

/* The functions, as pointer types: the backend resolves each with dlsym. */
typedef rocprofiler_status_t (*rocprofiler_force_configure_fn)(rocprofiler_configure_func_t configure_func);
typedef rocprofiler_status_t (*rocprofiler_is_initialized_fn)(int* status);
typedef rocprofiler_status_t (*rocprofiler_get_version_fn)(uint32_t* major, uint32_t* minor, uint32_t* patch);
typedef rocprofiler_status_t (*rocprofiler_get_timestamp_fn)(rocprofiler_timestamp_t* ts);
typedef const char* (*rocprofiler_get_status_string_fn)(rocprofiler_status_t status);
typedef rocprofiler_status_t (*rocprofiler_create_context_fn)(rocprofiler_context_id_t* context_id);
typedef rocprofiler_status_t (*rocprofiler_start_context_fn)(rocprofiler_context_id_t context_id);
typedef rocprofiler_status_t (*rocprofiler_create_buffer_fn)(rocprofiler_context_id_t context, size_t size,
                                                             size_t watermark, rocprofiler_buffer_policy_t policy,
                                                             rocprofiler_buffer_tracing_cb_t callback,
                                                             void* callback_data, rocprofiler_buffer_id_t* buffer_id);
typedef rocprofiler_status_t (*rocprofiler_flush_buffer_fn)(rocprofiler_buffer_id_t buffer_id);
typedef rocprofiler_status_t (*rocprofiler_configure_buffer_tracing_service_fn)(
    rocprofiler_context_id_t context_id, rocprofiler_buffer_tracing_kind_t kind,
    const rocprofiler_tracing_operation_t* operations, size_t operations_count, rocprofiler_buffer_id_t buffer_id);
typedef rocprofiler_status_t (*rocprofiler_configure_callback_tracing_service_fn)(
    rocprofiler_context_id_t context_id, rocprofiler_callback_tracing_kind_t kind,
    const rocprofiler_tracing_operation_t* operations, size_t operations_count,
    rocprofiler_callback_tracing_cb_t callback, void* callback_args);
typedef rocprofiler_status_t (*rocprofiler_iterate_callback_tracing_kind_operations_fn)(
    rocprofiler_callback_tracing_kind_t kind, rocprofiler_callback_tracing_kind_operation_cb_t callback, void* data);
typedef rocprofiler_status_t (*rocprofiler_query_callback_tracing_kind_operation_name_fn)(
    rocprofiler_callback_tracing_kind_t kind, rocprofiler_tracing_operation_t operation, const char** name,
    uint64_t* name_len);
typedef rocprofiler_status_t (*rocprofiler_query_available_agents_fn)(rocprofiler_agent_version_t version,
                                                                      rocprofiler_query_available_agents_cb_t callback,
                                                                      size_t agent_size, void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* PROTON_ROCPROFILER_SDK_API_H */
