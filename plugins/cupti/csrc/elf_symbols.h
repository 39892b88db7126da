// Function names from an ELF file's full symbol table (.symtab), for functions the
// dynamic symbol table that dladdr reads leaves out: those of a program linked
// without -rdynamic (a CUDA program built with nvcc), hidden ones of a library.
// Read only when native frames are named (at flush), once per file.
#pragma once

#include <cstdint>
#include <string>

namespace proton_cupti {
namespace elf_symbols {

// The name of the function of ELF file `path` whose [start, start + size) holds
// `address` (an address of the file, as its symbols give them: the run-time
// address less the object's load bias); "" where the file cannot be read, has no
// .symtab (stripped) or no function there.
std::string function_at(const std::string& path, uint64_t address);

}  // namespace elf_symbols
}  // namespace proton_cupti
