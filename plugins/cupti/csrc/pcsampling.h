// Instruction (PC) sampling through CUPTI's PC Sampling API (cuptiPCSampling*),
// for start(mode="pcsampling").  Two halves:
//
//  * the Store and the LineMapper: pure bookkeeping, no CUPTI call of their own
//    (the line lookup takes CUPTI's correlation function as an argument), so the
//    CPU tests drive them with sample buffers they build (testing.cc);
//  * the Sampler functions (start/stop/collect and the callback hooks): the
//    CUPTI side, per CUDA context.
//
// Samples never stay raw: every buffer CUPTI hands over is folded at once into
// counts per distinct PC, and those into counts per (epoch, call-path node,
// kernel, device, source line) when they are attributed.  Attribution uses
// the kernel activity records (the Recorder calls note_kernel for each):
//   serialized collection: the samples of correlation id C and function F go
//     to the record(s) of C and F, i.e. to the very launch (exact; a CUDA
//     graph replay's records carry the capture path, as for kernel time);
//   continuous collection: CUPTI gives no correlation id; the samples of F on
//     a device go to the (path, kernel) keys of F's records since F was last
//     attributed, split in proportion to their GPU time (exact when one path
//     launched F; documented as an approximation otherwise).
#pragma once

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace proton_cupti {
namespace pcs {

enum Collection : int { kOff = 0, kContinuous = 1, kSerialized = 2 };
enum Kernels : int { kKernelsAuto = 0, kKernelsConcurrent = 1, kKernelsSerial = 2 };

// ------------------------------------------------------------ pure helpers ----
// "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "stall_long_scoreboard";
// other "smsp__pcsamp_<x>" -> "stall_<x>"; anything else -> "stall_<name>".
std::string stall_metric_name(const std::string& cupti_name);
// "_not_issued" reasons count a subset of their base reason's samples (the
// samples in which no instruction was issued), so they stay out of `samples`.
bool stall_not_issued(const std::string& cupti_name);
// "<dir>/<file>:<line>" (dir left out when empty or file is absolute); "" when
// line is 0 or file is empty (no line information).
std::string source_line_name(uint32_t line, const char* file, const char* dir, const char* function);
// "sass+0x<hex offset>": a PC without line information, by its function offset.
std::string sass_name(uint64_t pc_offset);
// Whether an ELF cubin has a line table (.debug_line or .nv_debug_line_sass).
bool cubin_has_line_info(const void* data, size_t size);
// `count` split over `weights` by largest remainder: the shares sum to count,
// ties go to the lower index; all-zero weights split evenly.
std::vector<uint64_t> split_count(uint64_t count, const std::vector<uint64_t>& weights);

using Correlate = CUptiResult(CUPTIAPI*)(CUpti_GetSassToSourceCorrelationParams*);

// (metric slot, count), sorted by slot.
using Counts = std::vector<std::pair<uint32_t, uint64_t>>;

// ---------------------------------------------------------- line mapping ----
// Cubins kept by CUPTI's CRC (only those with a line table: the others would
// only ever give SASS offsets), and the line of every (cubin, function, PC)
// asked once.
class LineMapper {
 public:
  bool add_cubin(uint64_t crc, const void* data, size_t size);  // true when kept
  // Line node name of a PC; `fn` is the Store's id of `function` (cache key).
  std::string resolve(uint64_t crc, uint32_t fn, const std::string& function, uint64_t pc, Correlate correlate);
  void clear_cache();  // function ids change when the Store resets
  size_t cubins();
  size_t cubin_bytes();
  size_t cached();

 private:
  struct Key {
    uint64_t crc, pc;
    uint32_t fn;
    bool operator==(const Key& o) const { return crc == o.crc && pc == o.pc && fn == o.fn; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, std::string> cubins_;
  std::unordered_map<Key, std::string, KeyHash> cache_;
};

// ------------------------------------------------------------ the store ----
class Store {
 public:
  void reset(int collection);  // kOff: kernel records are not noted
  int collection() const { return collection_.load(std::memory_order_relaxed); }

  // Metric slot of a CUPTI stall reason name (interned across contexts).
  uint32_t slot(const std::string& cupti_name);

  // One buffer CUPTI filled (GetData, a range end, or a test's): counts per
  // distinct (scope, cubin, PC, device, function); `slots` maps CUPTI's stall
  // reason index of the context to metric slots.
  void ingest(const CUpti_PCSamplingData& data, uint32_t device,
              const std::unordered_map<uint32_t, uint32_t>& slots);

  // A kernel activity record and the key the Recorder filed it under (epoch 0:
  // launched while no session listened; its share of samples is dropped).
  void note_kernel(uint32_t corr, const char* name, uint32_t device, uint32_t epoch, uint32_t node,
                   uint64_t time_ns);

  // Moves pending samples to the output, split over the noted records.  With
  // `final` every record of every earlier launch has been noted: samples still
  // without one are dropped (counted), and the window of records is cleared.
  void attribute(LineMapper& lines, Correlate correlate, bool final);
  // After a complete flush the core retires every epoch older than the one current at its start:
  // shares of samples for those epochs are dropped from then on (counted as late), never delivered.
  void retire_below(uint32_t epoch);

  struct Out {
    uint32_t epoch, node;
    std::string kernel;
    uint32_t device;
    std::string line;
    std::vector<std::pair<std::string, uint64_t>> metrics;  // samples, then stall_* in slot order
  };
  std::vector<Out> take();  // what was attributed since the last take

  struct Stats {
    uint64_t pc_records = 0, samples_in = 0, attributed = 0, unsessioned = 0, unattributed = 0, late = 0;
    uint64_t total_samples = 0, dropped_samples = 0, non_user_samples = 0, buffers = 0;
    uint64_t pending_samples = 0;
    size_t pending_keys = 0, window_keys = 0, last_keys = 0, out_keys = 0, functions = 0, lines = 0;
    std::vector<std::string> metrics;
  };
  Stats stats();

 private:
  struct PcKey {
    uint64_t scope, crc, pc;
    uint32_t device, fn;
    bool operator==(const PcKey& o) const {
      return scope == o.scope && crc == o.crc && pc == o.pc && device == o.device && fn == o.fn;
    }
  };
  struct GroupKey {
    uint64_t scope;
    uint32_t fn;
    bool operator==(const GroupKey& o) const { return scope == o.scope && fn == o.fn; }
  };
  struct OutKey {
    uint32_t epoch, node, fn, device, line;
    bool operator==(const OutKey& o) const {
      return epoch == o.epoch && node == o.node && fn == o.fn && device == o.device && line == o.line;
    }
  };
  struct Hash {
    size_t operator()(const PcKey& k) const;
    size_t operator()(const GroupKey& k) const;
    size_t operator()(const OutKey& k) const;
  };
  struct Weight {
    uint64_t time_ns = 0, count = 0;
    uint32_t device = 0;
  };
  using Weights = std::map<uint64_t, Weight>;  // (epoch << 32 | node) -> weight, ordered: deterministic splits

  uint32_t fn_locked(const char* name);
  uint32_t line_locked(const std::string& name);
  uint64_t base_sum(const Counts& c) const;  // mu_ held

  std::atomic<int> collection_{kOff};
  std::mutex attr_mu_;  // one attribution at a time (last_ and line lookups)
  std::mutex mu_;       // everything below
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_index_;
  std::unordered_map<const void*, uint32_t> name_by_ptr_;
  std::vector<std::string> lines_;
  std::unordered_map<std::string, uint32_t> line_index_;
  std::vector<std::string> metrics_;
  std::vector<bool> base_;
  std::unordered_map<std::string, uint32_t> metric_index_;
  std::unordered_map<PcKey, Counts, Hash> pending_;
  std::unordered_map<GroupKey, Weights, Hash> window_;
  std::unordered_map<GroupKey, Weights, Hash> last_;  // continuous: the split used last, per (device, function)
  std::unordered_map<OutKey, Counts, Hash> out_;
  uint32_t retired_below_ = 0;
  Stats stats_;
};

Store& store();
LineMapper& lines();

// ------------------------------------------------------------- sampler ----
struct Options {
  int collection = kContinuous;
  uint32_t period = 10;       // CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD: 2^period cycles
  uint32_t drain_ms = 100;    // drain thread interval
  int kernels = kKernelsAuto;
  bool restart = true;        // continuous: stop and start the range at each complete flush
  bool restart_each_drain = true;  // continuous: ...and at each drain tick, so the hardware buffer empties
  size_t scratch_bytes = 16u << 20;
  size_t hardware_bytes = 512u << 20;  // CUPTI's own default; it fills in ~0.1 s of dense kernels at interval 10
  size_t pcs_per_get = 4096;
};

struct StartError {
  int code = 0;     // CUptiResult, or < 0: -1 libcupti too old, -2 symbol missing, -3 no device
  int device = -1;  // the device whose context failed, -1 unknown
  std::string what, detail;
};

// The profiler's side, given to start: its subscriber and a way to switch the
// kernel activity kind (CONCURRENT_KERNEL <-> KERNEL) with its state lock held.
struct Host {
  CUpti_SubscriberHandle subscriber = nullptr;
  bool (*use_serial_kernels)(bool serial) = nullptr;
};

extern std::atomic<bool> g_on;
inline bool sampling_on() { return g_on.load(std::memory_order_relaxed); }

StartError start(const Options& options, const Host& host);  // code 0: running
void stop(CUpti_SubscriberHandle subscriber);                // disables every context; idempotent
// Drains every context and attributes; `epoch_at_start` (the newest epoch when the flush began) is
// what a complete flush lets the core retire below.
void collect(bool complete, uint32_t epoch_at_start);
bool register_cubin(const void* data, size_t size);          // keeps it (by CRC) when it has line info
void release_function_names();                               // after cuptiFinalize: free CUPTI's name strings
bool kernels_serial();
Correlate correlate_function();  // cuptiGetSassToSourceCorrelation of the loaded libcupti, or nullptr

// Callback hooks (profiler.cc calls them only while sampling_on()).
void on_launch_enter(CUcontext ctx);
void on_launch_exit(CUcontext ctx);
void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* data);

struct SamplerStats {
  bool on = false, kernels_serial = false;
  int collection = 0;
  uint32_t period = 0;
  size_t contexts = 0, function_names = 0;
  uint64_t enable_failures = 0, get_errors = 0, hardware_full = 0, restarts = 0, drains = 0;
  uint64_t staging_reads = 0;  // drains that read the configured buffer directly (GetData left records there)
  std::string last_error;
  std::vector<std::string> stall_reasons;  // CUPTI's names, of the first context
};
SamplerStats sampler_stats();

}  // namespace pcs
}  // namespace proton_cupti
