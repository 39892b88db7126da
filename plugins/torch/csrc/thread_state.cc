// The switches and counters every part shares, and each thread's state (thread_state.h).
#include "thread_state.h"

namespace proton_torch {

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

// Bumped at each enable: a thread's sequence numbers from before it are no business of the sweeps.
std::atomic<uint64_t> g_sweep_epoch{1};

std::atomic<uint64_t> g_linked{0};     // backward functions placed under their forward operator
std::atomic<uint64_t> g_unlinked{0};   // backward functions without a known forward operator
std::atomic<uint64_t> g_misnested{0};  // exits that matched no open frame of the thread
std::atomic<uint64_t> g_callback_errors{0};
std::atomic<uint64_t> g_dropped_events{0};

__thread ThreadState* t_fast __attribute__((tls_model("initial-exec"))) = nullptr;  // see state()
// The calling thread's state, reached through one initial-exec TLS pointer (a plain load, where a
// dynamic TLS variable of a dlopen'ed module costs a __tls_get_addr call per access: two to four per
// record); the owner frees it when the thread ends.
thread_local std::unique_ptr<ThreadState> t_owner;

__attribute__((noinline)) ThreadState& make_state() {
  t_owner.reset(new ThreadState());
  t_fast = t_owner.get();
  return *t_fast;
}

}  // namespace proton_torch

