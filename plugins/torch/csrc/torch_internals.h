// What this extension reads or sets in torch that torch keeps private, in one place.
//
// A private member may be named in the template arguments of an explicit instantiation (access is
// not checked there); the instantiation defines a friend that hands the member pointer out. The
// member's type is deduced, so a torch that renames a member, or changes its type where it is used
// below, fails to compile here instead of misbehaving. Built and tested against torch 2.11 (GPU
// machine) and 2.13 (CI).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <cstddef>
#include <string>
#include <variant>

namespace proton_torch_internals {

template <auto Member, typename Tag>
struct Steal {
  friend constexpr auto steal(Tag) { return Member; }
};

struct RecordFnTag {
  friend constexpr auto steal(RecordFnTag);
};
struct StepCallbacksTag {
  friend constexpr auto steal(StepCallbacksTag);
};
struct OperatorDefTag {
  friend constexpr auto steal(OperatorDefTag);
};
struct ObservedTag {
  friend constexpr auto steal(ObservedTag);
};

template struct Steal<&at::RecordFunction::fn_, RecordFnTag>;
template struct Steal<&at::RecordFunction::step_callbacks_, StepCallbacksTag>;
template struct Steal<&c10::OperatorHandle::operatorDef_, OperatorDefTag>;
template struct Steal<&c10::impl::OperatorEntry::is_observed_, ObservedTag>;

// Whether a record names an operator (its schema) rather than carrying a string of its own (autograd's
// engine records, record_function scopes): the alternative RecordFunction::fn_ holds. Reading it touches
// the record alone; the operator's name lies in its schema, rarely in cache.
inline bool names_operator(const at::RecordFunction& rf) { return (rf.*steal(RecordFnTag{})).index() == 1; }

// The name a record carries as a string of its own (names_operator(rf) must not hold): read in place, with no
// call into libtorch.
inline const std::string& record_string(const at::RecordFunction& rf) { return std::get<0>(rf.*steal(RecordFnTag{})); }

// The schema of the operator a record names (names_operator(rf) must hold): its address, nothing of it read.
inline const void* operator_schema(const at::RecordFunction& rf) {
  return &std::get<1>(rf.*steal(RecordFnTag{})).get();
}

// How many observers this record runs: 1 where ours is the only one.
inline size_t observer_count(const at::RecordFunction& rf) {
  return (rf.*steal(StepCallbacksTag{})).callbacks_.size();
}

// The flag the dispatcher reads before it builds a record for a call of the operator. torch sets it
// once, when the operator is registered, from c10::ObservedOperators; it is const there, and is
// written only through this reference (the entry itself lives on the heap, in the dispatcher's list).
inline bool& observed_flag(const c10::OperatorHandle& op) {
  auto& entry = (op.*steal(OperatorDefTag{}))->op;
  return const_cast<bool&>(entry.*steal(ObservedTag{}));
}

}  // namespace proton_torch_internals
