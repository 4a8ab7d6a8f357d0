// The names clients call commands by: the command table's, with Redis'
// rename-command applied. A command renamed answers to its new name only; a
// command renamed to "" answers to no name (disabled), as in Redis:
//
//   rename-command = FLUSHALL=,FLUSHDB=          # both disabled
//   rename-command = FLUSHALL=wipe-everything-7f3a  # only the new name runs it
//
// COMMAND (INFO, LIST, COUNT, DOCS) keeps describing the table, under the
// table's names. Immutable once parsed; read from every RESP thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pollen::resp {

struct CommandSpec;

class CommandNames {
 public:
  static constexpr size_t kMaxRenames = 64;

  CommandNames() = default;  // every command under its own name
  // `renames`: comma-separated NAME=NEWNAME pairs (either case, no spaces);
  // empty: none. InvalidArgument for an unknown NAME, a NAME given twice, a
  // NEWNAME that is another command's name or given twice, or more than
  // kMaxRenames pairs.
  static absl::StatusOr<CommandNames> Parse(std::string_view renames);

  // The command `name` (either case) runs; nullptr when no command answers
  // to it.
  const CommandSpec* Find(std::string_view name) const;
  bool renames_none() const { return by_new_name_.empty() && hidden_.empty(); }

 private:
  std::map<std::string, const CommandSpec*> by_new_name_;  // lower case
  std::set<const CommandSpec*> hidden_;                    // renamed or disabled
};

}  // namespace pollen::resp
