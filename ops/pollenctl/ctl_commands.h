// pollenctl subcommands. Each prints its result (human or --json) to stdout,
// problems to stderr, and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "ops/pollenctl/import.h"
#include "ops/pollenctl/resp_client.h"

namespace pollen::ctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitNo = 1,     // answered "no" / not found (exists: some key absent; whohas: nobody)
  kExitUsage = 2,  // bad command line
  kExitError = 3,  // connection, protocol, authentication or other server error
};

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 6380;
  std::string password;  // --password or POLLEN_PASSWORD
  bool json = false;
  int timeout_seconds = 10;
  std::vector<std::string> args;  // subcommand and its arguments
  ImportOptions import;           // import's options (--from-redis, --from-file, ...)
  bool import_options_given = false;
};

// Runs opts.args[0] over `client` (already connected and authenticated).
int RunSubcommand(RespClient& client, const Options& opts);

// True when `name` is a known subcommand with an acceptable argument count;
// otherwise sets *why.
bool CheckUsage(const std::vector<std::string>& args, std::string* why);

}  // namespace pollen::ctl
