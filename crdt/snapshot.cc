#include "crdt/snapshot.h"

#include <cassert>

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace pollen::crdt {
namespace {

constexpr char kMagic[8] = {'P', 'L', 'N', 'S', 'N', 'A', 'P', '\0'};
constexpr size_t kChecksumBytes = 32;  // BLAKE2b-256
constexpr size_t kPreambleBytes = sizeof kMagic + 4 + 4;

void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Bounds-checked little-endian reader over a byte string.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool U16(uint16_t& v) { return Uint(v, 2); }
  bool U32(uint32_t& v) { return Uint(v, 4); }
  bool U64(uint64_t& v) { return Uint(v, 8); }
  bool Bytes(size_t n, std::string_view& v) {
    if (bytes_.size() - pos_ < n) return false;
    v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  template <typename T>
  bool Uint(T& v, size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<T>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return true;
  }
  std::string_view bytes_;
  size_t pos_ = 0;
};

std::string Checksum(std::string_view bytes) {
  std::string out(kChecksumBytes, '\0');
  crypto_generichash(reinterpret_cast<uint8_t*>(out.data()), out.size(),
                     reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, 0);
  return out;
}

// The header after the name: filter_id, blocks, k, generations, hash scheme,
// key id, generation count.
constexpr size_t kHeaderFixedBytes = 8 + 8 + 4 + 4 + 4 + 8 + 4;
constexpr uint16_t kLongNameMark = 0xFFFF;

absl::Status Corrupt(std::string_view what) { return absl::DataLossError(absl::StrCat("snapshot: ", std::string(what))); }

std::string ErrnoText() { return std::strerror(errno); }

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("write ", path, ": ", ErrnoText()));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The format above, with `write_generations(out)` appending gen_count
// generations (epoch u64, then the words).
template <typename WriteGenerations>
std::string Encode(const FilterParams& p, size_t gen_count, WriteGenerations&& write_generations) {
  EnsureSodiumInitialized();
  std::string header;
  // name_len is a u16; a name of 0xFFFF bytes or more (binary-safe names go
  // to kMaxFilterNameBytes = 64 KiB) writes 0xFFFF and its length is what the
  // header's length leaves for it. Shorter names keep the original layout.
  PutU16(header, static_cast<uint16_t>(std::min<size_t>(p.name.size(), kLongNameMark)));
  header += p.name;
  PutU64(header, p.filter_id);
  PutU64(header, p.shape.blocks);
  PutU32(header, p.shape.k);
  PutU32(header, p.generations);
  PutU32(header, p.hash_scheme);
  PutU64(header, p.key_id);
  PutU32(header, static_cast<uint32_t>(gen_count));

  std::string out(kMagic, sizeof kMagic);
  PutU32(out, kSnapshotVersion);
  PutU32(out, static_cast<uint32_t>(header.size()));
  out += header;
  out.reserve(out.size() + gen_count * (8 + p.shape.bytes()) + kChecksumBytes);
  write_generations(out);
  out += Checksum(out);
  return out;
}

}  // namespace

std::string EncodeSnapshot(const GenerationSet& set) {
  std::vector<std::shared_ptr<const Generation>> gens;
  for (uint64_t epoch : set.epochs()) {
    if (auto gen = set.Find(epoch)) gens.push_back(std::move(gen));
  }
  return Encode(set.params(), gens.size(), [&](std::string& out) {
    for (const auto& gen : gens) {
      PutU64(out, gen->epoch);
      for (uint64_t i = 0; i < gen->filter->word_count(); ++i) PutU64(out, gen->filter->LoadWord(i));
    }
  });
}

std::string EncodeSnapshotWords(const FilterParams& p,
                                std::span<const std::pair<uint64_t, std::span<const uint64_t>>> gens) {
  return Encode(p, gens.size(), [&](std::string& out) {
    for (const auto& [epoch, words] : gens) {
      assert(words.size() == p.shape.blocks * kWordsPerBlock);
      PutU64(out, epoch);
      for (uint64_t w : words) PutU64(out, w);
    }
  });
}

absl::StatusOr<std::unique_ptr<GenerationSet>> DecodeSnapshot(std::string_view bytes, const ClusterSecret& secret,
                                                              const FilterParams* expected) {
  EnsureSodiumInitialized();
  if (bytes.size() < kPreambleBytes + kChecksumBytes) return Corrupt("file too short");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return Corrupt("bad magic: not a Pollen snapshot");
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  if (Checksum(body) != bytes.substr(body.size())) return Corrupt("checksum mismatch (corrupt or truncated)");

  Reader r(body.substr(sizeof kMagic));
  uint32_t version = 0, header_len = 0;
  r.U32(version);
  r.U32(header_len);
  if (version != kSnapshotVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot: format version ", version, " (this build reads ", kSnapshotVersion, ")"));
  }
  std::string_view header;
  if (!r.Bytes(header_len, header)) return Corrupt("header longer than file");

  Reader h(header);
  FilterParams p;
  uint16_t short_len = 0;
  std::string_view name;
  uint32_t gen_count = 0;
  if (!h.U16(short_len)) return Corrupt("malformed header");
  size_t name_len = short_len;
  if (short_len == kLongNameMark) {
    if (h.remaining() < kHeaderFixedBytes + kLongNameMark) return Corrupt("malformed header");
    name_len = h.remaining() - kHeaderFixedBytes;
  }
  if (!h.Bytes(name_len, name) || !h.U64(p.filter_id) || !h.U64(p.shape.blocks) ||
      !h.U32(p.shape.k) || !h.U32(p.generations) || !h.U32(p.hash_scheme) || !h.U64(p.key_id) ||
      !h.U32(gen_count) || h.remaining() != 0) {
    return Corrupt("malformed header");
  }
  p.name = std::string(name);
  if (absl::Status s = ValidateParams(p); !s.ok()) return Corrupt(std::string(s.message()));
  if (p.key_id != KeyIdForSecret(secret)) {
    return absl::FailedPreconditionError("snapshot: written under a different cluster secret (key id mismatch)");
  }
  if (expected != nullptr && !(p == *expected)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot: parameters of filter '", p.name, "' differ from the configured ones"));
  }
  if (gen_count < 1 || gen_count > p.generations) {
    return Corrupt(absl::StrCat("generation count ", gen_count, " outside [1, ", p.generations, "]"));
  }
  const uint64_t words = p.shape.blocks * kWordsPerBlock;
  if (r.remaining() != gen_count * (8 + words * 8)) return Corrupt("size does not match its parameters");

  // Read epochs first: they must ascend and fit one window.
  std::vector<uint64_t> epochs(gen_count);
  std::vector<std::string_view> payloads(gen_count);
  for (uint32_t g = 0; g < gen_count; ++g) {
    r.U64(epochs[g]);
    r.Bytes(words * 8, payloads[g]);
    if (g > 0 && epochs[g] <= epochs[g - 1]) return Corrupt("generation epochs not ascending");
  }
  if (epochs.back() - epochs.front() >= p.generations) return Corrupt("generations span more than the window");

  absl::StatusOr<std::unique_ptr<GenerationSet>> set = GenerationSet::Create(p, secret, epochs.back());
  if (!set.ok()) return set.status();
  std::vector<uint64_t> buffer(words);
  for (uint32_t g = 0; g < gen_count; ++g) {
    Reader w(payloads[g]);
    for (uint64_t i = 0; i < words; ++i) w.U64(buffer[i]);
    if (absl::Status s = (*set)->LoadWords(epochs[g], buffer); !s.ok()) return s;
  }
  return set;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", ErrnoText()));
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = absl::InternalError(absl::StrCat("fsync ", tmp, ": ", ErrnoText()));
  if (::close(fd) != 0 && status.ok()) status = absl::InternalError(absl::StrCat("close ", tmp, ": ", ErrnoText()));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("rename ", tmp, " to ", path, ": ", ErrnoText()));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return absl::InternalError(absl::StrCat("open directory ", dir, ": ", ErrnoText()));
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync directory ", dir, ": ", ErrnoText()));
  return absl::OkStatus();
}

absl::Status WriteSnapshotFile(const GenerationSet& set, const std::string& path) {
  return WriteFileAtomically(path, EncodeSnapshot(set));
}

absl::StatusOr<std::unique_ptr<GenerationSet>> ReadSnapshotFile(const std::string& path, const ClusterSecret& secret,
                                                                const FilterParams* expected) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("snapshot ", path, " does not exist"));
    return absl::InternalError(absl::StrCat("open ", path, ": ", ErrnoText()));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("stat ", path, ": ", ErrnoText()));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != bytes.size()) return absl::DataLossError(absl::StrCat("snapshot ", path, ": short read"));
  absl::StatusOr<std::unique_ptr<GenerationSet>> set = DecodeSnapshot(bytes, secret, expected);
  if (!set.ok()) return absl::Status(set.status().code(), absl::StrCat(path, ": ", set.status().message()));
  return set;
}

}  // namespace pollen::crdt
