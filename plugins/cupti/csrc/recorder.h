// The CUPTI-independent heart of the backend: per-launch bookkeeping (thread
// context -> trie node, correlation id -> (epoch, node)) and the aggregation
// of kernel records.  CUPTI's callbacks (profiler.cc) and the test-only
// bindings (testing.cc, PROTON_CUPTI_TESTING builds) drive the very same
// functions, so the CPU tests exercise the real code path.
#pragma once

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace proton_cupti {

constexpr uint32_t kNodeContext = 0;
constexpr uint32_t kNodeFrame = 1;
constexpr uint32_t kNodeCapturedAt = 2;
// A native return address (context="native"): delivered as a kNodeFrame, its name made at flush.
constexpr uint32_t kNodeNativeFrame = 3;
// A frame node's value is (code index << 32 | position); with this bit the
// position is an instruction offset (line computed at flush), else a line.
constexpr uint32_t kLastiBit = 0x80000000u;

// One direct-mapped slot per correlation id modulo the table size.  Ids grow
// monotonically, so a slot is rewritten only after kSlots newer launches.
struct Slot {
  std::atomic<uint32_t> corr{0};
  std::atomic<uint32_t> epoch{0};
  std::atomic<uint32_t> node{0};
  std::atomic<uint32_t> tid{0};
};
struct SlotTime {
  std::atomic<uint64_t> launch_ns{0};
};

struct NodeKey {
  uint32_t parent;
  uint32_t kind;
  uint64_t value;
  bool operator==(const NodeKey& o) const { return parent == o.parent && kind == o.kind && value == o.value; }
};
struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const {
    uint64_t h = k.value * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t(k.parent) << 2 | k.kind) + 0x7F4A7C15ull + (h << 6) + (h >> 2);
    return size_t(h);
  }
};

struct AggKey {
  uint32_t epoch, node, name, device;
  bool operator==(const AggKey& o) const {
    return epoch == o.epoch && node == o.node && name == o.name && device == o.device;
  }
};
struct AggKeyHash {
  size_t operator()(const AggKey& k) const {
    uint64_t a = (uint64_t(k.epoch) << 32 | k.node) * 0x9E3779B97F4A7C15ull;
    uint64_t b = (uint64_t(k.name) << 32 | k.device) * 0xC2B2AE3D27D4EB4Full;
    return size_t(a ^ (b >> 7) ^ (b << 11));
  }
};
struct AggVal {
  uint64_t time_ns = 0;
  uint64_t count = 0;
};

struct Event {
  uint32_t epoch, node, name, device, stream, tid;
  uint64_t start, end, launch;
};

// A Python code object we saw in a launch's frames; the strong reference
// keeps its address from being reused by another code object.
struct CodeInfo {
  PyObject* code;
  bool internal;
};

class Recorder {
 public:
  static constexpr uint32_t kSlotBits = 19;
  static constexpr uint32_t kSlots = 1u << kSlotBits;

  Recorder();

  // ---- called by the core (through the bindings) ----
  void reset();  // a fresh trie and tables: the core forgets nodes on restart
  void configure(bool python_frames, bool trace, std::vector<std::string> internal_dirs,
                 std::vector<std::string> internal_files);
  // context="native": each launch's native call stack below the thread's context (native_stack.h).
  void set_native_frames(bool on);
  bool native_frames() const { return native_frames_.load(std::memory_order_relaxed); }
  // Forgets what each return address was found to be (a library unloaded since may have left its
  // addresses to another one): looked up again from the next launch on.
  void forget_native_addresses();
  void set_epoch(uint32_t epoch) {
    switch_every_.store(0, std::memory_order_relaxed);  // the core re-arms switching for the new epoch
    epoch_.store(epoch, std::memory_order_release);
    if (epoch > max_epoch_.load(std::memory_order_relaxed)) max_epoch_.store(epoch, std::memory_order_relaxed);
  }
  // mode="periodic_flushing:launches=N": after every `every` launches recorded from now on, the epoch
  // moves on by one by itself, up to `last` (the core reserved the numbers up to it).  A burst of
  // launches faster than the core's poll still ends its phases at N, not at the next poll.
  void switch_epochs(uint32_t every, uint32_t last) {
    switch_left_.store(every, std::memory_order_relaxed);
    switch_last_.store(last, std::memory_order_relaxed);
    switch_every_.store(last > epoch_.load(std::memory_order_relaxed) ? every : 0, std::memory_order_release);
  }
  uint32_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // The newest epoch the core ever set since reset: the core retires every older one after a
  // complete flush (PC sampling must then deliver nothing more for them).
  uint32_t max_epoch() const { return max_epoch_.load(std::memory_order_relaxed); }
  static void set_context(uint64_t ctx);
  static uint64_t context();  // the calling thread's, as last set
  // A native scope source that opens its scopes lazily (the torch plugin) names the context of each
  // launch itself: given the thread's context as last set, it returns the one the launch goes under.
  using ContextProvider = uint64_t (*)(uint64_t);
  static void set_provider(ContextProvider provider);

  // ---- hot path: a launch API entered on the calling thread ----
  inline void on_launch(uint32_t corr) {
    Slot& s = slots_[corr & (kSlots - 1)];
    uint32_t e = epoch_.load(std::memory_order_acquire);
    if (e == 0) {  // nobody listens: mark the slot so the record is not counted as lost
      s.epoch.store(0, std::memory_order_relaxed);
      s.corr.store(corr, std::memory_order_release);
      return;
    }
    record_launch(s, corr, e);
  }

  // ---- graph nodes (CUPTI resource callbacks) ----
  void on_graph_node_created(uint64_t node_id);
  void on_graph_node_cloned(uint64_t node_id, uint64_t original_id);

  // ---- activity: one kernel record (buffer-completed callback) ----
  void on_kernel(uint32_t corr, const char* name, uint32_t device, uint32_t stream, uint64_t start,
                 uint64_t end, uint64_t graph_node_id);
  void add_dropped(uint64_t n) { dropped_.fetch_add(n, std::memory_order_relaxed); }

  // Totals since the last reset, for diagnostics (the soak benchmark): every
  // kernel record CUPTI delivered, and where the ones not aggregated went.
  struct Stats {
    uint64_t records, unsessioned, unmatched, zero_time, uncaptured_graph;
  };
  Stats stats() const {
    return Stats{records_.load(std::memory_order_relaxed), unsessioned_.load(std::memory_order_relaxed),
                 unmatched_.load(std::memory_order_relaxed), zero_time_.load(std::memory_order_relaxed),
                 uncaptured_graph_.load(std::memory_order_relaxed)};
  }

  // ---- flush: everything since the last one, as plain data ----
  struct NodeOut {
    uint32_t id, parent, kind;
    uint64_t ctx;       // kNodeContext
    std::string frame;  // kNodeFrame
  };
  struct RecordOut {
    uint32_t epoch, node;
    std::string kernel;
    uint32_t device;
    uint64_t time_ns, count;
  };
  struct EventOut {
    uint32_t epoch, node;
    std::string kernel;
    uint32_t device, stream;
    uint64_t start, end, launch;
    uint32_t tid;
  };
  struct FlushOut {
    std::vector<NodeOut> nodes;
    std::vector<RecordOut> records;
    std::vector<EventOut> events;
    uint64_t dropped = 0;
    std::vector<uint32_t> devices;
  };
  // Collects aggregated state; frame names are built here, so the GIL must be held.
  FlushOut flush();

#ifdef PROTON_CUPTI_TESTING
  size_t node_count();  // trie size, for the tests' growth checks
#endif

 private:
  void record_launch(Slot& s, uint32_t corr, uint32_t epoch);
  void count_for_switch(uint32_t every);
  uint32_t current_node();  // the calling thread's chain, interned
  uint32_t raw_frames_node(uint32_t generation, uint64_t ctx);
  uint32_t locked_frames_node(uint64_t ctx);
  uint32_t native_frames_node(uint32_t generation, uint32_t base);
  unsigned native_class(uintptr_t ret);
  std::string native_name(uintptr_t ret);
  uint32_t intern_locked(uint32_t parent, uint32_t kind, uint64_t value);
  uint32_t code_index_locked(PyObject* code);
  uint32_t reroot(uint32_t launch_node, uint32_t captured_node);
  uint32_t name_id_locked(const char* name);
  bool is_internal(const std::string& filename) const;

  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> max_epoch_{0};
  std::atomic<uint32_t> switch_every_{0};  // 0: epochs change only through set_epoch
  std::atomic<int64_t> switch_left_{0};    // launches left before the next switch
  std::atomic<uint32_t> switch_last_{0};
  std::atomic<bool> python_frames_{false};
  std::atomic<bool> native_frames_{false};
  std::atomic<bool> trace_{false};
  std::atomic<uint32_t> generation_{1};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> records_{0}, unsessioned_{0}, unmatched_{0}, zero_time_{0};
  // Kernels of graph nodes created while nobody profiled (a graph captured before start): no <captured_at>.
  std::atomic<uint64_t> uncaptured_graph_{0};

  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<SlotTime[]> slot_times_;  // only while tracing

  // Trie of call paths; node id = index + 1 (0 is the root).
  std::mutex trie_mu_;
  std::vector<NodeKey> nodes_;
  std::unordered_map<NodeKey, uint32_t, NodeKeyHash> node_index_;
  size_t nodes_exported_ = 0;
  std::vector<CodeInfo> codes_;
  std::unordered_map<PyObject*, uint32_t> code_index_;
  std::unordered_map<uint64_t, uint32_t> reroot_cache_;  // (launch << 32 | captured) -> node
  std::vector<std::string> internal_dirs_, internal_files_;

  // Native frames: what each return address is, looked up once (dladdr), never with the trie lock held.
  std::mutex native_mu_;
  std::unordered_map<uintptr_t, unsigned> native_classes_;
  std::unordered_map<uintptr_t, std::string> native_names_;

  // Graph node id -> node of the path where it was captured/created.
  std::mutex graph_mu_;
  std::unordered_map<uint64_t, uint32_t> graph_nodes_;

  // Aggregation.
  std::mutex agg_mu_;
  std::unordered_map<std::string, uint32_t> name_index_;
  std::vector<std::string> names_;
  std::unordered_map<AggKey, AggVal, AggKeyHash> agg_;
  std::vector<Event> events_;
  std::vector<uint32_t> devices_seen_;
};

Recorder& recorder();
uint64_t monotonic_ns();

}  // namespace proton_cupti
