// PyTorch operators as Proton contexts, from RecordFunction callbacks: no Python per operator.
//
// While a session with hook="torch" runs, one global RecordFunction callback pair
// (scope FUNCTION only) is registered.  Each record opens a frame on its thread's
// stack.  A frame resolves to (its parent's context, operator name)
// interned into a context id of our own (kFirstId and up, named for the core
// through this module); views, wrappers and re-dispatches resolve to their
// parent's.  Where every running backend takes a context provider (capsule
// "proton.native_context.v1", version 2), an operator's frame is named at its
// entry and nothing is set: a launch asks for the innermost frame's context
// (``provide``).  With a backend of version 1 each frame's id is also set as the
// thread's context, the previous one set again at its exit.
//
// Backward: autograd runs each node inside a FUNCTION record
// "autograd::engine::evaluate_function: X", with the node set as the thread's
// current one (get_current_node): its sequence number and the thread that
// created it.  That record is the node's frame, so torch need not build the
// node's own BACKWARD_FUNCTION record (that scope is not registered).  Forward
// operators that ran with a sequence number remember their context id in a
// ring per forward thread; the node with that number opens under a link
// context L(B, F): B is the context the backward pass was called
// in (published by the Python side around torch.autograd's engine call, else
// the running thread's own), F the forward operator's context.  L is named when
// a profile is built (Python, proton_torch.ops.resolve): F's module and operator
// path, under B.
//
// Operators that launch nothing (views, metadata reads, allocations) are left
// unobserved while no trace and no other observer needs them (unobserved.cc), so
// torch builds no record for them; the nodes they create are linked by the frame
// around them, or by a sweep of the sequence numbers taken outside any frame.
//
// nn.Module calls: global forward pre/post hooks written here (C functions, with
// the GIL) open each module call as a scope of the core's, or, inside one of our
// records, as a frame of ours.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <ATen/SequenceNumber.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "torch_internals.h"
#include "unobserved.h"

#ifndef PROTON_TORCH_BUILT_FOR
#define PROTON_TORCH_BUILT_FOR "unknown"
#endif

using proton_torch::launches_nothing;
using proton_torch_internals::names_operator;
using proton_torch_internals::observer_count;
using proton_torch_internals::operator_schema;
using proton_torch_internals::record_string;

namespace {

constexpr uint64_t kFirstId = uint64_t(1) << 41;  // our ids; the nvtx plugin's start at 2**40
constexpr size_t kMaxNameBytes = 1024;             // longer names (shapes) are cut
constexpr int kMaxChannels = 8;
constexpr size_t kCacheSlots = 1024;        // per-thread (parent, name) -> id cache
constexpr size_t kSeqSlots = size_t(1) << 15;  // per-forward-thread ring: seqNr -> forward op context
constexpr size_t kMaxEvents = 10000000;     // trace events kept until a session takes them
const char kEnginePrefix[] = "autograd::engine::evaluate_function: ";

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
std::atomic<bool> g_on{false};
std::atomic<bool> g_shapes{false};
std::atomic<bool> g_tracing{false};
std::atomic<bool> g_providing{false};  // see "callbacks" below
// on && providing && !shapes && !tracing: an operator's entry is a push and its exit a pop (refresh_fast).
std::atomic<bool> g_fast{false};

void refresh_fast() {
  g_fast.store(g_on.load() && g_providing.load() && !g_shapes.load() && !g_tracing.load());
}
at::CallbackHandle g_handle = at::INVALID_CALLBACK_HANDLE;  // touched with the GIL held only
std::mutex g_enable_mu;

// Operators that launch nothing, left unobserved (unobserved.cc): while on, not tracing, and ours is the only
// observer; a record that runs another observer too (torch.profiler, say) has every operator observed
// again until the next enable. enable(observe_all=True) (PROTON_TORCH_OBSERVE_ALL=1) keeps them all observed.
std::atomic<bool> g_unobserved{false};
bool g_other_observer = false;  // under g_enable_mu
bool g_observe_all = false;     // under g_enable_mu: enable(observe_all=), at each start
// Bumped whenever an operator is removed from the dispatcher: a schema's address then may come to name another
// operator, so what classify_operator remembered by address is dropped. Its listener is added at the first enable.
std::atomic<uint32_t> g_schema_generation{1};

struct SchemaListener final : c10::OpRegistrationListener {
  void onOperatorRegistered(const c10::OperatorHandle&) override {}
  void onOperatorDeregistered(const c10::OperatorHandle&) override { g_schema_generation.fetch_add(1); }
};

void listen_for_removed_operators() {
  static c10::RegistrationHandleRAII* handle = nullptr;  // kept for the process
  if (handle == nullptr)
    handle = new c10::RegistrationHandleRAII(
        c10::Dispatcher::singleton().addRegistrationListener(std::make_unique<SchemaListener>()));
}

// Bumped at each enable: a thread's sequence numbers from before it are no business of the sweeps.
std::atomic<uint64_t> g_sweep_epoch{1};

bool g_null_hide = false;  // the benchmark's null observer asked for the operators that launch nothing hidden

// Hide or show the operators that launch nothing as the state now asks (g_enable_mu held).
void apply_unobserved() {
  bool hide = (g_on.load() && !g_tracing.load() && !g_other_observer && !g_observe_all) || g_null_hide;
  g_unobserved.store(proton_torch::set_unobserved(hide));
}

NativeContext g_channels[kMaxChannels];
std::atomic<int> g_nchannels{0};
// Each channel's set_provider (version 2), or nullptr; touched with the GIL held only.
void (*g_provider_setters[kMaxChannels])(uint64_t (*)(uint64_t)) = {};
int g_nprovider_setters = 0;

std::atomic<uint64_t> g_linked{0};     // backward functions placed under their forward operator
std::atomic<uint64_t> g_unlinked{0};   // backward functions without a known forward operator
std::atomic<uint64_t> g_misnested{0};  // exits that matched no open frame of the thread
std::atomic<uint64_t> g_callback_errors{0};
std::atomic<uint64_t> g_dropped_events{0};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // time.monotonic_ns()'s clock: trace events line up
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// ------------------------------------------------------- diagnostic timing ----
// Built with PROTON_TORCH_TIMING=1 (setup.py): TSC cycles and calls of each entry point of ours, per thread,
// read by timing(). Never in a release build: each timed call pays two rdtsc.
#ifdef PROTON_TORCH_TIMING
enum TimedPart { kTimedEnter, kTimedExit, kTimedProvide, kTimedModuleEnter, kTimedModuleExit, kTimedBackwardCall,
                 kTimedEngineRecord, kTimedClassifyName, kTimedClassifyLookup, kTimedModuleName, kTimedFastOpen,
                 kTimedFastClose, kTimedSetters, kTimedNothing, kTimedParts };
const char* const kTimedNames[] = {"enter", "exit", "provide", "module_enter", "module_exit", "backward_call",
                                   "engine_record", "(classify_name)", "(classify_lookup)", "(module_name)",
                                   "(fast_open)", "(fast_close)", "(setters)", "(empty timer)"};
struct ThreadTimes {
  uint64_t tid = 0;
  uint64_t cycles[kTimedParts] = {};
  uint64_t calls[kTimedParts] = {};
};
std::mutex g_times_mu;
std::vector<ThreadTimes*> g_times;  // never freed: read after their threads end
thread_local ThreadTimes* t_times __attribute__((tls_model("initial-exec"))) = nullptr;

ThreadTimes& thread_times() {
  if (t_times == nullptr) {
    auto* t = new ThreadTimes();
    t->tid = uint64_t(syscall(SYS_gettid));
    std::lock_guard<std::mutex> g(g_times_mu);
    g_times.push_back(t);
    t_times = t;
  }
  return *t_times;
}

struct Timed {
  TimedPart part;
  uint64_t start;
  explicit Timed(TimedPart p) : part(p), start(__builtin_ia32_rdtsc()) {}
  ~Timed() {
    ThreadTimes& t = thread_times();
    t.cycles[part] += __builtin_ia32_rdtsc() - start;
    ++t.calls[part];
  }
};
#define PROTON_TIMED(part) Timed timed_scope_(part)
#else
#define PROTON_TIMED(part)
#endif

// ------------------------------------------------------------ context ids ----
// Entries are never removed: an id names one (parent, name) or one link for the process.
// What a name entry stands for (the kind it was first interned with).
enum EntryKind : uint8_t { kOperatorEntry, kModuleEntry, kBackwardEntry, kNamedEntry };
const char* const kEntryKinds[] = {"op", "module", "backward", "name"};

struct Entry {
  uint64_t parent;  // name entries: the parent context; links: B
  uint64_t link;    // links: the forward operator's context F; 0 for name entries
  bool known;       // links: whether B is the backward pass's context (else the running thread's root)
  EntryKind kind;   // name entries
  std::string name;
};

struct Key {
  uint64_t parent;
  uint64_t link;
  bool known;
  std::string name;
  bool operator==(const Key& o) const {
    return parent == o.parent && link == o.link && known == o.known && name == o.name;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<std::string>()(k.name) ^ (k.parent * 0x9E3779B97F4A7C15ull) ^
           (k.link * 0xC2B2AE3D27D4EB4Full) ^ size_t(k.known);
  }
};

std::mutex g_intern_mu;
std::deque<Entry> g_entries;  // a deque: an entry's name stays where it is (caches point at it)
std::unordered_map<Key, uint64_t, KeyHash> g_index;

// The id of (parent, name) or of the link (parent=B, link=F); *stable_name gets the entry's own copy.
// Out of the callers' hot lines: a thread's caches answer nearly every lookup.
__attribute__((noinline, cold)) uint64_t intern(uint64_t parent, const char* name, size_t len, uint64_t link,
                                                const char** stable_name, bool known = true,
                                                EntryKind kind = kOperatorEntry) {
  Key key{parent, link, known, std::string(name, len)};
  std::lock_guard<std::mutex> g(g_intern_mu);
  auto it = g_index.find(key);
  uint64_t id;
  if (it != g_index.end()) {
    id = it->second;
  } else {
    id = kFirstId + g_entries.size();
    g_entries.push_back(Entry{parent, link, known, kind, key.name});
    g_index.emplace(std::move(key), id);
  }
  if (stable_name != nullptr) *stable_name = g_entries[id - kFirstId].name.c_str();
  return id;
}

// ---------------------------------------------------- forward seqNr rings ----
// One writer (the forward thread); readers (autograd threads) use the slot's version as a seqlock.
struct SeqSlot {
  std::atomic<uint64_t> version{0};
  std::atomic<int64_t> seq{-1};
  std::atomic<uint64_t> ctx{0};
};
struct SeqRing {
  SeqSlot slots[kSeqSlots];
};

// The map and the free list change under g_rings_mu, and each change bumps g_rings_version. Rings are never
// freed: a thread that ends leaves its ring to the next thread that needs one (cleared first). So a reader may
// keep a ring's address (RingCache) as long as the version it read it under still holds after its read.
std::mutex g_rings_mu;
std::unordered_map<uint64_t, SeqRing*> g_rings;  // RecordFunction thread id -> ring
std::vector<SeqRing*> g_free_rings;
std::atomic<uint64_t> g_rings_version{1};

void ring_write(SeqRing* ring, int64_t seq, uint64_t ctx) {
  SeqSlot& s = ring->slots[size_t(seq) & (kSeqSlots - 1)];
  uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.seq.store(seq, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.version.store(v + 2, std::memory_order_release);
}

uint64_t ring_read(const SeqRing* ring, int64_t seq) {
  const SeqSlot& s = ring->slots[size_t(seq) & (kSeqSlots - 1)];
  uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 & 1) return 0;
  int64_t found = s.seq.load(std::memory_order_relaxed);
  uint64_t ctx = s.ctx.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.version.load(std::memory_order_relaxed) == v1 && found == seq ? ctx : 0;
}

// A new ring for a thread (a freed one, cleared, else a new one), under g_rings_mu.
SeqRing* take_ring() {
  if (g_free_rings.empty()) return new SeqRing();
  SeqRing* ring = g_free_rings.back();
  g_free_rings.pop_back();
  for (SeqSlot& s : ring->slots) {
    s.seq.store(-1, std::memory_order_relaxed);
    s.ctx.store(0, std::memory_order_relaxed);
  }
  return ring;
}

// A reader's last ring lookup: the forward thread, its ring (nullptr: none), the version it was read under.
struct RingCache {
  uint64_t thread = 0;
  SeqRing* ring = nullptr;
  uint64_t version = 0;
};

uint64_t forward_context(RingCache& cache, uint64_t forward_thread, int64_t seq) {
  uint64_t version = g_rings_version.load(std::memory_order_acquire);
  if (cache.version == version && cache.thread == forward_thread) {
    uint64_t ctx = cache.ring != nullptr ? ring_read(cache.ring, seq) : 0;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_rings_version.load(std::memory_order_relaxed) == version) return ctx;
  }
  std::lock_guard<std::mutex> g(g_rings_mu);
  auto it = g_rings.find(forward_thread);
  cache = RingCache{forward_thread, it == g_rings.end() ? nullptr : it->second,
                    g_rings_version.load(std::memory_order_relaxed)};
  return cache.ring != nullptr ? ring_read(cache.ring, seq) : 0;
}

// ------------------------------------------- backward calls' contexts ----
// The context each thread called the autograd engine in (Python publishes it around the call), read by
// autograd's device threads, whose own context knows nothing of the caller's scopes. Each change bumps
// g_calls_version, under which a reader keeps its last answer (CallCache).
std::mutex g_calls_mu;
std::unordered_map<uint64_t, uint64_t> g_calls;  // RecordFunction thread id -> context + 1
std::atomic<uint64_t> g_calls_version{1};

struct CallCache {
  uint64_t thread = 0;
  uint64_t value = 0;  // context + 1, 0: none
  uint64_t version = 0;
};

uint64_t backward_call_context(CallCache& cache, uint64_t forward_thread, bool* found) {
  uint64_t version = g_calls_version.load(std::memory_order_acquire);
  if (cache.version != version || cache.thread != forward_thread) {
    std::lock_guard<std::mutex> g(g_calls_mu);
    auto it = g_calls.find(forward_thread);
    cache = CallCache{forward_thread, it == g_calls.end() ? 0 : it->second,
                      g_calls_version.load(std::memory_order_relaxed)};
  }
  *found = cache.value != 0;
  return cache.value != 0 ? cache.value - 1 : 0;
}

// ------------------------------------------------------ trace events ----
struct Event {
  uint64_t ctx;
  uint64_t tid;
  uint64_t start;
  uint64_t end;
};
std::mutex g_events_mu;
std::vector<Event> g_events;

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

// (parent context, module name) -> the core's id of that scope (strong references, touched with the GIL held).
struct ScopeSlot {
  uint64_t parent;
  PyObject* name;
  PyObject* ctx;
};

// Whether a context id of the core's is a plain scope's (plain_context), remembered per thread.
struct PlainSlot {
  uint64_t id;  // the id + 1; 0: empty
  bool plain;
};
constexpr size_t kPlainSlots = 16;

struct ThreadState;
thread_local ThreadState* t_fast __attribute__((tls_model("initial-exec"))) = nullptr;  // see state()

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
  PyObject* core_dict = nullptr;         // the core's threading.local dict of this thread
  std::unique_ptr<ScopeSlot[]> scopes;   // module scope ids
  PlainSlot plain[kPlainSlots] = {};     // plain_context's answers

  ~ThreadState() {
    t_fast = nullptr;
    if (ring != nullptr) {
      std::lock_guard<std::mutex> g(g_rings_mu);
      auto it = g_rings.find(rf_tid);
      if (it != g_rings.end() && it->second == ring) g_rings.erase(it);
      g_free_rings.push_back(ring);
      g_rings_version.fetch_add(1, std::memory_order_release);
    }
  }
};
// The calling thread's state, reached through one initial-exec TLS pointer (a plain load, where a
// dynamic TLS variable of a dlopen'ed module costs a __tls_get_addr call per access: two to four per
// record); the owner frees it when the thread ends.
thread_local std::unique_ptr<ThreadState> t_owner;

__attribute__((noinline)) ThreadState& make_state() {
  t_owner.reset(new ThreadState());
  t_fast = t_owner.get();
  return *t_fast;
}

inline ThreadState& state() {
  ThreadState* s = t_fast;
  return __builtin_expect(s != nullptr, 1) ? *s : make_state();
}

uint64_t rf_thread(ThreadState& ts) {
  if (ts.rf_tid == 0) ts.rf_tid = at::RecordFunction::currentThreadId();
  return ts.rf_tid;
}

uint64_t os_thread(ThreadState& ts) {
  if (ts.os_tid == 0) ts.os_tid = uint64_t(syscall(SYS_gettid));
  return ts.os_tid;
}

// The thread's context as last set (by the core's scopes, or by us publishing).
uint64_t last_set(ThreadState& ts) {
  int n = g_nchannels.load(std::memory_order_acquire);
  return n > 0 ? g_channels[0].get() : ts.own_ctx;
}

void publish(ThreadState& ts, uint64_t ctx) {
  int n = g_nchannels.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) g_channels[i].set(ctx);
  ts.own_ctx = ctx;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

uint64_t hash_bytes(const char* s, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(s[i])) * 0x100000001B3ull;
  return h;
}

// Equal C strings; inline: the names compared are short and usually differ within a few bytes.
inline bool streq(const char* a, const char* b) {
  while (*a == *b) {
    if (*a == '\0') return true;
    ++a;
    ++b;
  }
  return false;
}

// The first ``n`` bytes of ``a`` (a C string) and ``b`` (``n`` bytes, none of them NUL) are equal: a shorter ``a``
// differs at its terminator, so nothing past it is read. Inline, where libc's strncmp is a vector routine of many
// cache lines that a GPU host's launches evict between two calls.
inline bool same_bytes(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// The id of (parent, name): the thread's cache (no lock, no allocation), else the shared table.
// ``key`` is the name's address for names that outlive the call (operator schemas), else a hash of it:
// either way a hit is checked against the entry's own copy of the name.
uint64_t lookup(ThreadState& ts, uint64_t parent, const char* name, size_t len, uintptr_t key,
                EntryKind kind = kOperatorEntry) {
  if (!ts.cache) ts.cache.reset(new CacheSlot[kCacheSlots]());
  CacheSlot& slot = ts.cache[mix(parent, key) & (kCacheSlots - 1)];
  if (slot.id != 0 && slot.parent == parent && slot.key == key && same_bytes(slot.name, name, len) &&
      slot.name[len] == '\0')
    return slot.id;
  const char* stable = nullptr;
  uint64_t id = intern(parent, name, len, 0, &stable, true, kind);
  slot = CacheSlot{parent, key, stable, id};
  return id;
}

// lookup() for an operator's own name, keyed by its address: a hit costs one comparison of the name
// with the entry's copy (the address may be reused for another name once a record's storage is freed).
inline uint64_t lookup_operator(ThreadState& ts, uint64_t parent, const char* name) {
  if (ts.cache) {
    const CacheSlot& slot = ts.cache[mix(parent, uintptr_t(name)) & (kCacheSlots - 1)];
    if (slot.id != 0 && slot.parent == parent && slot.key == uintptr_t(name) && streq(slot.name, name)) return slot.id;
  }
  return lookup(ts, parent, name, std::strlen(name), uintptr_t(name));
}

uint64_t lookup_link(ThreadState& ts, uint64_t base, uint64_t forward, bool known) {
  if (!known) return intern(base, "", 0, forward, nullptr, false);
  auto key = std::make_pair(base, forward);
  auto it = ts.links.find(key);
  if (it != ts.links.end()) return it->second;
  uint64_t id = intern(base, "", 0, forward, nullptr, true);
  if (ts.links.size() < 100000) ts.links.emplace(key, id);
  return id;
}

// ----------------------------------------------------------------- shapes ----
void append_int(std::string& out, int64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%lld", static_cast<long long>(v));
  out.append(tmp, size_t(n));
}

void append_tensor(std::string& out, const at::Tensor& t) {
  if (t.is_nested()) {
    out += "nested";
    return;
  }
  c10::SymIntArrayRef sizes = t.sym_sizes();
  if (sizes.empty()) {
    out += "()";
    return;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += 'x';
    auto v = sizes[i].maybe_as_int();
    if (v.has_value()) {
      append_int(out, *v);
    } else {
      out += '?';  // a symbolic size (tracing under torch.compile)
    }
  }
}

// "[5x8,8x16]": the operator's tensor inputs in order (a list of tensors as "(4x8;4x8)"); others left out.
void append_shapes(std::string& out, const at::RecordFunction& rf) {
  out += '[';
  bool first = true;
  for (const c10::IValue& v : rf.inputs()) {
    if (out.size() > kMaxNameBytes) break;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (!first) out += ',';
      first = false;
      append_tensor(out, t);
    } else if (v.isList()) {
      auto items = v.toListRef();
      bool tensors = false;
      for (const c10::IValue& item : items) tensors = tensors || item.isTensor();
      if (!tensors) continue;
      if (!first) out += ',';
      first = false;
      out += '(';
      for (size_t i = 0; i < items.size() && out.size() <= kMaxNameBytes; ++i) {
        if (i) out += ';';
        if (items[i].isTensor() && items[i].toTensor().defined()) {
          append_tensor(out, items[i].toTensor());
        } else {
          out += '-';
        }
      }
      out += ')';
    }
  }
  out += ']';
  if (out.size() > kMaxNameBytes) {
    out.resize(kMaxNameBytes);
    out += "...";
  }
}

// ---------------------------------------------------------------- callbacks ----
// Two ways to hand contexts to the backends, chosen by set_channels:
// * providing (every running backend's capsule has set_provider, version 2): an operator's entry pushes
//   its frame and names it (on_enter); nothing is set. A launch asks the provider (``provide``) for its
//   context, the innermost frame's. Frames of other records (autograd's own "detach", say) are pushed
//   open and named when something first needs them (``resolve_to``).
// * publishing (a backend of version 1): each frame is resolved at its entry and its context set,
//   and the previous one set again at its exit.
// Input shapes (record_shapes) resolve each frame at its entry either way: the inputs are there only.

// X where a record of its own string (names_operator(rf) must not hold) is autograd's record of a node,
// "autograd::engine::evaluate_function: X", else nullptr (a comparison of fixed length, expanded in place).
inline const char* engine_node(const at::RecordFunction& rf) {
  const std::string& name = record_string(rf);
  constexpr size_t n = sizeof kEnginePrefix - 1;
  return name.size() >= n && std::memcmp(name.data(), kEnginePrefix, n) == 0 ? name.c_str() + n : nullptr;
}

// "aten::detach" directly inside "aten::detach", or "detach" (autograd's own record of it) inside it.
bool same_operator(const char* outer, const char* inner) {
  if (outer == inner || streq(outer, inner)) return true;
  return outer[0] == 'a' && outer[1] == 't' && outer[2] == 'e' && outer[3] == 'n' && outer[4] == ':' &&
         outer[5] == ':' && streq(outer + 6, inner);
}

// Records that only wrap the operator inside them: not shown.
bool transparent(const char* name) {
  switch (name[0]) {
    case 'P':
      return std::strcmp(name, "PythonDispatchMode") == 0 || std::strcmp(name, "PythonTLSSnapshot") == 0;
    case 'r':
      return std::strcmp(name, "record_param_comms") == 0;
    default:
      return false;
  }
}

const char* record_name(const at::RecordFunction& rf) {
  const char* name = rf.name();
  return name == nullptr || name[0] == '\0' ? "<unnamed>" : name;
}

// Whether a frame's context is still to be looked up (resolve_to).
inline bool unresolved(Kind kind) { return kind == kOpen || kind == kBackwardOpen; }

void resolve_backward(ThreadState& ts, Frame& f);

// What frame ``i`` stands for, under ``parent``: its kind, name and context. ``inputs``: the record whose
// inputs name its shapes (only at its entry).
void classify(ThreadState& ts, size_t i, uint64_t parent, const at::RecordFunction* inputs) {
  auto& frames = ts.frames;
  Frame& f = frames[i];
  const char* name;
  {
    PROTON_TIMED(kTimedClassifyName);
    name = record_name(*f.rf);
    f.name = name;
    f.ctx = parent;
    f.kind = kPass;
    if ((!g_tracing.load(std::memory_order_relaxed) && launches_nothing(name)) || transparent(name)) return;
  }
  // The same operator again, directly inside itself (a Python dispatch mode or a tensor subclass
  // calling it once more): one node.
  for (size_t j = i; j > 0; --j) {
    const Frame& g = frames[j - 1];
    if (g.kind == kPass) continue;
    if (g.kind == kOp && g.ctx == parent && same_operator(g.name, name)) return;
    break;
  }
  f.kind = kOp;
  if (inputs != nullptr && g_shapes.load(std::memory_order_relaxed) && inputs->needsInputs()) {
    std::string& buf = ts.buf;
    buf.assign(name);
    append_shapes(buf, *inputs);
    f.ctx = lookup(ts, parent, buf.data(), buf.size(), uintptr_t(hash_bytes(buf.data(), buf.size())));
  } else {
    PROTON_TIMED(kTimedClassifyLookup);
    f.ctx = lookup_operator(ts, parent, name);
  }
}

// The context of frame ``top``, resolving the open frames up to it (providing).
uint64_t resolve_to(ThreadState& ts, size_t top) {
  auto& frames = ts.frames;
  size_t i = top + 1;
  while (i > 0 && unresolved(frames[i - 1].kind)) --i;
  uint64_t parent = i == 0 ? ts.base : frames[i - 1].ctx;
  for (; i <= top; ++i) {
    if (frames[i].kind == kBackwardOpen) {
      resolve_backward(ts, frames[i]);
    } else {
      classify(ts, i, parent, nullptr);
    }
    parent = frames[i].ctx;
  }
  return frames[top].ctx;
}

// classify() for an operator's frame entered on the fast path, keyed by its schema's address: that names one
// operator for as long as the operator is registered (g_schema_generation changes when any is removed), so a
// hit reads neither the schema nor a name (each a cache miss on a GPU host, where the driver's launches evict
// them between steps). What classify decides for a frame depends only on its parent and its name (tracing,
// which also counts, never takes this path), so it is kept per (parent, schema).
void classify_operator(ThreadState& ts, size_t i, uint64_t parent) {
  Frame& f = ts.frames[i];
  uint32_t generation = g_schema_generation.load(std::memory_order_relaxed);
  if (!ts.operators) ts.operators.reset(new OperatorSlot[kCacheSlots]());
  OperatorSlot& slot = ts.operators[mix(parent, uintptr_t(f.schema)) & (kCacheSlots - 1)];
  if (slot.generation == generation && slot.parent == parent && slot.schema == f.schema) {
    f.name = slot.name;
    f.kind = slot.kind;
    f.ctx = slot.kind == kOp ? slot.id : parent;
    return;
  }
  classify(ts, i, parent, nullptr);
  slot = OperatorSlot{parent, f.schema, f.name, f.ctx, generation, f.kind};
}

// The thread's context now, given the one last ``set``: providing, its innermost frame's, unless something
// set another inside our frames (an NVTX range or a Python scope, which then wins).
uint64_t answer(ThreadState& ts, uint64_t set) {
  if (!g_providing.load(std::memory_order_relaxed) || ts.frames.empty() || set != ts.base) return set;
  return resolve_to(ts, ts.frames.size() - 1);
}

uint64_t effective(ThreadState& ts) { return answer(ts, last_set(ts)); }

// The provider the backends ask at each launch (providing), on the launching thread.
uint64_t provide(uint64_t set) {
  PROTON_TIMED(kTimedProvide);
  ThreadState* ts = t_fast;
  if (ts == nullptr) return set;
  try {
    return answer(*ts, set);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
    return set;
  }
}

// The calling thread's ring, where its operators leave their contexts by sequence number.
SeqRing* own_ring(ThreadState& ts) {
  if (ts.ring == nullptr) {
    std::lock_guard<std::mutex> g(g_rings_mu);
    SeqRing* ring = take_ring();
    g_rings[rf_thread(ts)] = ring;
    g_rings_version.fetch_add(1, std::memory_order_release);
    ts.ring = ring;
  }
  return ts.ring;
}

// Sequence numbers in [from, to) that no frame wrote yet go under ``context()`` (asked once, if needed). At
// most a ring's worth: older ones would be overwritten anyway.
template <typename Context>
void remember_range(ThreadState& ts, int64_t from, int64_t to, Context&& context) {
  SeqRing* ring = own_ring(ts);
  if (to - from > int64_t(kSeqSlots)) from = to - int64_t(kSeqSlots);
  for (int64_t seq = from; seq < to; ++seq) {
    if (ring->slots[size_t(seq) & (kSeqSlots - 1)].seq.load(std::memory_order_relaxed) == seq) continue;
    ring_write(ring, seq, context());
  }
}

// Sequence numbers taken since the last sweep while no frame of ours was open: nodes that operators left
// unobserved created, where the thread's context was ``ctx``. Swept at the next outermost operator, module
// call or backward call, with the context in force then; a Python scope that opened and closed in between
// is not seen, and the node goes under the context around it.
void sweep(ThreadState& ts, uint64_t ctx) {
  int64_t now = int64_t(at::sequence_number::peek());
  uint64_t epoch = g_sweep_epoch.load(std::memory_order_relaxed);
  if (__builtin_expect(ts.sweep_epoch != epoch, 0)) {  // the thread's first sweep since the session began
    ts.sweep_epoch = epoch;
    ts.swept = now;
    return;
  }
  if (now > ts.swept) remember_range(ts, ts.swept, now, [ctx] { return ctx; });
  ts.swept = now;
}

// A sweep where the thread has no frame of ours open (a module call, a backward call), with its context now.
void sweep_outside_frames(ThreadState& ts) {
  if (ts.frames.empty()) sweep(ts, last_set(ts));
}

// The outermost frame is opening: the context it opens in, and a sweep.
__attribute__((noinline)) void open_outermost(ThreadState& ts) {
  ts.base = last_set(ts);
  sweep(ts, ts.base);
}

// A frame for ``rf`` (or a module, rf == nullptr) on top of the thread's stack, not resolved, entered at
// ``start`` (0: not traced). Inlined: it is the whole of an operator's entry on the fast path (on_enter).
__attribute__((always_inline)) inline Frame& push_open(ThreadState& ts, const at::RecordFunction* rf, int64_t seq,
                                                       uint64_t start) {
  if (ts.frames.empty()) open_outermost(ts);
  ts.frames.push_back(Frame{rf, nullptr, nullptr, 0, 0, start, seq, kOpen, false});
  return ts.frames.back();
}

// push_open, timed while a session traces.
Frame& push_frame(ThreadState& ts, const at::RecordFunction* rf, int64_t seq) {
  return push_open(ts, rf, seq, g_tracing.load(std::memory_order_relaxed) ? now_ns() : 0);
}

// Publishing: make the new top frame's context the thread's (``prev``: the one before, set again at its
// exit if this one changed it; ``always``: set it even where it is the same).
void set_top(ThreadState& ts, uint64_t prev, bool always = false) {
  Frame& f = ts.frames.back();
  f.prev = prev;
  if (g_providing.load(std::memory_order_relaxed) || (f.ctx == prev && !always)) return;
  f.changed = true;
  publish(ts, f.ctx);
}

// The context of an autograd node's frame, L(B, F)/X: under the forward operator F its sequence number ``seq``
// names in ``forward_thread``'s ring, B being where Python called the engine, else ``cur``, the thread's
// context at the node's record (X: ``name``).
uint64_t backward_context(ThreadState& ts, int64_t seq, uint64_t forward_thread, uint64_t cur, const char* name) {
  // The backward pass's own context: where Python called the engine, else this thread's.
  bool called = false;
  uint64_t base = backward_call_context(ts.calls, forward_thread, &called);
  if (!called) base = cur;
  uint64_t forward = seq >= 0 && forward_thread != 0 ? forward_context(ts.rings, forward_thread, seq) : 0;
  uint64_t parent = base;
  if (forward != 0) {
    // Unknown: no engine call published a context for the forward thread and this thread has none of
    // its own (an autograd device thread under a torch without _engine_run_backward).
    parent = lookup_link(ts, base, forward, called || base != 0);
    g_linked.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_unlinked.fetch_add(1, std::memory_order_relaxed);
  }
  size_t len = std::strlen(name);
  return lookup(ts, parent, name, len, uintptr_t(hash_bytes(name, len)), kBackwardEntry);
}

// A kBackwardOpen frame's context, looked up now (its context at entry is in prev, as set_top keeps it).
void resolve_backward(ThreadState& ts, Frame& f) {
  f.ctx = backward_context(ts, int64_t(f.ctx), f.forward_thread, f.prev, f.name);
  f.kind = kBackward;
}

// autograd's record of one node, "autograd::engine::evaluate_function: X" (``name``: X), opens the node's
// frame: under L(B, F) where the node's sequence number names its forward operator F. The engine sets the
// node it evaluates (get_current_node) before it opens this record, and the record spans all the node does:
// its backward function and the gradient sums for the next nodes after it.
//
// Providing without a trace (g_fast), the frame is looked up only when a launch or a record inside first
// needs its context (resolve_to): most nodes of a training step launch nothing (AccumulateGrad with its
// gradient stolen, TBackward0), and the lookup reads the forward thread's ring and two caches, each likely
// out of cache by then. The node's sequence number and thread are read now, while the node is alive.
void enter_backward(ThreadState& ts, const at::RecordFunction& rf, const char* name) {
  PROTON_TIMED(kTimedEngineRecord);
  int64_t seq = -1;
  uint64_t forward_thread = 0;
  if (auto node = torch::autograd::get_current_node()) {
    seq = static_cast<int64_t>(node->sequence_nr());  // AccumulateGrad's UINT64_MAX reads -1: none
    forward_thread = node->thread_id();
  }
  if (g_fast.load(std::memory_order_relaxed)) {
    // The outermost frame (as on autograd's device threads): its context at entry is the one last set,
    // which opening it reads (open_outermost) and keeps in ts.base.
    bool outermost = ts.frames.empty();
    uint64_t cur = outermost ? 0 : effective(ts);
    Frame& f = push_frame(ts, &rf, -1);
    f.name = name;
    f.kind = kBackwardOpen;
    f.ctx = uint64_t(seq);
    f.forward_thread = forward_thread;
    f.prev = outermost ? ts.base : cur;
    return;
  }
  uint64_t cur = effective(ts);
  uint64_t ctx = backward_context(ts, seq, forward_thread, cur, name);
  if (!ts.frames.empty() && unresolved(ts.frames.back().kind)) resolve_to(ts, ts.frames.size() - 1);
  Frame& f = push_frame(ts, &rf, -1);
  f.name = name;
  f.kind = kBackward;
  f.ctx = ctx;
  set_top(ts, cur, true);
}

// A record runs another observer besides ours: it may want every operator, so all are observed again (until
// the next enable). The operators' records it missed meanwhile are those between its start and this record.
__attribute__((noinline)) void another_observer() {
  if (!g_unobserved.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> g(g_enable_mu);
  g_other_observer = true;
  apply_unobserved();
}

// Every other entry: publishing, tracing or shapes; a thread's first record; a full stack; a record of neither
// an operator nor a node. Cold while providing: kept out of the hot entry's cache lines.
__attribute__((noinline, cold)) std::unique_ptr<at::ObserverContext> enter_slow(const at::RecordFunction& rf) {
  if (!g_on.load(std::memory_order_relaxed)) return nullptr;
  try {
    ThreadState& ts = state();
    if (!names_operator(rf)) {
      if (const char* node = engine_node(rf)) {
        enter_backward(ts, rf, node);
        return nullptr;
      }
    }
    if (g_providing.load(std::memory_order_relaxed) && !g_shapes.load(std::memory_order_relaxed)) {
      push_frame(ts, &rf, rf.seqNr());
      return nullptr;
    }
    uint64_t cur = effective(ts);
    push_frame(ts, &rf, rf.seqNr());
    classify(ts, ts.frames.size() - 1, cur, &rf);
    set_top(ts, cur);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
  return nullptr;
}

// An operator's entry, providing (g_fast): a frame pushed and named at once; an autograd node's, a frame looked up
// when needed (enter_backward). Everything else (a thread's first record, another record, a full stack) takes
// enter_slow.
//
// Named now, not when a launch first asks: with the operators that launch nothing unobserved, nearly every
// record left is named by some launch anyway, and here the name comes from classify_operator's cache by the
// schema's address, which the record holds, without reading the schema (on the H200, a launch's provider took
// 470-690 ns naming frames from their schemas, all cache misses; torch_part_times.py).
std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& rf) {
  PROTON_TIMED(kTimedEnter);
  if (__builtin_expect(observer_count(rf) != 1, 0)) another_observer();
  ThreadState* ts = t_fast;
  if (__builtin_expect(ts != nullptr && g_fast.load(std::memory_order_relaxed) && !ts->frames.full(), 1)) {
    if (__builtin_expect(names_operator(rf), 1)) {
      push_open(*ts, &rf, rf.seqNr(), 0).schema = operator_schema(rf);  // g_fast: not tracing
      try {
        auto& frames = ts->frames;
        size_t i = frames.size() - 1;
        uint64_t parent = i == 0 ? ts->base : unresolved(frames[i - 1].kind) ? resolve_to(*ts, i - 1) : frames[i - 1].ctx;
        classify_operator(*ts, i, parent);
      } catch (...) {  // left open: a launch or the exit names it
        g_callback_errors.fetch_add(1, std::memory_order_relaxed);
      }
      return nullptr;
    }
    if (const char* node = engine_node(rf)) {  // autograd's record of a node: a frame looked up when needed
      try {
        enter_backward(*ts, rf, node);
      } catch (...) {
        g_callback_errors.fetch_add(1, std::memory_order_relaxed);
      }
      return nullptr;
    }
  }
  return enter_slow(rf);
}

// A frame autograd saw (its sequence number: an operator, or a module called inside one) is closing: the
// numbers nodes took while it ran (from its own up to the thread's next) that no frame inside it wrote go
// under its context: the operator's own, or the enclosing one's for a view. Those are the node of the
// operator itself and those of unobserved operators inside it.
void remember_sequence(ThreadState& ts, size_t i) {
  int64_t seq = ts.frames[i].seq;
  int64_t next = int64_t(at::sequence_number::peek());
  if (next <= seq) return;
  uint64_t ctx = 0;
  remember_range(ts, seq, next, [&] { return ctx != 0 ? ctx : (ctx = resolve_to(ts, i)); });
}

void record_event(ThreadState& ts, const Frame& f) {
  uint64_t end = now_ns();
  std::lock_guard<std::mutex> g(g_events_mu);
  if (g_events.size() >= kMaxEvents) {
    g_dropped_events.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_events.push_back(Event{f.ctx, os_thread(ts), f.start, end});
}

// Close the top frame: its record is ending now (``ended``), or lost its end (its record may be gone,
// so it is not looked at).
void pop_top(ThreadState& ts, bool ended) {
  size_t i = ts.frames.size() - 1;
  const Frame& f = ts.frames[i];
  if (ended && f.seq >= 0) remember_sequence(ts, i);
  if (f.start != 0) {
    if (ended && unresolved(f.kind)) resolve_to(ts, i);
    if (f.kind == kOp || f.kind == kBackward || f.kind == kModule) record_event(ts, f);
  }
  bool changed = f.changed;
  uint64_t prev = f.prev;
  ts.frames.pop_back();
  if (changed) publish(ts, prev);
}

__attribute__((noinline)) void exit_slow(const at::RecordFunction& rf) {
  ThreadState& ts = state();
  auto& frames = ts.frames;
  size_t i = frames.size();
  if (__builtin_expect(i == 0 || frames[i - 1].rf != &rf, 0)) {
    // Not the innermost frame: those above lost their end (an asynchronous record ending elsewhere),
    // and close with it.
    while (i > 0 && frames[i - 1].rf != &rf) --i;
    if (i == 0) {
      if (g_on.load(std::memory_order_relaxed)) g_misnested.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  try {
    while (frames.size() > i) pop_top(ts, false);
    pop_top(ts, true);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// A record's exit: where its frame is the innermost, set no context, kept no entry time and took no sequence
// number a node was given (remember_sequence), a pop; else exit_slow.
void on_exit(const at::RecordFunction& rf, at::ObserverContext*) {
  PROTON_TIMED(kTimedExit);
  ThreadState* ts = t_fast;
  if (__builtin_expect(ts != nullptr && !ts->frames.empty(), 1)) {
    const Frame& f = ts->frames.back();
    if (__builtin_expect(f.rf == &rf && f.start == 0 && !f.changed, 1) &&
        (f.seq < 0 || int64_t(at::sequence_number::peek()) <= f.seq)) {
      ts->frames.pop_back();
      return;
    }
  }
  exit_slow(rf);
}

// ------------------------------------------------------------ nn.Module calls ----
// A module call becomes a scope of the core's (so scopes the user opens inside its forward nest under it),
// opened here with the steps of plugin_api.open_scope/close_scope (plugin_api.scope_stack_protocol, v1) for
// the plain case and through those Python functions otherwise; a module called inside one of our records
// (a forward recomputed in backward by activation checkpointing) becomes a frame of ours.
//
// Two ways in, both with the GIL held: module_call, a method descriptor of nn.Module put in place of
// nn.Module.__call__, which calls the original with the module opened around it (no Python frame of ours
// per module call; Dynamo is shown a Python equivalent, proton_torch.ops), or module_pre_hook and
// module_post_hook, called by the Python wrapper of proton_frameworks where Dynamo cannot be shown one.
struct ModuleSupport {
  PyObject* activity = nullptr;  // plugin_api.ACTIVITY: .any
  PyObject* thread = nullptr;    // the core's threading.local: .stack, .current
  PyObject* index = nullptr;     // (parent, "scope", name) -> id
  PyObject* child = nullptr;     // TREE.child(parent, kind, name) -> id
  PyObject* kind = nullptr;      // "scope"
  PyObject* manager = nullptr;   // .setters, .tracing
  PyObject* open_scope = nullptr;
  PyObject* close_scope = nullptr;
  PyObject* s_any = nullptr;
  PyObject* s_stack = nullptr;
  PyObject* s_current = nullptr;
  PyObject* s_setters = nullptr;
  PyObject* s_tracing = nullptr;
  PyObject* s_modules = nullptr;
  PyObject* s_name = nullptr;
  PyObject* zero = nullptr;
  Py_ssize_t any_offset = 0;         // ACTIVITY's "any" slot, 0: read it through getattr
  PyObject* manager_dict = nullptr;  // MANAGER.__dict__, where setters/tracing are read (nullptr: getattr)
  PyObject* entries = nullptr;       // the core's context entries, id -> (parent, kind, name), or nullptr
} g_mod;

// Bumped each time the hooks are (re)installed: frames of an older install lost their post hook
// (the hooks went away during that module's forward) and are dropped at this thread's next call.
uint64_t g_module_generation = 1;

// (parent module, module) -> its attribute name in the parent (strong references to the names only).
std::unordered_map<std::pair<uint64_t, uint64_t>, PyObject*, PairHash> g_module_names;
std::vector<uint64_t> g_module_ids;  // ids of the core's module scopes opened, for naming links
std::unordered_set<uint64_t> g_module_id_set;

// module_call: the nn.Module.__call__ it wraps (kept after a session: code that saved the descriptor
// still calls through it), whether it opens modules now, and the descriptor, one per process (Dynamo
// registers it once).
PyObject* g_call_original = nullptr;
bool g_call_on = false;
PyObject* g_call_descr = nullptr;

// ACTIVITY.any: 1, 0, -1 with an exception. ACTIVITY is a __slots__ object: its slot is read where it
// lies (g_mod.any_offset), else through getattr.
int activity_on() {
  if (g_mod.any_offset > 0) {
    PyObject* any = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(g_mod.activity) + g_mod.any_offset);
    if (any == Py_True) return 1;
    if (any == Py_False) return 0;
  }
  PyObject* any = PyObject_GetAttr(g_mod.activity, g_mod.s_any);
  if (any == nullptr) return -1;
  int on = PyObject_IsTrue(any);
  Py_DECREF(any);
  return on;
}

// MANAGER.<name> (a new reference): from its instance dict where no class attribute can come first.
PyObject* manager_attr(PyObject* name) {
  if (g_mod.manager_dict != nullptr) {
    PyObject* v = PyDict_GetItemWithError(g_mod.manager_dict, name);
    if (v != nullptr) return Py_NewRef(v);
    if (PyErr_Occurred()) return nullptr;
  }
  return PyObject_GetAttr(g_mod.manager, name);
}

// The offset of a plain object slot ``name`` of ``obj``'s type (a __slots__ member), else 0.
Py_ssize_t slot_offset(PyObject* obj, PyObject* name) {
  PyObject* descr = _PyType_Lookup(Py_TYPE(obj), name);
  if (descr == nullptr || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) return 0;
  PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
  return member->type == T_OBJECT_EX || member->type == T_OBJECT ? member->offset : 0;
}

// The instance dict of ``obj`` (a new reference) if none of ``names`` is a class attribute of its type (which
// could shadow or compute the value), else nullptr.
PyObject* plain_instance_dict(PyObject* obj, std::initializer_list<PyObject*> names) {
  for (PyObject* name : names)
    if (_PyType_Lookup(Py_TYPE(obj), name) != nullptr) return nullptr;
  PyObject* d = PyObject_GenericGetDict(obj, nullptr);
  if (d == nullptr || !PyDict_CheckExact(d)) {
    PyErr_Clear();
    Py_XDECREF(d);
    return nullptr;
  }
  return d;
}

// parent._modules, borrowed from the instance dict (nn.Module keeps it there), else nullptr without an error.
PyObject* children_of(PyObject* parent, PyObject** holder) {
  *holder = PyObject_GenericGetDict(parent, nullptr);
  if (*holder == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* children = PyDict_GetItemWithError(*holder, g_mod.s_modules);
  if (children == nullptr || !PyDict_Check(children)) {
    PyErr_Clear();
    return nullptr;
  }
  return children;
}

// A new reference to the name the Python side would give: the attribute name in the parent, else the class name.
PyObject* module_name(PyObject* parent, PyObject* module) {
  PyObject* holder = nullptr;
  PyObject* children = parent != nullptr ? children_of(parent, &holder) : nullptr;
  if (children != nullptr) {
    auto key = std::make_pair(uint64_t(uintptr_t(parent)), uint64_t(uintptr_t(module)));
    auto it = g_module_names.find(key);
    if (it != g_module_names.end() && PyDict_GetItemWithError(children, it->second) == module) {
      Py_DECREF(holder);
      return Py_NewRef(it->second);
    }
    PyErr_Clear();
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(children, &pos, &k, &v)) {
      if (v == module && PyUnicode_Check(k)) {
        if (g_module_names.size() > 100000) {
          for (auto& kv : g_module_names) Py_DECREF(kv.second);
          g_module_names.clear();
        }
        auto found = g_module_names.find(key);
        if (found != g_module_names.end()) {
          Py_SETREF(found->second, Py_NewRef(k));
        } else {
          g_module_names.emplace(key, Py_NewRef(k));
        }
        Py_DECREF(holder);
        return Py_NewRef(k);
      }
    }
  }
  Py_XDECREF(holder);
  PyTypeObject* type = Py_TYPE(module);
  if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE))  // a class statement's type: its __name__ is ht_name
    return Py_NewRef(reinterpret_cast<PyHeapTypeObject*>(type)->ht_name);
  return PyObject_GetAttr(reinterpret_cast<PyObject*>(type), g_mod.s_name);
}

PyObject* core_dict(ThreadState& ts) {
  if (ts.core_dict == nullptr) ts.core_dict = PyObject_GetAttrString(g_mod.thread, "__dict__");
  return ts.core_dict;
}

bool call_setters(PyObject* ctx) {
  PROTON_TIMED(kTimedSetters);
  PyObject* setters = manager_attr(g_mod.s_setters);
  if (setters == nullptr) return false;
  bool ok = PyTuple_Check(setters);
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(setters); ++i) {
    PyObject* r = PyObject_CallOneArg(PyTuple_GET_ITEM(setters, i), ctx);
    ok = r != nullptr;
    Py_XDECREF(r);
  }
  Py_DECREF(setters);
  return ok;
}

// `list.pop()` of the last item (n > 0), keeping the list's array: list_resize would free a short stack's
// array when it empties (and shrink it below half), so every push/pop pair paid a malloc and a free.
void drop_last(PyObject* list) {
  Py_ssize_t n = PyList_GET_SIZE(list);
  PyObject* item = PyList_GET_ITEM(list, n - 1);
  Py_SET_SIZE(list, n - 1);
  Py_DECREF(item);
}

// The id of the innermost scope on a core stack (borrowed), the root's for an empty one.
PyObject* stack_top(PyObject* stack) {
  Py_ssize_t n = PyList_GET_SIZE(stack);
  if (n == 0) return g_mod.zero;
  PyObject* top = PyList_GET_ITEM(stack, n - 1);
  return PyTuple_Check(top) && PyTuple_GET_SIZE(top) > 0 ? PyTuple_GET_ITEM(top, 0) : nullptr;
}

// The core's id of scope ``name`` under ``parent`` (a new reference): the thread's cache (ids are never
// reused, so an entry never goes stale), else index[(parent, "scope", name)], else TREE.child(...).
PyObject* scope_id(ThreadState& ts, PyObject* parent, PyObject* name) {
  uint64_t p = PyLong_AsUnsignedLongLong(parent);
  if (p == uint64_t(-1) && PyErr_Occurred()) return nullptr;
  if (!ts.scopes) ts.scopes.reset(new ScopeSlot[kCacheSlots]());
  ScopeSlot& slot = ts.scopes[mix(p, uintptr_t(name)) & (kCacheSlots - 1)];
  if (slot.ctx != nullptr && slot.parent == p && slot.name == name) return Py_NewRef(slot.ctx);
  PyObject* key = PyTuple_Pack(3, parent, g_mod.kind, name);
  PyObject* ctx = key ? PyDict_GetItemWithError(g_mod.index, key) : nullptr;
  Py_XDECREF(key);
  if (ctx != nullptr) {
    Py_INCREF(ctx);
  } else if (!PyErr_Occurred()) {
    ctx = PyObject_CallFunctionObjArgs(g_mod.child, parent, g_mod.kind, name, nullptr);
  }
  if (ctx != nullptr && PyLong_CheckExact(ctx)) {
    PyObject* old_name = slot.name;
    PyObject* old_ctx = slot.ctx;
    slot = ScopeSlot{p, Py_NewRef(name), Py_NewRef(ctx)};
    Py_XDECREF(old_name);
    Py_XDECREF(old_ctx);
  }
  return ctx;
}

// open_scope(name) in the plain case (no state or op on top): a new reference to the id; nullptr with no
// error set when it is not the plain case.
PyObject* fast_open(ThreadState& ts, PyObject* name) {
  PyObject* d = core_dict(ts);
  PyObject* stack = d ? PyDict_GetItemWithError(d, g_mod.s_stack) : nullptr;
  if (stack == nullptr || !PyList_Check(stack)) return nullptr;
  Py_INCREF(stack);
  PyObject* result = nullptr;
  PyObject* parent = stack_top(stack);
  PyObject* current = parent ? PyDict_GetItemWithError(d, g_mod.s_current) : nullptr;
  if (current != nullptr && PyObject_RichCompareBool(current, parent, Py_EQ) == 1) {
    PyObject* ctx = scope_id(ts, parent, name);
    PyObject* now = ctx ? PyLong_FromUnsignedLongLong(now_ns()) : nullptr;
    PyObject* entry = now ? PyTuple_Pack(3, ctx, name, now) : nullptr;
    Py_XDECREF(now);
    if (entry != nullptr && PyList_Append(stack, entry) == 0 && PyDict_SetItem(d, g_mod.s_current, ctx) == 0 &&
        call_setters(ctx)) {
      result = ctx;
      ctx = nullptr;
    }
    Py_XDECREF(entry);
    Py_XDECREF(ctx);
  }
  Py_DECREF(stack);
  return result;
}

// close_scope(id) in the plain case: 1 closed, 0 not the plain case (nothing changed), -1 an error.
int fast_close(ThreadState& ts, uint64_t id) {
  PyObject* tracing = manager_attr(g_mod.s_tracing);
  if (tracing == nullptr) return -1;
  bool traced = !PyTuple_Check(tracing) || PyTuple_GET_SIZE(tracing) > 0;
  Py_DECREF(tracing);
  if (traced) return 0;  // close_scope records the scope's event
  PyObject* d = core_dict(ts);
  PyObject* stack = d ? PyDict_GetItemWithError(d, g_mod.s_stack) : nullptr;
  if (stack == nullptr || !PyList_Check(stack)) return PyErr_Occurred() ? -1 : 0;
  Py_INCREF(stack);
  int done = 0;
  Py_ssize_t n = PyList_GET_SIZE(stack);
  PyObject* top = n ? stack_top(stack) : nullptr;
  if (top != nullptr && PyLong_Check(top) && PyLong_AsUnsignedLongLong(top) == id) {
    Py_INCREF(top);
    PyObject* current = PyDict_GetItemWithError(d, g_mod.s_current);
    int plain = current ? PyObject_RichCompareBool(current, top, Py_EQ) : -1;
    Py_DECREF(top);
    if (plain == 1) {
      drop_last(stack);
      PyObject* parent = stack_top(stack);
      Py_XINCREF(parent);
      done = parent && PyDict_SetItem(d, g_mod.s_current, parent) == 0 && call_setters(parent) ? 1 : -1;
      Py_XDECREF(parent);
    } else if (plain < 0) {
      done = -1;
    }
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_DECREF(stack);
  return done;
}

PyObject* py_set_module_support(PyObject*, PyObject* args) {
  PyObject *activity, *protocol, *entries = nullptr;
  if (!PyArg_ParseTuple(args, "OO|O!", &activity, &protocol, &PyList_Type, &entries)) return nullptr;
  // (1, thread, index, child, scope_kind, manager, open_scope, close_scope): plugin_api.scope_stack_protocol()
  if (!PyTuple_Check(protocol) || PyTuple_GET_SIZE(protocol) < 8 || !PyLong_Check(PyTuple_GET_ITEM(protocol, 0)) ||
      PyLong_AsLong(PyTuple_GET_ITEM(protocol, 0)) != 1 || !PyDict_Check(PyTuple_GET_ITEM(protocol, 2))) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "unknown scope stack protocol (proton_core is newer than proton-profiler-torch)");
    return nullptr;
  }
  PyObject** slots[] = {&g_mod.thread, &g_mod.index, &g_mod.child, &g_mod.kind, &g_mod.manager, &g_mod.open_scope,
                        &g_mod.close_scope};
  for (int i = 0; i < 7; ++i) Py_XSETREF(*slots[i], Py_NewRef(PyTuple_GET_ITEM(protocol, i + 1)));
  Py_XSETREF(g_mod.activity, Py_NewRef(activity));
  Py_XSETREF(g_mod.entries, entries != nullptr ? Py_NewRef(entries) : nullptr);
  ++g_module_generation;
  if (g_mod.s_any == nullptr) {
    g_mod.s_any = PyUnicode_InternFromString("any");
    g_mod.s_stack = PyUnicode_InternFromString("stack");
    g_mod.s_current = PyUnicode_InternFromString("current");
    g_mod.s_setters = PyUnicode_InternFromString("setters");
    g_mod.s_tracing = PyUnicode_InternFromString("tracing");
    g_mod.s_modules = PyUnicode_InternFromString("_modules");
    g_mod.s_name = PyUnicode_InternFromString("__name__");
    g_mod.zero = PyLong_FromLong(0);
  }
  g_mod.any_offset = slot_offset(activity, g_mod.s_any);
  Py_XSETREF(g_mod.manager_dict, plain_instance_dict(g_mod.manager, {g_mod.s_setters, g_mod.s_tracing}));
  Py_RETURN_NONE;
}

// A frame of ours for a module call: inside one of our records, or anywhere while providing (see settle).
// ``set``: the thread's context as last set (last_set), read by the caller.
uint64_t own_module_frame(ThreadState& ts, PyObject* name, uint64_t set) {
  Py_ssize_t len;
  const char* text = PyUnicode_AsUTF8AndSize(name, &len);
  if (text == nullptr) return 0;
  uint64_t cur = answer(ts, set);
  // keyed by the str object (the parent's attribute name, or the class's __name__: kept alive by them); a hit
  // is checked against the entry's copy of the text, so a str freed and another made at its address is told apart
  uint64_t ctx = lookup(ts, cur, text, size_t(len), uintptr_t(name), kModuleEntry);
  Frame& f = push_frame(ts, nullptr, int64_t(at::sequence_number::peek()));  // its nodes: remember_sequence
  f.kind = kModule;
  f.ctx = ctx;
  set_top(ts, cur);
  return ctx;
}

// plugin_api.close_scope(id), in Python; an exception is left set.
void python_close_scope(uint64_t id) {
  PyObject* arg = PyLong_FromUnsignedLongLong(id);
  PyObject* r = arg ? PyObject_CallOneArg(g_mod.close_scope, arg) : nullptr;
  Py_XDECREF(arg);
  Py_XDECREF(r);
}

void close_core_scope(ThreadState& ts, uint64_t id) {
  int done;
  {
    PROTON_TIMED(kTimedFastClose);
    done = fast_close(ts, id);
  }
  if (done == 0) python_close_scope(id);
  if (done < 0 || PyErr_Occurred()) {
    PyErr_Clear();
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// Close the module frame of ours with context ``ctx`` and the frames above it (records that lost their end).
void close_own_module_frame(ThreadState& ts, uint64_t ctx) {
  auto& frames = ts.frames;
  size_t i = frames.size();
  while (i > 0 && !(frames[i - 1].kind == kModule && frames[i - 1].ctx == ctx)) --i;
  if (i > 0) {
    while (frames.size() > i) pop_top(ts, false);
    pop_top(ts, true);
  }
}

// Open module ``name`` as a scope of the core's (its id in *id, kept for naming links: module_ids); false, with
// any exception left set, if it did not open.
bool open_module_scope(ThreadState& ts, PyObject* name, uint64_t* id) {
  PyObject* ctx;
  {
    PROTON_TIMED(kTimedFastOpen);
    ctx = fast_open(ts, name);
  }
  if (ctx == nullptr && !PyErr_Occurred()) ctx = PyObject_CallOneArg(g_mod.open_scope, name);
  if (ctx == nullptr) return false;
  *id = PyLong_AsUnsignedLongLong(ctx);
  Py_DECREF(ctx);
  if (PyErr_Occurred()) return false;
  if (g_module_id_set.find(*id) == g_module_id_set.end()) {  // find first: emplace would allocate every call
    g_module_id_set.insert(*id);
    g_module_ids.push_back(*id);
  }
  return true;
}

// Something is about to open a scope, state or op of the core's on this thread (the core calls the settlers,
// plugin_api.register_settler): while only module frames of ours are open (no record), they become the core's
// scopes, outermost first, as they would have been opened without g_fast, so what opens now nests under them.
// Each frame is closed first, taking the sequence numbers of its nodes so far (remember_sequence), which
// go under its own context, named as the scope that replaces it is. With a record open, nothing changes:
// what opens inside a record wins over our frames, as it always has.
void settle(ThreadState& ts) {
  auto& frames = ts.frames;
  size_t n = frames.size();
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i)
    if (frames[i].kind != kModule) return;  // a record's frame: never kModule
  // Their module calls: the innermost n of kind kOwnFrame, in the same order (checked by context).
  auto& modules = ts.modules;
  std::vector<size_t> owners;
  for (size_t j = modules.size(); j > 0 && owners.size() < n; --j)
    if (modules[j - 1].kind == kOwnFrame) owners.push_back(j - 1);
  if (owners.size() != n) return;
  for (size_t k = 0; k < n; ++k)
    if (modules[owners[n - 1 - k]].ctx != frames[k].ctx || modules[owners[n - 1 - k]].name == nullptr) return;
  while (!frames.empty()) pop_top(ts, true);
  sweep_outside_frames(ts);
  for (size_t k = n; k > 0; --k) {
    ModuleFrame& m = modules[owners[k - 1]];
    uint64_t id = 0;
    m.kind = open_module_scope(ts, m.name, &id) ? kCoreScope : kNoScope;
    m.ctx = id;
    Py_CLEAR(m.name);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      g_callback_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

PyObject* py_settle(PyObject*, PyObject*) {
  ThreadState* ts = t_fast;
  if (ts != nullptr && !ts->frames.empty()) settle(*ts);
  Py_RETURN_NONE;
}

// Whether the thread's context as last set, ``id``, is a plain scope's (or the root's, or a plugin's own): a
// module call opened there as the core's scope would be its child. Not so under a state or op of the core's,
// which stay the path's suffix below the scopes opened inside them (context.ThreadContext.recompute): there a
// module call is the core's scope, as without g_fast. Ids are never reused: answers are kept per thread.
bool plain_context(ThreadState& ts, uint64_t id) {
  if (id == 0 || id >= (uint64_t(1) << 32)) return true;
  PlainSlot& slot = ts.plain[id & (kPlainSlots - 1)];
  if (slot.id == id + 1) return slot.plain;
  PyObject* entries = g_mod.entries;
  if (entries == nullptr || Py_ssize_t(id) >= PyList_GET_SIZE(entries)) return false;
  PyObject* entry = PyList_GET_ITEM(entries, Py_ssize_t(id));
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) return false;
  PyObject* kind = PyTuple_GET_ITEM(entry, 1);
  int plain = kind == g_mod.kind ? 1 : PyObject_RichCompareBool(kind, g_mod.kind, Py_EQ);
  if (plain < 0) {
    PyErr_Clear();
    return false;
  }
  slot = PlainSlot{id + 1, plain == 1};
  return plain == 1;
}

// Open a module call (``on``: ACTIVITY.any, else it gets no scope). Never raises into the user's forward:
// a failure leaves this call without a scope. Called with no exception set.
// Drop the module frames of an older install of the hooks (see g_module_generation).
__attribute__((noinline, cold)) void drop_stale_modules(ThreadState& ts) {
  auto& modules = ts.modules;
  while (!modules.empty() && modules.back().generation != g_module_generation) {
    ModuleFrame stale = modules.back();
    modules.pop_back();
    Py_DECREF(stale.module);
    Py_XDECREF(stale.name);
    if (stale.kind == kCoreScope) {  // its scope is still open on the core's stack: closed if innermost
      python_close_scope(stale.ctx);
      if (PyErr_Occurred()) PyErr_Clear();
    } else if (stale.kind == kOwnFrame) {  // its frame is still on ours: closed with those above it
      close_own_module_frame(ts, stale.ctx);
    }
  }
}

void module_enter(ThreadState& ts, PyObject* module, int on) {
  auto& modules = ts.modules;
  if (__builtin_expect(!modules.empty() && modules.back().generation != g_module_generation, 0)) drop_stale_modules(ts);
  PyObject* name;
  {
    PROTON_TIMED(kTimedModuleName);
    name = on > 0 ? module_name(modules.empty() ? nullptr : modules.back().module, module) : nullptr;
  }
  uint64_t id = 0;
  ModuleKind kind = kNoScope;
  // A frame of ours inside a record, and anywhere while providing without a trace (g_fast): there a module
  // call costs a push and a pop, and becomes the core's scope only if something opens one under it (settle).
  uint64_t set = 0;
  if (name != nullptr && g_on.load(std::memory_order_relaxed) &&
      (set = last_set(ts), !ts.frames.empty() || (g_fast.load(std::memory_order_relaxed) && plain_context(ts, set)))) {
    id = own_module_frame(ts, name, set);
    kind = id != 0 ? kOwnFrame : kNoScope;
  } else if (name != nullptr) {
    sweep_outside_frames(ts);
    kind = open_module_scope(ts, name, &id) ? kCoreScope : kNoScope;
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (kind != kOwnFrame) Py_CLEAR(name);  // kOwnFrame: the frame keeps the reference
  modules.push_back(ModuleFrame{Py_NewRef(module), name, id, g_module_generation, kind});
}

// Close the module call ``module`` if it is the innermost one open (else its enter was not ours).
void module_exit(ThreadState& ts, PyObject* module) {
  auto& modules = ts.modules;
  if (modules.empty() || modules.back().module != module) return;
  ModuleFrame f = modules.back();
  modules.pop_back();
  Py_DECREF(f.module);  // the caller holds its own reference: still alive here
  Py_XDECREF(f.name);
  if (f.kind == kOwnFrame) {
    close_own_module_frame(ts, f.ctx);
  } else if (f.kind == kCoreScope) {
    sweep_outside_frames(ts);
    close_core_scope(ts, f.ctx);
  }
}

PyObject* py_module_pre_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || g_mod.activity == nullptr) Py_RETURN_NONE;
  int on = activity_on();
  if (on < 0) PyErr_Clear();
  module_enter(state(), args[0], on);
  Py_RETURN_NONE;
}

PyObject* py_module_post_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs >= 1) module_exit(state(), args[0]);
  Py_RETURN_NONE;
}

// nn.Module.__call__(self, *args, **kwargs): the original, with the module opened around it while a session
// records (ACTIVITY.any, as the Python wrapper checks); an exception from forward passes through unchanged.
PyObject* py_module_call(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* original = g_call_original;
  if (original == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "proton_torch: nn.Module.__call__ replaced without the original");
    return nullptr;
  }
  Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  size_t total = size_t(1 + nargs + nkw);
  PyObject* small[8];
  std::unique_ptr<PyObject*[]> big;
  PyObject** stack = small;
  if (total > 8) {
    big.reset(new PyObject*[total]);
    stack = big.get();
  }
  stack[0] = module;
  for (size_t i = 1; i < total; ++i) stack[i] = args[i - 1];
  Py_INCREF(original);  // a session ending inside forward may replace it
  int on = 0;
  if (g_call_on && g_mod.activity != nullptr) {
    on = activity_on();
    if (on < 0) {
      PyErr_Clear();
      on = 0;
    }
  }
  if (on) {
    PROTON_TIMED(kTimedModuleEnter);
    module_enter(state(), module, on);
  }
  PyObject* result = PyObject_Vectorcall(original, stack, size_t(1 + nargs), kwnames);
  if (on) {
    PROTON_TIMED(kTimedModuleExit);
    PyObject *type, *value, *traceback;  // the forward's exception, kept across the exit
    PyErr_Fetch(&type, &value, &traceback);
    module_exit(state(), module);
    PyErr_Restore(type, value, traceback);
  }
  Py_DECREF(original);
  return result;
}

PyMethodDef g_call_def = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "__call__($self, /, *args, **kwargs)\n--\n\nCall the module (proton-profiler-torch: with its scope around "
    "the call while a session records)."};

PyObject* py_module_call_descriptor(PyObject*, PyObject* args) {
  PyObject *type, *original;
  if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &type, &original)) return nullptr;
  if (!PyCallable_Check(original)) {
    PyErr_SetString(PyExc_TypeError, "module_call_descriptor(type, original): original must be callable");
    return nullptr;
  }
  if (g_call_descr == nullptr) {
    g_call_descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type), &g_call_def);
    if (g_call_descr == nullptr) return nullptr;
  } else if (PyDescr_TYPE(g_call_descr) != reinterpret_cast<PyTypeObject*>(type)) {
    PyErr_SetString(PyExc_ValueError, "module_call_descriptor: the descriptor belongs to another type");
    return nullptr;
  }
  Py_XSETREF(g_call_original, Py_NewRef(original));
  return Py_NewRef(g_call_descr);
}

PyObject* py_set_module_call(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  g_call_on = on != 0 && g_call_original != nullptr;
  Py_RETURN_NONE;
}

PyObject* py_module_ids(PyObject*, PyObject*) {
  PyObject* out = PyList_New(Py_ssize_t(g_module_ids.size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < g_module_ids.size(); ++i)
    PyList_SET_ITEM(out, Py_ssize_t(i), PyLong_FromUnsignedLongLong(g_module_ids[i]));
  return out;
}

// ------------------------------------------------------------- Python API ----
// Global callbacks on operator and backward-function records: ours, and the benchmarks' null observer
// (which must be registered exactly as ours are to stand for torch's share).
at::CallbackHandle add_callbacks(at::RecordFunctionCallback::StartCallback start,
                                 at::RecordFunctionCallback::EndCallback end, bool inputs) {
  at::RecordFunctionCallback cb(start, end);
  cb.needsInputs(inputs).scopes({at::RecordScope::FUNCTION});
  return at::addGlobalCallback(cb);
}

bool set_callbacks(bool on, bool shapes, bool observe_all = false) {
  std::lock_guard<std::mutex> g(g_enable_mu);
  if (g_handle != at::INVALID_CALLBACK_HANDLE && (!on || shapes != g_shapes.load())) {
    at::removeCallback(g_handle);
    g_handle = at::INVALID_CALLBACK_HANDLE;
  }
  g_shapes.store(shapes);
  bool starting = on && !g_on.load();
  if (starting) listen_for_removed_operators();
  if (on && g_handle == at::INVALID_CALLBACK_HANDLE) g_handle = add_callbacks(&on_enter, &on_exit, shapes);
  if (starting) {
    g_other_observer = false;
    g_observe_all = observe_all;
    g_sweep_epoch.fetch_add(1);
    sweep(state(), 0);  // the starting thread's first sweep of the epoch: its numbers count from here
  }
  g_on.store(on);
  refresh_fast();
  apply_unobserved();
  return true;
}

// The least any RecordFunction observer costs: callbacks registered as ours are (add_callbacks, no
// inputs) that do nothing. benchmarks/ measures it beside the floor and ours, to tell torch's
// price for building records from what our callbacks add.
std::unique_ptr<at::ObserverContext> null_enter(const at::RecordFunction&) { return nullptr; }
void null_exit(const at::RecordFunction&, at::ObserverContext*) {}
at::CallbackHandle g_null_handle = at::INVALID_CALLBACK_HANDLE;

PyObject* py_null_observer(PyObject*, PyObject* args) {
  int on = 0, hide = 0;
  if (!PyArg_ParseTuple(args, "p|p", &on, &hide)) return nullptr;
  std::lock_guard<std::mutex> g(g_enable_mu);
  try {
    g_null_hide = on && hide;
    apply_unobserved();
    if (!on && g_null_handle != at::INVALID_CALLBACK_HANDLE) {
      at::removeCallback(g_null_handle);
      g_null_handle = at::INVALID_CALLBACK_HANDLE;
    } else if (on && g_null_handle == at::INVALID_CALLBACK_HANDLE) {
      g_null_handle = add_callbacks(&null_enter, &null_exit, false);
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_enable(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"shapes", "observe_all", nullptr};
  int shapes = 0, observe_all = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pp", const_cast<char**>(kw), &shapes, &observe_all))
    return nullptr;
  try {
    set_callbacks(true, shapes != 0, observe_all != 0);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_disable(PyObject*, PyObject*) {
  try {
    set_callbacks(false, false);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_forget_after_fork(PyObject*, PyObject*) {
  // A forked child has no session: stop setting contexts without touching torch's own (copied) locks.
  g_on.store(false);
  g_providing.store(false);
  refresh_fast();
  g_nchannels.store(0);
  g_unobserved.store(proton_torch::set_unobserved(false));
  Py_RETURN_NONE;
}

PyObject* py_unobserved(PyObject*, PyObject*) {
  std::vector<std::string> names;
  try {
    names = proton_torch::unobserved_now();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyObject* out = PyList_New(0);
  for (const std::string& name : names) {
    PyObject* item = out ? PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size())) : nullptr;
    if (item == nullptr || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_XDECREF(out);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return out;
}

PyObject* py_set_channels(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"capsules", "provide", nullptr};
  PyObject* list;
  int wanted = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p", const_cast<char**>(kw), &list, &wanted)) return nullptr;
  PyObject* seq = PySequence_Fast(list, "set_channels takes a list of capsules");
  if (seq == nullptr) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  NativeContext found[kMaxChannels];
  void (*setters[kMaxChannels])(uint64_t (*)(uint64_t)) = {};
  int k = 0;
  bool all_provide = true;
  for (Py_ssize_t i = 0; i < n && k < kMaxChannels; ++i) {
    PyObject* cap = PySequence_Fast_GET_ITEM(seq, i);
    auto* nc = static_cast<NativeContext*>(PyCapsule_GetPointer(cap, "proton.native_context.v1"));
    if (nc == nullptr) {
      Py_DECREF(seq);
      return nullptr;
    }
    if (nc->version >= 1 && nc->set != nullptr && nc->get != nullptr) {
      setters[k] = nc->version >= 2 ? static_cast<NativeContextV2*>(nc)->set_provider : nullptr;
      all_provide = all_provide && setters[k] != nullptr;
      found[k++] = *nc;
    }
  }
  Py_DECREF(seq);
  // Only while no operator runs with hook="torch" on (the Python side calls this at session changes):
  // readers see the count first, and slots below it are written before it grows.
  for (int i = 0; i < g_nprovider_setters; ++i)
    if (g_provider_setters[i] != nullptr) g_provider_setters[i](nullptr);
  g_providing.store(false);
  refresh_fast();
  g_nchannels.store(0, std::memory_order_release);
  for (int i = 0; i < k; ++i) g_channels[i] = found[i];
  g_nchannels.store(k, std::memory_order_release);
  bool providing = wanted && k > 0 && all_provide;
  g_nprovider_setters = providing ? k : 0;
  for (int i = 0; i < g_nprovider_setters; ++i) {
    g_provider_setters[i] = setters[i];
    setters[i](&provide);
  }
  g_providing.store(providing);
  refresh_fast();
  return PyLong_FromLong(k);
}

PyObject* py_set_tracing(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  std::lock_guard<std::mutex> g(g_enable_mu);
  g_tracing.store(on != 0);
  refresh_fast();
  apply_unobserved();
  Py_RETURN_NONE;
}

PyObject* py_entry(PyObject*, PyObject* arg) {
  uint64_t id = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  std::lock_guard<std::mutex> g(g_intern_mu);
  if (id < kFirstId || id - kFirstId >= g_entries.size()) Py_RETURN_NONE;
  const Entry& e = g_entries[id - kFirstId];
  if (e.link != 0)
    return Py_BuildValue("(sKKO)", "link", (unsigned long long)e.parent, (unsigned long long)e.link,
                         e.known ? Py_True : Py_False);
  return Py_BuildValue("(sKs#s)", "name", (unsigned long long)e.parent, e.name.data(), Py_ssize_t(e.name.size()),
                       kEntryKinds[e.kind]);
}

PyObject* py_intern(PyObject*, PyObject* args) {
  unsigned long long parent;
  const char* name;
  Py_ssize_t len;
  if (!PyArg_ParseTuple(args, "Ks#", &parent, &name, &len)) return nullptr;
  return PyLong_FromUnsignedLongLong(intern(parent, name, size_t(len), 0, nullptr, true, kNamedEntry));
}

// Around the autograd engine's call (Python): the calling thread's context, for autograd's own threads.
PyObject* py_backward_enter(PyObject*, PyObject*) {
  PROTON_TIMED(kTimedBackwardCall);
  ThreadState& ts = state();
  uint64_t tid = rf_thread(ts);
  sweep_outside_frames(ts);  // the nodes backward is about to run, first
  uint64_t value = effective(ts) + 1;
  uint64_t prev = 0;
  {
    std::lock_guard<std::mutex> g(g_calls_mu);
    auto it = g_calls.find(tid);
    if (it != g_calls.end()) {
      prev = it->second;
      it->second = value;
    } else {
      g_calls.emplace(tid, value);
    }
    g_calls_version.fetch_add(1, std::memory_order_release);
  }
  return PyLong_FromUnsignedLongLong(prev);
}

PyObject* py_backward_exit(PyObject*, PyObject* arg) {
  PROTON_TIMED(kTimedBackwardCall);
  uint64_t prev = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  ThreadState& ts = state();
  uint64_t tid = rf_thread(ts);
  std::lock_guard<std::mutex> g(g_calls_mu);
  auto it = g_calls.find(tid);
  if (it == g_calls.end()) Py_RETURN_NONE;
  if (prev != 0) {
    it->second = prev;
  } else {
    g_calls.erase(it);
  }
  g_calls_version.fetch_add(1, std::memory_order_release);
  Py_RETURN_NONE;
}

PyObject* py_current(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(effective(state())); }

PyObject* py_take_events(PyObject*, PyObject*) {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> g(g_events_mu);
    events.swap(g_events);
  }
  PyObject* out = PyList_New(Py_ssize_t(events.size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    PyObject* t = Py_BuildValue("(KKKK)", (unsigned long long)e.ctx, (unsigned long long)e.tid,
                                (unsigned long long)e.start, (unsigned long long)e.end);
    if (t == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, Py_ssize_t(i), t);
  }
  return out;
}

PyObject* py_stats(PyObject*, PyObject*) {
  size_t entries;
  {
    std::lock_guard<std::mutex> g(g_intern_mu);
    entries = g_entries.size();
  }
  return Py_BuildValue("{s:O,s:O,s:O,s:O,s:i,s:n,s:K,s:K,s:K,s:K,s:K,s:n,s:I}", "enabled",
                       g_on.load() ? Py_True : Py_False, "providing", g_providing.load() ? Py_True : Py_False,
                       "unobserved", g_unobserved.load() ? Py_True : Py_False,
                       "shapes", g_shapes.load() ? Py_True : Py_False, "channels", g_nchannels.load(), "entries",
                       Py_ssize_t(entries), "linked", (unsigned long long)g_linked.load(), "unlinked",
                       (unsigned long long)g_unlinked.load(), "misnested", (unsigned long long)g_misnested.load(),
                       "callback_errors", (unsigned long long)g_callback_errors.load(), "dropped_events",
                       (unsigned long long)g_dropped_events.load(), "open_frames_this_thread",
                       Py_ssize_t(state().frames.size()), "schema_generation",
                       (unsigned int)g_schema_generation.load());
}

PyObject* py_reset_stats(PyObject*, PyObject*) {
  g_linked.store(0);
  g_unlinked.store(0);
  g_misnested.store(0);
  g_callback_errors.store(0);
  g_dropped_events.store(0);
  Py_RETURN_NONE;
}

// timing() -> (TSC cycles per second, [(os thread id, {part: (cycles, calls)})]), or None in a build without
// PROTON_TORCH_TIMING; timing(True) also zeroes the counters.
PyObject* py_timing(PyObject*, PyObject* args) {
  int reset = 0;
  if (!PyArg_ParseTuple(args, "|p", &reset)) return nullptr;
#ifdef PROTON_TORCH_TIMING
  for (int i = 0; i < 1000; ++i) {  // the timer's own cost, as "(empty timer)"
    PROTON_TIMED(kTimedNothing);
    asm volatile("" ::: "memory");
  }
  static double hz = 0;
  if (hz == 0) {  // the TSC's rate against the monotonic clock, over 50 ms
    uint64_t n0 = now_ns(), c0 = __builtin_ia32_rdtsc();
    while (now_ns() - n0 < 50000000u) {
    }
    hz = double(__builtin_ia32_rdtsc() - c0) * 1e9 / double(now_ns() - n0);
  }
  std::lock_guard<std::mutex> g(g_times_mu);
  PyObject* out = PyList_New(0);
  for (ThreadTimes* t : g_times) {
    PyObject* parts = PyDict_New();
    for (int k = 0; parts != nullptr && k < kTimedParts; ++k) {
      PyObject* v = Py_BuildValue("(KK)", (unsigned long long)t->cycles[k], (unsigned long long)t->calls[k]);
      if (v == nullptr || PyDict_SetItemString(parts, kTimedNames[k], v) < 0) Py_CLEAR(parts);
      Py_XDECREF(v);
      if (reset) t->cycles[k] = t->calls[k] = 0;
    }
    PyObject* item = parts ? Py_BuildValue("(KN)", (unsigned long long)t->tid, parts) : nullptr;
    if (item == nullptr || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return Py_BuildValue("(dN)", hz, out);
#else
  Py_RETURN_NONE;
#endif
}

PyMethodDef kMethods[] = {
    {"timing", py_timing, METH_VARARGS,
     "timing(reset=False) -> (tsc hz, [(os thread id, {part: (tsc cycles, calls)})]) of a PROTON_TORCH_TIMING=1 "
     "build, else None"},
    {"enable", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_enable)), METH_VARARGS | METH_KEYWORDS,
     "enable(shapes=False, observe_all=False): register the RecordFunction callbacks (again, if shapes changed); "
     "observe_all, read when they are first registered: leave no operator unobserved"},
    {"disable", py_disable, METH_NOARGS, "disable(): remove the callbacks (records already open still close)"},
    {"forget_after_fork", py_forget_after_fork, METH_NOARGS, "in a forked child: set no context any more"},
    {"unobserved", py_unobserved, METH_NOARGS,
     "unobserved(): the operators that launch nothing (name.overload) torch builds no record for now"},
    {"set_channels", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_set_channels)),
     METH_VARARGS | METH_KEYWORDS,
     "set_channels([capsule, ...], provide=True): the running backends' native context setters; returns how "
     "many. provide: name each launch's context when the backend asks (all of version 2), instead of setting "
     "one per operator"},
    {"set_tracing", py_set_tracing, METH_O, "set_tracing(on): keep an event per operator for take_events()"},
    {"entry", py_entry, METH_O,
     "entry(id) -> ('name', parent, name, 'op'|'module'|'backward'|'name') | ('link', backward context, "
     "forward context, known) | None"},
    {"intern", py_intern, METH_VARARGS, "intern(parent, name) -> the id of that context"},
    {"set_module_support", py_set_module_support, METH_VARARGS,
     "set_module_support(activity, scope_stack_protocol, entries=None): what module_pre_hook/module_post_hook "
     "use (entries: the core's context entries, launch_op_protocol()[5]: module frames of ours need them)"},
    {"module_pre_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_pre_hook)),
     METH_FASTCALL, "module_pre_hook(module, args): a global nn.Module forward pre hook"},
    {"module_post_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_post_hook)),
     METH_FASTCALL, "module_post_hook(module, args, output): a global nn.Module forward hook (always_call)"},
    {"module_call_descriptor", py_module_call_descriptor, METH_VARARGS,
     "module_call_descriptor(nn.Module, original) -> a method descriptor of nn.Module (one per process) calling "
     "original with the module opened around it while set_module_call(True)"},
    {"set_module_call", py_set_module_call, METH_O,
     "set_module_call(on): whether the module_call descriptor opens modules (off: it only calls the original)"},
    {"module_ids", py_module_ids, METH_NOARGS, "module_ids() -> the ids of the module scopes of the core opened"},
    {"settle", py_settle, METH_NOARGS,
     "settle(): the calling thread's module frames of ours (no record open) become the core's scopes (a settler "
     "of plugin_api.register_settler)"},
    {"backward_enter", py_backward_enter, METH_NOARGS,
     "backward_enter() -> token: publish the calling thread's context for autograd's threads"},
    {"backward_exit", py_backward_exit, METH_O, "backward_exit(token): undo backward_enter"},
    {"current", py_current, METH_NOARGS, "current() -> the calling thread's context, as the backends hold it"},
    {"take_events", py_take_events, METH_NOARGS, "take_events() -> [(context, thread id, start ns, end ns)]"},
    {"null_observer", py_null_observer, METH_VARARGS,
     "null_observer(on, hide=False): register (or remove) RecordFunction callbacks that do nothing (a benchmark "
     "anchor); hide: with the operators that launch nothing unobserved, as hook='torch' leaves them"},
    {"stats", py_stats, METH_NOARGS, "counters and settings"},
    {"reset_stats", py_reset_stats, METH_NOARGS, "zero the counters (tests)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModuleDef = {PyModuleDef_HEAD_INIT, "_C", "PyTorch operator contexts from RecordFunction callbacks", -1,
                       kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&kModuleDef);
  if (m == nullptr) return nullptr;
  if (PyModule_AddObject(m, "FIRST_ID", PyLong_FromUnsignedLongLong(kFirstId)) < 0 ||
      PyModule_AddStringConstant(m, "BUILT_FOR", PROTON_TORCH_BUILT_FOR) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
