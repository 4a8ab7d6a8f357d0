// Loading the cluster secret: 32 bytes written as 64 hex digits or as base64
// (surrounding whitespace ignored). From the file named by secret-file, or
// else from the POLLEN_SECRET environment variable; never from a flag. Errors
// name the source but never echo the secret's bytes.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "crdt/keyed_hash.h"

namespace pollen::runtime {

absl::StatusOr<crdt::ClusterSecret> ParseSecret(std::string_view text);

// `env_value` is POLLEN_SECRET (null when unset). Warns (via *warning) when the
// file is readable by group or others.
absl::StatusOr<crdt::ClusterSecret> LoadSecret(const std::string& secret_file, const char* env_value,
                                               std::string* warning);

}  // namespace pollen::runtime
