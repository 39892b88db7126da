// Operators left unobserved while a session needs no record of them (unobserved.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace proton_torch {

// Whether ``name`` is an operator that only makes a view or reads metadata: no kernel of its own, so
// outside a trace no node of it is ever shown.
bool metadata_only(const char* name);

// Leave every such aten operator unobserved (``hide``), or observed again as torch registered it. The
// caller serializes calls (the extension's enable lock). Returns whether operators are hidden now.
bool set_unobserved(bool hide);

// After fork, in the child: every operator observed again, without taking any lock.
void observe_all_after_fork();

// The metadata-only operators the dispatcher builds no record for now (read from torch, for tests).
std::vector<std::string> unobserved_now();

}  // namespace proton_torch
