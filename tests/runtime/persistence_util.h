// Helpers shared by the persistence tests that drive a Node and a Persistence
// in one process.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "node/core/node.h"
#include "node/runtime/persistence.h"
#include "tests/runtime/dir_util.h"

namespace pollen::testing {

inline bool Has(const node::Node& n, std::string_view filter, std::string_view key) {
  auto r = n.Exists(filter, key);
  return r.ok() && *r;
}

// Adds `keys` to the node, then logs them, as the RESP path does.
inline void AddAndLog(node::Node& n, runtime::Persistence& p, std::string_view filter,
                      const std::vector<std::string>& keys) {
  std::vector<std::string_view> views;
  for (const auto& k : keys) {
    ASSERT_TRUE(n.Add(filter, k).ok());
    views.push_back(k);
  }
  ASSERT_TRUE(p.LogAdds(filter, views).ok());
}

}  // namespace pollen::testing
