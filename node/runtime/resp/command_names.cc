#include "node/runtime/resp/command_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "node/runtime/resp/commands.h"

namespace pollen::resp {

absl::StatusOr<CommandNames> CommandNames::Parse(std::string_view renames) {
  CommandNames names;
  if (renames.empty()) return names;
  size_t pairs = 0;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(renames.data(), renames.size()), ',')) {
    const std::string_view pair(piece.data(), piece.size());
    if (++pairs > kMaxRenames) return absl::InvalidArgumentError(Cat("more than ", kMaxRenames, " renames"));
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(Cat("expected NAME=NEWNAME (NEWNAME empty to disable), got '", pair, "'"));
    }
    const std::string name = absl::AsciiStrToLower(piece.substr(0, eq));
    const std::string new_name = absl::AsciiStrToLower(piece.substr(eq + 1));
    const CommandSpec* spec = FindCommand(name);
    if (spec == nullptr) return absl::InvalidArgumentError(Cat("no command named '", name, "'"));
    if (!names.hidden_.insert(spec).second) return absl::InvalidArgumentError(Cat("'", name, "' renamed twice"));
    if (new_name.empty()) continue;
    if (new_name.size() > 64 || new_name.find_first_of(" \t\r\n\"'") != std::string::npos) {
      return absl::InvalidArgumentError(Cat("'", new_name, "': at most 64 characters, no spaces or quotes"));
    }
    if (FindCommand(new_name) != nullptr) {
      return absl::InvalidArgumentError(Cat("'", new_name, "' is the name of a command"));
    }
    if (!names.by_new_name_.emplace(new_name, spec).second) {
      return absl::InvalidArgumentError(Cat("'", new_name, "' given twice"));
    }
  }
  return names;
}

const CommandSpec* CommandNames::Find(std::string_view name) const {
  if (renames_none()) return FindCommand(name);
  if (!by_new_name_.empty()) {
    const auto it = by_new_name_.find(absl::AsciiStrToLower(absl::string_view(name.data(), name.size())));
    if (it != by_new_name_.end()) return it->second;
  }
  const CommandSpec* spec = FindCommand(name);
  return spec != nullptr && hidden_.count(spec) == 0 ? spec : nullptr;
}

}  // namespace pollen::resp
