// CUPTI and the CUDA driver, both loaded with dlopen at run time (never
// linked), so one build serves libcupti from CUDA 12 and 13.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pcsampling.h"

namespace proton_cupti {

// Loads libcupti from `path` (a file name, or a soname for the loader path).
// Returns "" on success, else why it failed.  Loading twice is a no-op.
std::string load_cupti(const std::string& path);
std::string cupti_path();  // what was loaded, "" if nothing

// Subscribe to launch and graph callbacks and enable kernel activity.
// Throws std::runtime_error with CUPTI's message on failure.  Without
// graph_nodes, replayed graph kernels lose their capture path (diagnostics).
void start_profiling(bool graph_nodes = true);
// Flush outstanding records, disable activity, unsubscribe and (detach)
// detach CUPTI from the process with cuptiFinalize.
void stop_profiling(bool detach = true);
// Once a CUDA graph was launched while attached, CUPTI keeps ~32 B for every
// later launch until it is detached.  When that happened and at least
// min_records kernel records came since the last attach: detach (cuptiFinalize)
// and attach again, every record delivered first.  Returns the nanoseconds
// CUPTI was not attached (launches from other threads then go unseen), 0 if
// nothing was done.
uint64_t reattach_if_due(uint64_t min_records);
// Wait for the current context's kernels, then make CUPTI hand over every
// buffer (records land in the Recorder).  Safe when nothing was started.
void flush_activity(bool complete);  // complete: sync, then every record (forced)

// {arch, num_sms, clock_rate, memory_clock_rate, bus_width} of a device
// ordinal through libcuda.so.1; empty when the driver cannot answer.
std::map<std::string, std::string> device_info(uint32_t ordinal);
std::string device_name(uint32_t ordinal);  // "" when the driver cannot answer

// ---- PC sampling (mode="pcsampling", pcsampling.cc) ----
// Starts sampling on the attached subscriber (start_profiling first); code 0
// on success, else what failed, with nothing left enabled.
pcs::StartError start_pcsampling(const pcs::Options& options);
uint32_t cupti_version();  // cuptiGetVersion, 0 when unknown

// What pcsampling.cc needs from the loaded libraries.
void* cupti_symbol(const char* name);  // dlsym in the loaded libcupti, nullptr if absent
std::string cupti_error_text(CUptiResult r);
CUcontext current_context();
std::vector<CUcontext> live_contexts();  // the calling thread's current context and every active primary one
bool push_context(CUcontext ctx);        // make ctx current on this thread (pop_context undoes it)
void pop_context();
CUcontext retain_primary(int ordinal);   // cuInit + cuDevicePrimaryCtxRetain; nullptr on failure
void release_primary(int ordinal);
int device_count();

}  // namespace proton_cupti
