// Operators left unobserved while a session needs no record of them (unobserved.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace proton_torch {

// Whether ``name`` is an operator that launches no device work of its own: it makes a view, reads
// metadata or allocates. Outside a trace no node of it is ever shown (resolve_conj and resolve_neg copy
// a conjugated or negated tensor through a clone, which is recorded in its own right).
bool launches_nothing(const char* name);

// Leave every such operator unobserved (``hide``), or observed again as torch registered it. The
// caller serializes calls (the extension's enable lock; a forked child, where no other thread runs, may
// call it without). Takes no lock of its own. Returns whether operators are hidden now.
bool set_unobserved(bool hide);

// The operators that launch nothing the dispatcher builds no record for now (read from torch, for tests).
std::vector<std::string> unobserved_now();

}  // namespace proton_torch
