// What every part of the extension shares: its constants, its switches and counters, the channels to the
// backends, and each thread's state (its open frames and caches), reached through one TLS pointer.
//
// Definitions: thread_state.cc, except g_channels/g_nchannels (launch_provider.cc), apply_unobserved
// (record_callbacks.cc) and ~ThreadState (autograd_records.cc, which owns the rings).
#pragma once

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include <ATen/record_function.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "timing.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// The first of our context ids: the range the core reserved for this plugin (set_first_id, core_scopes.cc).
extern std::atomic<uint64_t> g_first_id;

constexpr size_t kMaxNameBytes = 1024;             // longer names (shapes) are cut
constexpr int kMaxChannels = 8;
constexpr size_t kCacheSlots = 1024;        // per-thread (parent, name) -> id cache
constexpr size_t kSeqSlots = size_t(1) << 15;  // per-forward-thread ring: seqNr -> forward op context
constexpr size_t kMaxEvents = 10000000;     // trace events kept until a session takes them

// What a backend exposes so native code can set the calling thread's context without Python.
struct NativeContext {
  uint32_t version;  // 1, or 2 with set_provider
  void (*set)(uint64_t context_id);
  uint64_t (*get)();
};
struct NativeContextV2 : NativeContext {
  void (*set_provider)(uint64_t (*provider)(uint64_t));
};

// ------------------------------------------------------------------ state ----
extern std::atomic<bool> g_on;
extern std::atomic<bool> g_shapes;
extern std::atomic<bool> g_tracing;
extern std::atomic<bool> g_providing;  // see "callbacks" (record_callbacks.cc)
// on && providing && !shapes && !tracing: an operator's entry is a push and its exit a pop (refresh_fast).
extern std::atomic<bool> g_fast;

void refresh_fast();
extern std::mutex g_enable_mu;

// Operators that launch nothing, left unobserved (unobserved.cc): while on, not tracing, and ours is the only
// observer; a record that runs another observer too (torch.profiler, say) has every operator observed
// again until the next enable. enable(observe_all=True) (PROTON_TORCH_OBSERVE_ALL=1) keeps them all observed.
extern std::atomic<bool> g_unobserved;
extern bool g_other_observer;  // under g_enable_mu
extern bool g_observe_all;     // under g_enable_mu: enable(observe_all=), at each start
// Bumped whenever an operator is removed from the dispatcher: a schema's address then may come to name another
// operator, so what classify_operator remembered by address is dropped. Its listener is added at the first enable.
extern std::atomic<uint32_t> g_schema_generation;

// Bumped at each enable: a thread's sequence numbers from before it are no business of the sweeps.
extern std::atomic<uint64_t> g_sweep_epoch;

// Hide or show the operators that launch nothing as the state now asks (g_enable_mu held).
void apply_unobserved();

// The running backends' native context setters (set_channels), read by last_set and publish.
extern NativeContext g_channels[kMaxChannels];
extern std::atomic<int> g_nchannels;

extern std::atomic<uint64_t> g_linked;     // backward functions placed under their forward operator
extern std::atomic<uint64_t> g_unlinked;   // backward functions without a known forward operator
extern std::atomic<uint64_t> g_misnested;  // exits that matched no open frame of the thread
extern std::atomic<uint64_t> g_callback_errors;
extern std::atomic<uint64_t> g_dropped_events;

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // time.monotonic_ns()'s clock: trace events line up
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// ------------------------------------------------------- per thread ----
enum Kind : uint8_t {
  kOpen,      // a record not looked at yet: resolved when a launch, a record inside or its exit needs it
  kOp,        // an operator: a context of its own
  kBackward,  // an autograd node's backward function
  kBackwardOpen,  // the same, not looked up yet (enter_backward, providing): ctx holds the node's sequence number
  kPass,      // a record we do not show (views, a re-dispatch of the same operator, wrappers): its parent's
  kModule,    // an nn.Module opened natively (module_enter), rf == nullptr
};

struct Frame {
  const at::RecordFunction* rf;  // nullptr for module frames
  union {
    const void* schema;  // an operator's frame entered on the fast path: its schema's address (classify_operator)
    uint64_t forward_thread;  // kBackwardOpen: the thread of the node's forward operator (Node::thread_id)
  };
  const char* name;  // once resolved: the record's name (valid while it is open)
  uint64_t ctx;      // once resolved: the context of what runs inside
  uint64_t prev;     // publishing: the context to set again at exit
  uint64_t start;    // tracing: entry time
  int64_t seq;       // the record's sequence number (operators autograd sees), -1 for none
  Kind kind;
  bool changed;      // publishing: whether this frame set the thread's context
};

// A thread's open frames: the part of std::vector's interface used here, with a push the compiler inlines
// (std::vector's goes through an out-of-line emplace on every record).
class FrameStack {
 public:
  FrameStack() { grow(); }
  ~FrameStack() { std::free(data_); }
  FrameStack(const FrameStack&) = delete;
  FrameStack& operator=(const FrameStack&) = delete;
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  bool full() const { return size_ == capacity_; }
  Frame& operator[](size_t i) { return data_[i]; }
  const Frame& operator[](size_t i) const { return data_[i]; }
  Frame& back() { return data_[size_ - 1]; }
  void pop_back() { --size_; }
  void push_back(const Frame& f) {
    if (__builtin_expect(size_ == capacity_, 0)) grow();
    data_[size_++] = f;
  }

 private:
  __attribute__((noinline)) void grow() {
    size_t capacity = capacity_ == 0 ? 64 : capacity_ * 2;
    auto* data = static_cast<Frame*>(std::realloc(data_, capacity * sizeof(Frame)));
    if (data == nullptr) throw std::bad_alloc();
    data_ = data;
    capacity_ = capacity;
  }
  Frame* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct CacheSlot {
  uint64_t parent;
  uintptr_t key;     // the name's address, or a hash of a composed name
  const char* name;  // the entry's own copy, compared at each hit
  uint64_t id;
};

// (parent context, operator schema) -> how classify named a frame of that operator there (classify_operator).
struct OperatorSlot {
  uint64_t parent;
  const void* schema;
  const char* name;  // the frame's name as classify set it (the schema's, or the entry's copy: both stay)
  uint64_t id;       // kOp: the frame's context
  uint32_t generation;  // g_schema_generation when filled
  Kind kind;            // kOp or kPass
};

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
    return size_t(p.first * 0x9E3779B97F4A7C15ull ^ (p.second + 0x632BE59BD9B4E019ull));
  }
};

// An nn.Module call open on this thread (see the module hooks below).
enum ModuleKind : uint8_t { kNoScope, kCoreScope, kOwnFrame };
struct ModuleFrame {
  PyObject* module;  // a strong reference (left, not released, if the thread ends with the frame open)
  PyObject* name;    // kOwnFrame: its name, a strong reference (settle opens it as the core's scope); else nullptr
  uint64_t ctx;
  uint64_t generation;
  ModuleKind kind;
};

// Whether a context id of the core's is a plain scope's (plain_context), remembered per thread.
struct PlainSlot {
  uint64_t id;  // the id + 1; 0: empty
  bool plain;
};
constexpr size_t kPlainSlots = 16;

// autograd_records.cc: a forward thread's ring of sequence numbers.
struct SeqRing;

// A reader's last ring lookup: the forward thread, its ring (nullptr: none), the version it was read under.
struct RingCache {
  uint64_t thread = 0;
  SeqRing* ring = nullptr;
  uint64_t version = 0;
};

// A reader's last look at a forward thread's backward call (autograd_records.cc).
struct CallCache {
  uint64_t thread = 0;
  uint64_t value = 0;  // context + 1, 0: none
  uint64_t version = 0;
};

struct ThreadState;
// The calling thread's state (state()); thread_state.cc. __thread, not thread_local: an extern thread_local
// is read through a TLS wrapper check in the files that do not define it.
extern __thread ThreadState* t_fast __attribute__((tls_model("initial-exec")));

struct ThreadState {
  FrameStack frames;
  uint64_t base = 0;     // providing: the thread's context as last set when its outermost frame opened
  std::unique_ptr<CacheSlot[]> cache;
  std::unique_ptr<OperatorSlot[]> operators;  // classify_operator's cache
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint64_t, PairHash> links;  // (B, F) -> link id (B known)
  SeqRing* ring = nullptr;
  int64_t swept = 0;            // sequence numbers below this one are accounted for (sweep)
  uint64_t sweep_epoch = 0;     // the g_sweep_epoch ``swept`` belongs to
  RingCache rings;       // backward: the forward thread's ring, as last looked up
  CallCache calls;       // backward: the forward thread's engine call, as last looked up
  uint64_t rf_tid = 0;   // at::RecordFunction::currentThreadId()
  uint64_t os_tid = 0;
  uint64_t own_ctx = 0;  // the context when no backend offers a setter
  std::string buf;       // composed names (shapes)
  // nn.Module calls (GIL held). What they hold is left, not released, when the thread ends: no GIL there.
  std::vector<ModuleFrame> modules;
  PlainSlot plain[kPlainSlots] = {};     // plain_context's answers

  ~ThreadState();  // gives its ring back (autograd_records.cc)
};

ThreadState& make_state();

inline ThreadState& state() {
  ThreadState* s = t_fast;
  return __builtin_expect(s != nullptr, 1) ? *s : make_state();
}

inline uint64_t rf_thread(ThreadState& ts) {
  if (ts.rf_tid == 0) ts.rf_tid = at::RecordFunction::currentThreadId();
  return ts.rf_tid;
}

inline uint64_t os_thread(ThreadState& ts) {
  if (ts.os_tid == 0) ts.os_tid = uint64_t(syscall(SYS_gettid));
  return ts.os_tid;
}

// The thread's context as last set (by the core's scopes, or by us publishing).
inline uint64_t last_set(ThreadState& ts) {
  int n = g_nchannels.load(std::memory_order_acquire);
  return n > 0 ? g_channels[0].get() : ts.own_ctx;
}

inline void publish(ThreadState& ts, uint64_t ctx) {
  int n = g_nchannels.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) g_channels[i].set(ctx);
  ts.own_ctx = ctx;
}

inline uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

inline uint64_t hash_bytes(const char* s, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(s[i])) * 0x100000001B3ull;
  return h;
}

// Whether a frame's context is still to be looked up (resolve_to).
inline bool unresolved(Kind kind) { return kind == kOpen || kind == kBackwardOpen; }

}  // namespace proton_torch
#pragma GCC visibility pop

