// CUPTI and the CUDA driver, both loaded with dlopen at run time (never
// linked), so one build serves libcupti from CUDA 12 and 13.
#pragma once

#include <cstdint>
#include <map>
#include <string>

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

}  // namespace proton_cupti
