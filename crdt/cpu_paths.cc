#include "crdt/cpu_paths.h"

#include <cstdlib>
#include <cstring>

namespace pollen::crdt {

bool CpuPathsAllowed() {
  static const bool allowed = [] {
    const char* portable = std::getenv("POLLEN_PORTABLE");
    return portable == nullptr || std::strcmp(portable, "1") != 0;
  }();
  return allowed;
}

}  // namespace pollen::crdt
