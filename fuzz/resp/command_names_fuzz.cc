// Fuzz target: rename-command's value (resp::CommandNames::Parse). Any text
// is accepted or refused, never half-applied; once accepted, each NEWNAME
// runs its command, and no command answers to two names.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "node/runtime/resp/command_names.h"
#include "node/runtime/resp/commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::resp;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<CommandNames> names = CommandNames::Parse(text);
  if (!names.ok()) return 0;
  if (text.empty() != names->renames_none()) std::abort();
  if (text.empty()) return 0;
  std::map<const CommandSpec*, int> answers;  // names each renamed command answers to
  for (absl::string_view pair : absl::StrSplit(text, ',')) {
    const size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) std::abort();  // Parse accepted a pair without '='
    const std::string name(pair.substr(0, eq)), new_name(pair.substr(eq + 1));
    const CommandSpec* spec = FindCommand(name);
    if (spec == nullptr || names->Find(name) != nullptr) std::abort();  // renamed away
    if (!new_name.empty()) {
      if (names->Find(new_name) != spec) std::abort();
      if (++answers[spec] > 1) std::abort();
    }
  }
  return 0;
}
