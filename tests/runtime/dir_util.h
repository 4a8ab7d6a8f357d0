// Directory listing for the runtime tests that inspect a data dir.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pollen::testing {

// Names in `dir` (without "." and ".."), sorted; empty if it cannot be read.
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pollen::testing
