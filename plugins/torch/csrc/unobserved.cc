// Operators that launch nothing, left unobserved: torch builds no record for them.
//
// Once any RecordFunction callback listens, the dispatcher builds a record for every call of an operator
// it observes, and which operators it observes is fixed when each is registered. Half of a training
// step's records are views, metadata reads and allocations (aten::t, transpose, as_strided, resolve_conj,
// empty, ...) that launch nothing, so that a tree profile never shows them: building them is most of what the operator
// context costs over the floor. While a session needs none of them (no trace, and no other observer:
// record_callbacks.cc decides), their observed flags are cleared, and set again afterwards.
//
// What torch would have recorded for them is kept where it matters: a node one of them created (the
// backward of an expand sums its gradient) is linked through its sequence number to the operator around
// it, or at the outermost level to the context it ran in (autograd_records.cc: remember_sequence and sweep).
#include "unobserved.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>

#include "torch_internals.h"

namespace proton_torch {

namespace {

inline bool streq(const char* a, const char* b) { return std::strcmp(a, b) == 0; }

// The flags set_unobserved cleared (operators torch observed): operators are hidden while it holds any.
std::vector<bool*> g_flags;

// Every registered overload of the operators that launch nothing: the dispatcher's own handle for each.
template <typename F>
void each_launching_nothing(F&& f) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (!launches_nothing(name.name.c_str())) continue;
    auto op = dispatcher.findOp(name);
    if (op.has_value()) f(name, *op);
  }
}

}  // namespace

bool launches_nothing(const char* name) {
  if (name[0] == 'd') return streq(name, "detach");  // autograd's own record of detach
  if (!(name[0] == 'a' && name[1] == 't' && name[2] == 'e' && name[3] == 'n' && name[4] == ':' && name[5] == ':'))
    return false;
  const char* n = name + 6;
  switch (n[0]) {
    case 't': return streq(n, "t") || streq(n, "transpose");
    case 'a': return streq(n, "as_strided") || streq(n, "alias");
    case 'v': return streq(n, "view") || streq(n, "view_as");
    case 'e': return streq(n, "expand") || streq(n, "expand_as") || streq(n, "empty") || streq(n, "empty_like") ||
                     streq(n, "empty_strided");
    case 'd': return streq(n, "detach");
    case 'p': return streq(n, "permute");
    case 'u': return streq(n, "unsqueeze") || streq(n, "unbind");
    case 's': return streq(n, "squeeze") || streq(n, "slice") || streq(n, "select") || streq(n, "split") ||
                     streq(n, "split_with_sizes");
    case 'r': return streq(n, "resolve_conj") || streq(n, "resolve_neg") || streq(n, "resize_");
    case 'n': return streq(n, "narrow");
    case '_': return streq(n, "_reshape_alias") || streq(n, "_unsafe_view");
    default: return false;
  }
}

bool set_unobserved(bool hide) {
  if (hide == !g_flags.empty()) return hide;
  if (hide) {
    each_launching_nothing([](const c10::OperatorName&, const c10::OperatorHandle& op) {
      bool& observed = proton_torch_internals::observed_flag(op);
      if (!observed) return;  // torch's own choice: left as it is
      observed = false;
      g_flags.push_back(&observed);
    });
  } else {
    for (bool* observed : g_flags) *observed = true;
    g_flags.clear();
  }
  return !g_flags.empty();
}

std::vector<std::string> unobserved_now() {
  std::vector<std::string> out;
  each_launching_nothing([&out](const c10::OperatorName& name, const c10::OperatorHandle& op) {
    if (!proton_torch_internals::observed_flag(op)) {
      out.push_back(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
    }
  });
  return out;
}

}  // namespace proton_torch
