// pollenctl import: adds every key of a Redis SET (read with SSCAN from any
// Redis-protocol server) or of a file (one key a line) to a Pollen filter
// with batched BF.MADD. For moving a crawl's seen-set from scrapy-redis (a
// SET of fingerprints) to Pollen without fetching everything again.
//
// Resumable: after the adds of each SSCAN page (or batch of lines) are
// answered, the position reached (SSCAN's cursor, or the file's byte offset)
// is written to a state file, at most once a second, by a temporary name,
// fsync and rename. A run started again with the same state file and source
// goes on from there; the state file is removed when the import is done. A
// key added twice (SSCAN may return one twice, and a resumed run repeats at
// most the adds since the last save) changes nothing in a Bloom filter.
#pragma once

#include <cstdint>
#include <string>

namespace pollen::ctl {

class RespClient;
struct Options;

struct ImportOptions {
  std::string from_redis;   // redis://[[user]:password@]host[:port][/db]
  std::string set_key;      // the SET at from_redis
  std::string from_file;    // a path, or "-" for stdin (not resumable)
  size_t batch = 1000;      // keys per BF.MADD, and SSCAN's COUNT
  std::string state_path;   // default: pollenctl-import-<filter>.state
  uint64_t capacity = 0;    // with error_rate: BF.RESERVE the filter if missing
  std::string error_rate;
};

inline constexpr size_t kMaxImportBatch = 100000;

// True if the options describe one source, completely; otherwise sets *why.
bool CheckImportOptions(const ImportOptions& o, std::string* why);

// Runs `pollenctl import <filter>` (o.args[1]) into `target`.
int RunImport(RespClient& target, const Options& o);

}  // namespace pollen::ctl
