// Fuzz target: the config file parser. Any text yields either a config or an
// error; a config it accepts renders and parses back to the same values.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "node/runtime/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::runtime;
  std::string text(reinterpret_cast<const char*>(data), size);
  // Odd first byte: the fuzzed bytes follow a valid config, so mutations reach
  // option values and filter sections, not only the first syntax check.
  if (size > 0 && (data[0] & 1)) {
    text = std::string("fanout = 4\nseeds = 127.0.0.1:1,[::1]:2\n[filter f]\ncapacity = 10\nfpr = 0.1\n") +
           text.substr(1);
  }
  // Start from the defaults (what the daemon layers the file onto).
  static const char* const kArgv[] = {"pollend"};
  static const DaemonConfig kDefaults =
      ParseCommandLine(1, kArgv, [](const char*) -> const char* { return nullptr; })->config;
  DaemonConfig config = kDefaults;
  if (!ApplyConfigText(text, "fuzz", &config).ok()) return 0;
  DaemonConfig again = config;
  if (!ApplyConfigText(RenderConfig(config), "rendered", &again).ok()) std::abort();
  if (again.filters.size() != config.filters.size()) std::abort();
  for (size_t i = 0; i < config.filters.size(); ++i) {
    if (again.filters[i].name != config.filters[i].name || again.filters[i].capacity != config.filters[i].capacity) {
      std::abort();
    }
  }
  return 0;
}
