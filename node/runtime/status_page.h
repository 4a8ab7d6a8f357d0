// The status page at GET / on the HTTP port: one HTML document, readable
// without JavaScript or external resources, that reloads itself every
// kRefreshSeconds. It shows this node (version, readiness), recent rates,
// the members as this node sees them (state, probe round trip, time since
// data last came from each: the replication lag) and every filter (epoch,
// generations, fill, estimated items, design / estimated / observed
// false-positive rates, memory). Everything is escaped: filter and member
// names are any bytes.
#pragma once

#include <string>
#include <string_view>

#include "node/runtime/driver.h"
#include "node/runtime/recent_rates.h"

namespace pollen::runtime {

struct StatusInput {
  const Driver::Collected* node = nullptr;  // required
  const RecentRates* rates = nullptr;       // optional: no rates section
  bool ready = false;
  std::string version;
  std::string node_name;
};

inline constexpr int kRefreshSeconds = 5;

std::string RenderStatusPage(const StatusInput& in);

// `text` with &, <, >, " and ' replaced by entities.
std::string EscapeHtml(std::string_view text);

}  // namespace pollen::runtime
