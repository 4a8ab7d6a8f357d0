#include "ops/pollenctl/import.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "crdt/snapshot.h"
#include "ops/pollenctl/ctl_commands.h"
#include "ops/pollenctl/output.h"
#include "ops/pollenctl/resp_client.h"

namespace pollen::ctl {
namespace {

using resp::Reply;
using Clock = std::chrono::steady_clock;

constexpr auto kStateSaveInterval = std::chrono::seconds(1);
constexpr auto kProgressInterval = std::chrono::milliseconds(200);
constexpr size_t kMaxKeyBytes = 64 << 10;  // a longer line in a key file is an error, not a key

struct RedisUrl {
  std::string host;
  uint16_t port = 6379;
  std::string user;
  std::string password;
  int db = 0;
};

// redis://[[user]:password@]host[:port][/db]; host may be [IPv6].
bool ParseRedisUrl(const std::string& url, RedisUrl* out, std::string* why) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind("rediss://", 0) == 0) {
    *why = "TLS sources (rediss://) are not supported: read the SET over redis:// or export it to a file";
    return false;
  }
  if (url.rfind(kScheme, 0) != 0) {
    *why = "--from-redis needs a redis:// URL, not '" + url + "'";
    return false;
  }
  std::string rest = url.substr(kScheme.size());
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string::npos) {
      out->password = userinfo;
    } else {
      out->user = userinfo.substr(0, colon);
      out->password = userinfo.substr(colon + 1);
    }
  }
  std::string db;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) {
      *why = "unclosed '[' in " + url;
      return false;
    }
    out->host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') {
        *why = "bad host in " + url;
        return false;
      }
      port = rest.substr(close + 2);
    }
  } else if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    out->host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    out->host = rest;
  }
  uint32_t port_number = 0;
  if (out->host.empty() || (!port.empty() && (!absl::SimpleAtoi(port, &port_number) || port_number == 0 ||
                                               port_number > 65535))) {
    *why = "bad host or port in " + url;
    return false;
  }
  if (!port.empty()) out->port = static_cast<uint16_t>(port_number);
  if (!db.empty() && (!absl::SimpleAtoi(db, &out->db) || out->db < 0)) {
    *why = "bad database number in " + url;
    return false;
  }
  return true;
}

// Where an import stands: which source, how far (SSCAN's cursor or a byte
// offset), and how many keys were added before that point.
struct ImportState {
  std::string source;
  uint64_t position = 0;
  uint64_t keys = 0;
};

constexpr char kStateMagic[] = "pollenctl-import 1";

// Reads a state file; nullopt with *why empty if there is none.
std::optional<ImportState> ReadState(const std::string& path, std::string* why) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string magic, source, position, keys;
  ImportState s;
  if (!std::getline(in, magic) || magic != kStateMagic || !std::getline(in, source) ||
      source.rfind("source ", 0) != 0 || !std::getline(in, position) || position.rfind("position ", 0) != 0 ||
      !absl::SimpleAtoi(position.substr(9), &s.position) || !std::getline(in, keys) ||
      keys.rfind("keys ", 0) != 0 || !absl::SimpleAtoi(keys.substr(5), &s.keys)) {
    *why = "state file " + path + " is damaged: remove it to import from the start";
    return std::nullopt;
  }
  s.source = source.substr(7);
  return s;
}

// Writes the state by a temporary name, fsync and rename (as snapshots are).
bool WriteState(const std::string& path, const ImportState& s, std::string* why) {
  const std::string text = absl::StrCat(kStateMagic, "\nsource ", s.source, "\nposition ", s.position, "\nkeys ",
                                        s.keys, "\n");
  if (absl::Status status = crdt::WriteFileAtomically(path, text); !status.ok()) {
    *why = absl::StrCat("cannot write state file ", path, ": ", status.message());
    return false;
  }
  return true;
}

// A source of keys, read a page at a time. A page's keys are added before
// its end position is saved, so a resumed import skips nothing.
class KeySource {
 public:
  virtual ~KeySource() = default;
  // Replaces *keys with the next page (possibly empty while not done).
  // Sets *end to the position after it. False on error, with *why.
  virtual bool NextPage(std::vector<std::string>* keys, uint64_t* end, bool* done, std::string* why) = 0;
  // How far along, 0..1, if known (for the progress line); negative if not.
  virtual double Fraction(uint64_t position, uint64_t keys) const = 0;
};

class SetSource : public KeySource {
 public:
  SetSource(RespClient& client, std::string key, uint64_t cursor, size_t count, uint64_t cardinality)
      : client_(client), key_(std::move(key)), cursor_(cursor), count_(count), cardinality_(cardinality) {}

  bool NextPage(std::vector<std::string>* keys, uint64_t* end, bool* done, std::string* why) override {
    absl::StatusOr<Reply> r = client_.Call({"SSCAN", key_, absl::StrCat(cursor_), "COUNT", absl::StrCat(count_)});
    if (!r.ok()) {
      *why = absl::StrCat("source: ", r.status().message());
      return false;
    }
    if (r->is_error()) {
      *why = "source: SSCAN: " + r->str;
      return false;
    }
    if (r->type != Reply::Type::kArray || r->elements.size() != 2 ||
        !absl::SimpleAtoi(r->elements[0].str, &cursor_) || r->elements[1].type != Reply::Type::kArray) {
      *why = "source: unexpected SSCAN reply " + r->DebugString();
      return false;
    }
    keys->clear();
    for (Reply& e : r->elements[1].elements) keys->push_back(std::move(e.str));
    *end = cursor_;
    *done = cursor_ == 0;
    return true;
  }

  double Fraction(uint64_t, uint64_t keys) const override {
    return cardinality_ == 0 ? -1.0 : std::min(1.0, static_cast<double>(keys) / static_cast<double>(cardinality_));
  }

 private:
  RespClient& client_;
  const std::string key_;
  uint64_t cursor_;
  const size_t count_;
  const uint64_t cardinality_;  // SCARD at the start
};

class FileSource : public KeySource {
 public:
  FileSource(std::FILE* file, bool owned, uint64_t offset, size_t lines, uint64_t size)
      : file_(file), owned_(owned), offset_(offset), lines_(lines), size_(size) {}
  ~FileSource() override {
    std::free(line_);
    if (owned_) std::fclose(file_);
  }

  bool NextPage(std::vector<std::string>* keys, uint64_t* end, bool* done, std::string* why) override {
    keys->clear();
    while (keys->size() < lines_) {
      errno = 0;
      const ssize_t n = ::getline(&line_, &capacity_, file_);
      if (n < 0) {
        if (errno != 0 || std::ferror(file_)) {
          *why = std::string("reading the file: ") + std::strerror(errno);
          return false;
        }
        *done = true;
        break;
      }
      if (static_cast<size_t>(n) > kMaxKeyBytes) {
        *why = absl::StrFormat("the line at byte %d is longer than %d bytes: is this a file of keys?", offset_,
                               kMaxKeyBytes);
        return false;
      }
      offset_ += static_cast<uint64_t>(n);
      std::string_view key(line_, static_cast<size_t>(n));
      if (!key.empty() && key.back() == '\n') key.remove_suffix(1);
      if (!key.empty() && key.back() == '\r') key.remove_suffix(1);
      if (!key.empty()) keys->emplace_back(key);
    }
    *end = offset_;
    return true;
  }

  double Fraction(uint64_t position, uint64_t) const override {
    return size_ == 0 ? -1.0 : std::min(1.0, static_cast<double>(position) / static_cast<double>(size_));
  }

 private:
  std::FILE* const file_;
  const bool owned_;
  char* line_ = nullptr;  // getline's buffer
  size_t capacity_ = 0;
  uint64_t offset_;
  const size_t lines_;
  const uint64_t size_;  // 0 for stdin
};

bool ConnectSource(const ImportOptions& io, const Options& o, RespClient* source, RedisUrl* url, std::string* why) {
  if (!ParseRedisUrl(io.from_redis, url, why)) return false;
  if (absl::Status s = source->Connect(url->host, url->port, std::chrono::seconds(o.timeout_seconds)); !s.ok()) {
    *why = absl::StrCat("source: ", s.message());
    return false;
  }
  std::vector<std::vector<std::string>> setup;
  if (!url->password.empty()) {
    setup.push_back(url->user.empty() ? std::vector<std::string>{"AUTH", url->password}
                                      : std::vector<std::string>{"AUTH", url->user, url->password});
  }
  if (url->db != 0) setup.push_back({"SELECT", absl::StrCat(url->db)});
  for (const std::vector<std::string>& args : setup) {
    absl::StatusOr<Reply> r = source->Call(args);
    if (!r.ok() || r->is_error()) {
      *why = absl::StrCat("source: ", args[0], " failed: ", r.ok() ? r->str : std::string(r.status().message()));
      return false;
    }
  }
  return true;
}

// Calls `args` on the target; false with *why on a transport or server error.
bool CallTarget(RespClient& target, const std::vector<std::string>& args, Reply* reply, std::string* why) {
  absl::StatusOr<Reply> r = target.Call(args);
  if (!r.ok()) {
    *why = absl::StrCat("target: ", r.status().message());
    return false;
  }
  if (r->is_error()) {
    *why = absl::StrCat("target: ", args[0], ": ", r->str);
    return false;
  }
  *reply = *std::move(r);
  return true;
}

// The filter must exist before keys go in: BF.MADD would create a small
// default filter, far too small for a crawl's seen-set.
bool EnsureFilter(RespClient& target, const std::string& filter, const ImportOptions& io, std::string* why) {
  Reply r;
  if (!CallTarget(target, {"EXISTS", filter}, &r, why)) return false;
  if (r.integer == 1) return true;
  if (io.capacity == 0) {
    *why = "filter '" + filter +
           "' does not exist: create it first (BF.RESERVE, or let the crawl's dupefilter create it), or pass "
           "--capacity and --error-rate";
    return false;
  }
  return CallTarget(target, {"BF.RESERVE", filter, io.error_rate, absl::StrCat(io.capacity)}, &r, why);
}

class Progress {
 public:
  explicit Progress(bool terminal) : terminal_(terminal), start_(Clock::now()) {}

  void Show(uint64_t keys, double fraction, bool final_line) {
    if (!terminal_) return;
    const Clock::time_point now = Clock::now();
    if (!final_line && now - last_ < kProgressInterval) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    std::string line = absl::StrFormat("\r%s keys", WithThousands(keys));
    if (fraction >= 0) absl::StrAppendFormat(&line, " (%.1f%%)", 100.0 * fraction);
    if (seconds > 0) absl::StrAppendFormat(&line, ", %s keys/s", WithThousands(static_cast<uint64_t>(keys / seconds)));
    std::cerr << line << "   " << (final_line ? "\n" : "") << std::flush;
  }

  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  static std::string WithThousands(uint64_t n) {
    std::string digits = absl::StrCat(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
      out.push_back(digits[i]);
    }
    return out;
  }

  const bool terminal_;
  const Clock::time_point start_;
  Clock::time_point last_{};
};

}  // namespace

bool CheckImportOptions(const ImportOptions& o, std::string* why) {
  const bool from_redis = !o.from_redis.empty();
  const bool from_file = !o.from_file.empty();
  if (from_redis == from_file) {
    *why = "import needs one source: --from-redis URL --set KEY, or --from-file PATH";
  } else if (from_redis && o.set_key.empty()) {
    *why = "--from-redis needs --set KEY (the SET to read)";
  } else if (!from_redis && !o.set_key.empty()) {
    *why = "--set goes with --from-redis";
  } else if (o.batch == 0 || o.batch > kMaxImportBatch) {
    *why = absl::StrCat("--batch needs a number from 1 to ", kMaxImportBatch);
  } else if ((o.capacity == 0) != o.error_rate.empty()) {
    *why = "--capacity and --error-rate go together";
  } else {
    return true;
  }
  return false;
}

int RunImport(RespClient& target, const Options& o) {
  const ImportOptions& io = o.import;
  const std::string& filter = o.args[1];
  auto fail = [](const std::string& why) {
    std::cerr << "pollenctl: import: " << why << "\n";
    return kExitError;
  };
  std::string why;
  if (!EnsureFilter(target, filter, io, &why)) return fail(why);

  // The source, and where a saved state says to go on from.
  const bool from_stdin = io.from_file == "-";
  const std::string state_path = io.state_path.empty() ? "pollenctl-import-" + filter + ".state" : io.state_path;
  RespClient source_client;
  RedisUrl url;
  std::string source_name;
  if (!io.from_redis.empty()) {
    if (!ConnectSource(io, o, &source_client, &url, &why)) return fail(why);
    source_name = absl::StrCat("redis://", url.host, ":", url.port, "/", url.db, " set ", io.set_key);
  } else {
    source_name = from_stdin ? "stdin" : "file " + io.from_file;
  }
  ImportState state{source_name, 0, 0};
  if (!from_stdin) {
    std::optional<ImportState> saved = ReadState(state_path, &why);
    if (!why.empty()) return fail(why);
    if (saved.has_value()) {
      if (saved->source != source_name) {
        return fail("state file " + state_path + " belongs to another import (" + saved->source +
                    "): remove it, or pass --state");
      }
      state = *saved;
      std::cerr << "pollenctl: import: resuming from " << state_path << " after " << state.keys << " keys\n";
    }
  }
  std::unique_ptr<KeySource> source;
  if (!io.from_redis.empty()) {
    absl::StatusOr<Reply> card = source_client.Call({"SCARD", io.set_key});
    if (!card.ok() || card->is_error()) {
      return fail("source: SCARD " + io.set_key + ": " +
                  (card.ok() ? card->str : std::string(card.status().message())));
    }
    if (card->integer == 0 && state.keys == 0) return fail("source: set '" + io.set_key + "' is empty or missing");
    source = std::make_unique<SetSource>(source_client, io.set_key, state.position, io.batch,
                                         static_cast<uint64_t>(card->integer));
  } else {
    std::FILE* file = from_stdin ? stdin : std::fopen(io.from_file.c_str(), "rb");
    if (file == nullptr) return fail("cannot open " + io.from_file + ": " + std::strerror(errno));
    uint64_t size = 0;
    if (!from_stdin) {
      if (std::fseek(file, 0, SEEK_END) != 0) return fail("cannot seek in " + io.from_file);
      size = static_cast<uint64_t>(std::ftell(file));
      if (state.position > size) {
        std::fclose(file);
        return fail("state file " + state_path + " points past the end of " + io.from_file + ": remove it");
      }
      std::fseek(file, static_cast<long>(state.position), SEEK_SET);
    }
    source = std::make_unique<FileSource>(file, !from_stdin, state.position, io.batch, size);
  }

  // Page by page: add its keys in batches, then record the page's end.
  Progress progress(::isatty(STDERR_FILENO) == 1 && !o.json);
  const uint64_t keys_before = state.keys;
  uint64_t new_keys = 0;
  Clock::time_point saved_at = Clock::now();
  std::vector<std::string> page;
  std::vector<std::string> madd;
  bool done = false;
  while (!done) {
    uint64_t end = 0;
    if (!source->NextPage(&page, &end, &done, &why)) return fail(why);
    for (size_t start = 0; start < page.size(); start += io.batch) {
      const size_t n = std::min(io.batch, page.size() - start);
      madd.assign({"BF.MADD", filter});
      madd.insert(madd.end(), page.begin() + start, page.begin() + start + n);
      Reply r;
      if (!CallTarget(target, madd, &r, &why)) return fail(why);
      if (r.type != Reply::Type::kArray || r.elements.size() != n) return fail("unexpected reply " + r.DebugString());
      for (const Reply& e : r.elements) {
        if (e.is_error()) return fail("target refused a key: " + e.str);  // a full NONSCALING filter
        new_keys += e.integer == 1 ? 1 : 0;
      }
      state.keys += n;
    }
    state.position = end;
    progress.Show(state.keys, source->Fraction(state.position, state.keys), false);
    if (!from_stdin && !done && Clock::now() - saved_at >= kStateSaveInterval) {
      if (!WriteState(state_path, state, &why)) return fail(why);
      saved_at = Clock::now();
    }
  }
  progress.Show(state.keys, 1.0, true);
  if (!from_stdin) std::remove(state_path.c_str());  // done: nothing to resume
  const double seconds = progress.Seconds();
  if (o.json) {
    std::cout << absl::StrFormat("{\"filter\":%s,\"source\":%s,\"keys\":%d,\"new\":%d,\"seconds\":%.3f}\n",
                                 JsonString(filter), JsonString(source_name), state.keys - keys_before, new_keys,
                                 seconds);
  } else {
    std::cout << absl::StrFormat("imported %d keys (%d new to the filter) from %s into %s in %.1f s\n",
                                 state.keys - keys_before, new_keys, source_name, filter, seconds);
  }
  return kExitOk;
}

}  // namespace pollen::ctl
