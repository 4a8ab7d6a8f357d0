// pollenctl: administer a Pollen node over RESP. See --help.
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "ops/pollenctl/ctl_commands.h"
#include "ops/pollenctl/output.h"

namespace {

constexpr const char* kUsage = R"(usage: pollenctl [options] <command> [args...]

Talks to one pollend over RESP (the Redis protocol).

commands:
  status                         this node: members, filters, counters
  members                        cluster members as this node sees them
  filters                        filters with capacity, epoch, fill, items, memory
  add <filter> <key>...          add keys (creates the filter if missing)
  exists <filter> <key>...       check keys; exit 1 if any is absent
  rotate <filter>                propose the filter's next epoch (new generation)
  falsepositive <filter> [<n>]   report n (default 1) keys the filter answered
                                 present for that your exact store lacks
                                 (the observed rate shows in 'filters')
  whohas <digests|*> <key>       owners of digest filters that may hold key;
                                 digests: comma-separated names; exit 1 if none
  keyring list                   key ids, primary first
  keyring install [<b64>|-]      install a 32-byte key (base64); '-' or no
                                 argument reads it from stdin (keeps it out of ps)
  keyring use <id>               make an installed key the primary
  keyring remove <id>            remove a key
  snapshot                       write a snapshot now
  import <filter> SOURCE         add every key of SOURCE with batched BF.MADD,
                                 resumable (a state file, saved each second and
                                 removed when done); progress on a terminal:
    --from-redis <url> --set <key>   the members of a Redis SET, read by SSCAN
                                 (url: redis://[[user]:password@]host[:port][/db]),
                                 e.g. scrapy-redis's '<spider>:dupefilter'
    --from-file <path>           one key a line ('-': stdin, not resumable)
    --batch <n>                  keys per BF.MADD and SSCAN COUNT (default 1000)
    --state <path>               default: pollenctl-import-<filter>.state
    --capacity <n> --error-rate <e>  BF.RESERVE the filter if it does not
                                 exist (without them a missing filter is an error)

options:
  --host <host>        default 127.0.0.1 (IPv6 literals and names work)
  --port <port>        default 6380
  --password <pw>      AUTH password; default: $POLLEN_PASSWORD
  --timeout <seconds>  per request, default 10
  --json               machine-readable output
  --help               this text
  --version            pollenctl's version
  --                   end of options (for keys that start with --)

exit codes: 0 ok, 1 answered no / not found, 2 usage, 3 connection or server error
)";

int Usage(const std::string& why) {
  std::cerr << "pollenctl: " << why << "\n\n" << kUsage;
  return pollen::ctl::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using pollen::ctl::Options;
  Options o;
  if (const char* pw = std::getenv("POLLEN_PASSWORD")) o.password = pw;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (options_done || a.rfind("--", 0) != 0) {
      o.args.push_back(a);
      continue;
    }
    auto value = [&](const char* name, std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      (void)name;
      return true;
    };
    std::string v;
    if (a == "--") {
      options_done = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return pollen::ctl::kExitOk;
    } else if (a == "--version") {
      std::cout << "pollenctl " << POLLEN_VERSION << "\n";
      return pollen::ctl::kExitOk;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--host") {
      if (!value("--host", &o.host) || o.host.empty()) return Usage("--host needs a value");
    } else if (a == "--port") {
      uint32_t port = 0;
      if (!value("--port", &v) || !absl::SimpleAtoi(v, &port) || port == 0 || port > 65535) {
        return Usage("--port needs a number from 1 to 65535");
      }
      o.port = static_cast<uint16_t>(port);
    } else if (a == "--password") {
      if (!value("--password", &o.password)) return Usage("--password needs a value");
    } else if (a == "--timeout") {
      if (!value("--timeout", &v) || !absl::SimpleAtoi(v, &o.timeout_seconds) || o.timeout_seconds <= 0 ||
          o.timeout_seconds > 3600) {
        return Usage("--timeout needs seconds from 1 to 3600");
      }
    } else if (a == "--from-redis" || a == "--set" || a == "--from-file" || a == "--state" ||
               a == "--error-rate") {
      std::string* target = a == "--from-redis" ? &o.import.from_redis
                            : a == "--set"      ? &o.import.set_key
                            : a == "--from-file" ? &o.import.from_file
                            : a == "--state"    ? &o.import.state_path
                                                : &o.import.error_rate;
      if (!value(a.c_str(), target) || target->empty()) return Usage(a + " needs a value");
      o.import_options_given = true;
    } else if (a == "--batch") {
      if (!value("--batch", &v) || !absl::SimpleAtoi(v, &o.import.batch)) return Usage("--batch needs a number");
      o.import_options_given = true;
    } else if (a == "--capacity") {
      if (!value("--capacity", &v) || !absl::SimpleAtoi(v, &o.import.capacity) || o.import.capacity == 0) {
        return Usage("--capacity needs a positive number");
      }
      o.import_options_given = true;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }
  std::string why;
  if (!pollen::ctl::CheckUsage(o.args, &why)) return Usage(why);
  if (o.args[0] == "import" && !pollen::ctl::CheckImportOptions(o.import, &why)) return Usage(why);
  if (o.args[0] != "import" && o.import_options_given) return Usage("those options go with 'import'");

  pollen::ctl::RespClient client;
  if (absl::Status s = client.Connect(o.host, o.port, std::chrono::seconds(o.timeout_seconds)); !s.ok()) {
    std::cerr << "pollenctl: " << s.message() << "\n";
    return pollen::ctl::kExitError;
  }
  if (!o.password.empty()) {
    absl::StatusOr<pollen::resp::Reply> r = client.Call({"AUTH", o.password});
    if (!r.ok()) {
      std::cerr << "pollenctl: " << r.status().message() << "\n";
      return pollen::ctl::kExitError;
    }
    if (r->is_error()) {
      std::cerr << "pollenctl: authentication failed: " << r->str << "\n";
      return pollen::ctl::kExitError;
    }
  }
  return pollen::ctl::RunSubcommand(client, o);
}
