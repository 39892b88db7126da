// The ROCm-independent heart of the AMD backend: correlation id -> (epoch, call-path node) at each
// launch, and dispatch records aggregated per (epoch, node, kernel, device).  rocprofiler-sdk's
// callbacks (sdk.cc) and the test bindings drive the same functions.
//
// Same design as the CUPTI backend's recorder (decision 0290 says why it is a second one): a
// direct-mapped slot table written on the launching thread without a lock, the calling thread's
// core context id in a thread-local, a trie of call paths interned under one mutex, and the
// aggregation table swapped out at flush.
#pragma once

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace proton_roc {

constexpr uint32_t kNodeContext = 0;
constexpr uint32_t kNodeFrame = 1;
constexpr uint32_t kNodeCapturedAt = 2;

uint64_t monotonic_ns();

class Recorder {
 public:
  static constexpr uint32_t kSlotBits = 18;
  static constexpr uint32_t kSlots = 1u << kSlotBits;

  Recorder();

  // ---- called by the core through the bindings ----
  void reset();
  void configure(bool python_frames, bool trace, std::vector<std::string> internal_dirs,
                 std::vector<std::string> internal_files);
  void set_epoch(uint32_t epoch);
  void switch_epochs(uint32_t every, uint32_t last);
  uint32_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  static void set_context(uint64_t ctx);
  static uint64_t context();
  using ContextProvider = uint64_t (*)(uint64_t);
  static void set_provider(ContextProvider provider);

  // ---- hot path: the kernel-dispatch ENTER callback on the launching thread ----
  // `key` names one dispatch: the SDK's dispatch id (the correlation id is shared by every kernel of
  // a HIP graph launch).
  void on_launch(uint64_t key);

  // ---- HIP graphs (HIP runtime API callbacks): kernels captured into a graph keep the path where
  // they were captured; each launch of the graph files its n-th dispatch under
  // <launch path>/<captured_at>/<path of the graph's n-th captured kernel> ----
  void on_capture_begin(uint64_t stream);
  void on_capture_launch(uint64_t stream);  // a kernel-launch call on the calling thread
  void on_capture_end(uint64_t stream, uint64_t graph);
  void on_instantiate(uint64_t graph, uint64_t exec);
  void on_graph_launch(uint64_t exec, bool enter);  // around hipGraphLaunch, on the calling thread

  // ---- the SDK's other callbacks ----
  void on_kernel_symbol(uint64_t kernel_id, const char* name);
  // One completed dispatch; start/end already in CLOCK_MONOTONIC ns, device the physical GPU index.
  void on_dispatch(uint64_t key, uint64_t kernel_id, uint32_t device, uint64_t queue, uint64_t start, uint64_t end);
  void add_dropped(uint64_t n) {  // records the SDK itself dropped (its buffer callback's drop_count)
    dropped_.fetch_add(n, std::memory_order_relaxed);
    sdk_dropped_.fetch_add(n, std::memory_order_relaxed);
  }

  struct Stats {
    uint64_t launches, records, unsessioned, unmatched, zero_time, sdk_dropped;
  };
  Stats stats() const;

  struct NodeOut {
    uint32_t id, parent, kind;
    uint64_t ctx;
    std::string frame;
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
    uint32_t device;
    uint64_t queue, start, end, launch;
    uint32_t tid;
  };
  struct FlushOut {
    std::vector<NodeOut> nodes;
    std::vector<RecordOut> records;
    std::vector<EventOut> events;
    uint64_t dropped = 0;
    std::vector<uint32_t> devices;
  };
  FlushOut flush();  // the GIL must be held (frame names)

 private:
  struct Slot {
    std::atomic<uint64_t> corr{0};
    std::atomic<uint32_t> epoch{0};
    std::atomic<uint32_t> node{0};
    std::atomic<uint32_t> tid{0};
    std::atomic<uint64_t> launch_ns{0};
  };
  struct NodeKey {
    uint32_t parent, kind;
    uint64_t value;
    bool operator==(const NodeKey& o) const { return parent == o.parent && kind == o.kind && value == o.value; }
  };
  struct NodeKeyHash {
    size_t operator()(const NodeKey& k) const {
      uint64_t h = (k.value + 0x632BE59BD9B4E019ull) * 0x9E3779B97F4A7C15ull;
      return size_t(h ^ (uint64_t(k.parent) << 1 | k.kind) * 0xC2B2AE3D27D4EB4Full);
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
      return size_t(a ^ (b >> 5) ^ (b << 13));
    }
  };
  struct AggVal {
    uint64_t time_ns = 0, count = 0;
  };
  struct Event {
    uint32_t epoch, node, name, device, tid;
    uint64_t queue, start, end, launch;
  };

  uint32_t current_node();
  uint32_t frames_node(uint64_t ctx);
  uint32_t intern_locked(uint32_t parent, uint32_t kind, uint64_t value);
  uint32_t code_index_locked(PyObject* code);
  uint32_t name_id_locked(uint64_t kernel_id);
  uint32_t reroot(uint32_t launch_node, uint32_t captured_node);
  bool is_internal(const std::string& filename) const;
  void count_for_switch(uint32_t every);

  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> switch_every_{0};
  std::atomic<int64_t> switch_left_{0};
  std::atomic<uint32_t> switch_last_{0};
  std::atomic<bool> python_frames_{false};
  std::atomic<bool> trace_{false};
  std::atomic<uint32_t> generation_{1};
  std::atomic<uint64_t> dropped_{0}, sdk_dropped_{0};
  std::atomic<uint64_t> launches_{0}, records_{0}, unsessioned_{0}, unmatched_{0}, zero_time_{0};

  std::unique_ptr<Slot[]> slots_;

  std::mutex trie_mu_;
  std::vector<NodeKey> nodes_;
  std::unordered_map<NodeKey, uint32_t, NodeKeyHash> node_index_;
  size_t nodes_exported_ = 0;
  std::vector<PyObject*> codes_;
  std::vector<bool> code_internal_;
  std::unordered_map<PyObject*, uint32_t> code_index_;
  std::vector<std::string> internal_dirs_, internal_files_;

  // HIP graphs: streams being captured -> path nodes of their kernel launches, in order; graphs and
  // their executable instances -> those paths.
  std::mutex graph_mu_;
  std::atomic<int> capturing_{0};
  std::unordered_map<uint64_t, std::vector<uint32_t>> captures_;
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<uint32_t>>> graphs_, execs_;
  std::unordered_map<uint64_t, uint32_t> reroot_cache_;

  std::mutex agg_mu_;
  std::unordered_map<uint64_t, std::string> symbols_;  // kernel id -> name, from code-object callbacks
  std::unordered_map<uint64_t, uint32_t> kernel_name_id_;
  std::vector<std::string> names_;
  std::unordered_map<AggKey, AggVal, AggKeyHash> agg_;
  std::vector<Event> events_;
  std::vector<uint32_t> devices_seen_;
};

Recorder& recorder();

}  // namespace proton_roc
