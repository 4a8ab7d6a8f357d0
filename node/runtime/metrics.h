// Prometheus text exposition (format 0.0.4) of everything pollend measures:
// DESIGN section 6 per filter and generation and per node, plus the
// transports, the RESP server and persistence. Names start with "pollen_",
// carry their unit, counters end in "_total"; every family has HELP and TYPE.
// docs/metrics.md lists them all.
#pragma once

#include <cstdint>
#include <string>

#include "node/runtime/driver.h"
#include "node/runtime/resp/server_context.h"
#include "node/runtime/runtime_counters.h"

namespace pollen::runtime {

struct MetricsInput {
  const Driver::Collected* node = nullptr;        // required
  const RuntimeCounters* transport = nullptr;     // required
  const resp::ServerCounters* resp = nullptr;     // optional
  const resp::CommandStats* command_stats = nullptr;  // optional
  const Persistence* persistence = nullptr;       // optional
  bool ready = false;
  std::string version;
  std::string node_name;
};

std::string RenderMetrics(const MetricsInput& in);

// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabel(std::string_view value);

}  // namespace pollen::runtime
