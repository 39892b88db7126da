// rocprofiler-sdk, loaded with dlopen at run time (never linked): configuration as a tool, the one
// profiling context (started once, never stopped), its callbacks and buffer, the agents.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace proton_roc {

// dlopen librocprofiler-sdk from `path` (a file, or a soname for the loader path) and resolve the
// functions of rocprofiler_sdk_api.h.  "" on success (or when already loaded), else why not.
std::string load_sdk(const std::string& path);
std::string sdk_path();
std::string sdk_version();  // "major.minor.patch" of the loaded library, "" if unknown

// Configure Proton as a rocprofiler-sdk tool (rocprofiler_force_configure): the context, the
// kernel-dispatch buffer and the callbacks are made and the context started inside the tool's
// initialize.  Once attached, later calls return at once.  Returns {status, detail}: status 0 when
// attached; ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED (15) when the runtime (or another tool)
// configured rocprofiler-sdk first; else the failing call's status and name.
struct AttachResult {
  int status = 0;
  std::string detail;
};
AttachResult attach();
bool attached();

// Hand over every buffered record.  With `sync`, the calling thread's HIP device and `sync_devices`
// (HIP ordinals) are waited for first, through the program's own libamdhip64 (never loaded here), so
// kernels still running deliver their records; without, only what completed (the periodic writer's
// drain).  Safe before attach.
void flush_records(const std::vector<int>& sync_devices, bool sync);

struct Agent {
  uint64_t handle;
  uint32_t physical;  // logical_node_type_id: the n-th GPU of the machine
  uint32_t node_id;
  std::string name, product;
  uint32_t cu_count, clock_mhz, memory_clock_mhz, bus_width;
};
std::vector<Agent> gpu_agents();  // empty before attach

}  // namespace proton_roc
