// .symtab lookups (see elf_symbols.h).  Every offset read from the file is bounds-checked: a file
// changed on disk since it was loaded gives "" at worst, never a crash.
#include "elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace proton_cupti {
namespace elf_symbols {

namespace {

struct Function {
  uint64_t start, end;
  std::string name;
};
using Table = std::vector<Function>;  // sorted by start

// The functions of `path`'s .symtab; empty when there is none.
Table read_table(const std::string& path) {
  Table table;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return table;
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < sizeof(Elf64_Ehdr)) {
    close(fd);
    return table;
  }
  size_t size = size_t(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return table;
  const uint8_t* data = static_cast<const uint8_t*>(map);
  auto fits = [size](uint64_t offset, uint64_t length) { return offset <= size && length <= size - offset; };
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data);
  bool elf64 = std::equal(eh->e_ident, eh->e_ident + SELFMAG, ELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
               eh->e_shentsize == sizeof(Elf64_Shdr) && fits(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr));
  if (elf64) {
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(data + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      const Elf64_Shdr& symtab = sections[i];
      if (symtab.sh_type != SHT_SYMTAB || symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= eh->e_shnum)
        continue;
      const Elf64_Shdr& strtab = sections[symtab.sh_link];
      if (!fits(symtab.sh_offset, symtab.sh_size) || !fits(strtab.sh_offset, strtab.sh_size)) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(data + symtab.sh_offset);
      const char* names = reinterpret_cast<const char*>(data + strtab.sh_offset);
      size_t count = symtab.sh_size / sizeof(Elf64_Sym);
      for (size_t k = 0; k < count; ++k) {
        const Elf64_Sym& s = syms[k];
        unsigned type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
            s.st_name >= strtab.sh_size)
          continue;
        const char* name = names + s.st_name;
        size_t length = ::strnlen(name, strtab.sh_size - s.st_name);
        if (length == 0 || length == strtab.sh_size - s.st_name) continue;  // empty, or not terminated in the table
        table.push_back(Function{s.st_value, s.st_value + std::max<uint64_t>(s.st_size, 1), std::string(name, length)});
      }
    }
  }
  munmap(map, size);
  std::sort(table.begin(), table.end(), [](const Function& a, const Function& b) { return a.start < b.start; });
  return table;
}

std::mutex tables_mu;
std::unordered_map<std::string, std::shared_ptr<const Table>> tables;

}  // namespace

std::string function_at(const std::string& path, uint64_t address) {
  std::shared_ptr<const Table> table;
  {
    std::lock_guard<std::mutex> g(tables_mu);
    auto it = tables.find(path);
    if (it != tables.end()) table = it->second;
  }
  if (!table) {
    auto read = std::make_shared<const Table>(read_table(path));
    std::lock_guard<std::mutex> g(tables_mu);
    table = tables.emplace(path, std::move(read)).first->second;
  }
  auto it = std::upper_bound(table->begin(), table->end(), address,
                             [](uint64_t a, const Function& f) { return a < f.start; });
  if (it == table->begin()) return "";
  --it;
  return address < it->end ? it->name : "";
}

}  // namespace elf_symbols
}  // namespace proton_cupti
