#include "crdt/snapshot.h"

#include <cassert>

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <map>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "crdt/crc32c.h"
#include "crdt/little_endian.h"

namespace pollen::crdt {
namespace {

constexpr char kMagic[8] = {'P', 'L', 'N', 'S', 'N', 'A', 'P', '\0'};
constexpr size_t kPreambleBytes = sizeof kMagic + 4 + 4;
constexpr size_t kBlake2bBytes = 32;  // the trailer of versions 1 and 2
constexpr size_t kCrcBytes = 4;       // the trailer of version 3
constexpr size_t kChecksumBytes = kCrcBytes;


using Reader = LittleEndianReader;

std::string Blake2bTrailer(std::string_view bytes) {
  std::string out(kBlake2bBytes, '\0');
  crypto_generichash(reinterpret_cast<uint8_t*>(out.data()), out.size(),
                     reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, 0);
  return out;
}

std::string CrcTrailer(uint32_t crc) {
  std::string out;
  PutU32(out, crc);
  return out;
}

// The trailer's size by the version in the preamble: 4 bytes from version 3 on
// (and for versions this build does not know, which are refused by version).
size_t TrailerBytes(uint32_t version) { return version == 1 || version == 2 ? kBlake2bBytes : kCrcBytes; }

std::string Trailer(uint32_t version, std::string_view body) {
  return TrailerBytes(version) == kBlake2bBytes ? Blake2bTrailer(body) : CrcTrailer(Crc32c(body));
}

// The header after the name: filter_id, blocks, k, generations, hash scheme,
// key id, (v2: expansion, capacity, fpr,) sub-filter count.
constexpr size_t kHeaderFixedBytesV1 = 8 + 8 + 4 + 4 + 4 + 8 + 4;
constexpr size_t kHeaderFixedBytesV2 = kHeaderFixedBytesV1 + 4 + 8 + 8;
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

// The format above (v2), with `write_subs(out)` appending sub_count
// sub-filters (epoch u64, layer u32, then the words).
// Appends the snapshot to `out` (which may hold a caller's prefix: the
// checksum covers only the snapshot) and returns it.
template <typename WriteSubs>
std::string Encode(const FilterParams& p, size_t sub_count, uint64_t total_words, std::string out,
                   WriteSubs&& write_subs) {
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
  PutU32(header, p.expansion);
  PutU64(header, p.capacity);
  PutU64(header, std::bit_cast<uint64_t>(p.fpr));
  PutU32(header, static_cast<uint32_t>(sub_count));

  const size_t start = out.size();
  out.reserve(start + sizeof kMagic + 8 + header.size() + sub_count * 12 + total_words * 8 + kChecksumBytes);
  out.append(kMagic, sizeof kMagic);
  PutU32(out, kSnapshotVersion);
  PutU32(out, static_cast<uint32_t>(header.size()));
  out += header;
  write_subs(out);
  out += CrcTrailer(Crc32c(std::string_view(out).substr(start)));
  return out;
}

}  // namespace

std::string SealSnapshot(std::string body) {
  EnsureSodiumInitialized();
  assert(body.size() >= kPreambleBytes);
  uint32_t version = 0;
  Reader(std::string_view(body).substr(sizeof kMagic, 4)).U32(version);
  body += Trailer(version, body);
  return body;
}

absl::Status StreamSnapshot(const FilterParams& params, std::span<const std::shared_ptr<const SubFilter>> subs,
                            size_t piece_bytes, const SnapshotSink& sink) {
  // Pieces are whole words; the sub-filter headers and the trailer are small
  // pieces of their own.
  const size_t piece_words = std::max<size_t>(piece_bytes, 4096) / 8;
  uint32_t crc = 0;
  auto emit = [&](std::string_view bytes) {
    crc = Crc32c(bytes, crc);
    return sink(bytes);
  };
  // The preamble and header: Encode's, with no sub-filters yet.
  std::string head = Encode(params, subs.size(), 0, {}, [](std::string&) {});
  head.resize(head.size() - kChecksumBytes);
  if (absl::Status s = emit(head); !s.ok()) return s;
  std::string piece;
  for (const auto& sub : subs) {
    std::string sub_header;
    PutU64(sub_header, sub->epoch);
    PutU32(sub_header, sub->layer);
    if (absl::Status s = emit(sub_header); !s.ok()) return s;
    const BlockedFilter& f = *sub->filter;
    for (uint64_t first = 0; first < f.word_count(); first += piece_words) {
      const uint64_t n = std::min<uint64_t>(piece_words, f.word_count() - first);
      piece.resize(n * 8);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t w = f.LoadWord(first + i);
        if constexpr (std::endian::native == std::endian::little) {
          std::memcpy(piece.data() + 8 * i, &w, 8);
        } else {
          for (int b = 0; b < 8; ++b) piece[8 * i + b] = static_cast<char>(w >> (8 * b));
        }
      }
      if (absl::Status s = emit(piece); !s.ok()) return s;
    }
  }
  return sink(CrcTrailer(crc));
}

std::string EncodeSnapshot(const GenerationSet& set, std::string prefix) {
  std::vector<std::shared_ptr<const SubFilter>> subs;
  uint64_t total_words = 0;
  for (uint64_t slot : set.slots()) {
    if (auto sub = set.Sub(slot)) {
      total_words += sub->filter->word_count();
      subs.push_back(std::move(sub));
    }
  }
  std::string out = std::move(prefix);
  out.reserve(out.size() + 256 + set.params().name.size() + subs.size() * 12 + total_words * 8 + kChecksumBytes);
  const absl::Status s = StreamSnapshot(set.params(), subs, size_t{1} << 20, [&](std::string_view piece) {
    out.append(piece);
    return absl::OkStatus();
  });
  assert(s.ok());
  (void)s;
  return out;
}

std::string EncodeSnapshotWords(const FilterParams& p,
                                std::span<const std::pair<uint64_t, std::span<const uint64_t>>> subs,
                                std::string prefix) {
  uint64_t total_words = 0;
  for (const auto& [slot, words] : subs) total_words += words.size();
  return Encode(p, subs.size(), total_words, std::move(prefix), [&](std::string& out) {
    for (const auto& [slot, words] : subs) {
      assert(LayerShape(p, LayerOfSlot(slot)).ok() &&
             words.size() == LayerShape(p, LayerOfSlot(slot))->blocks * kWordsPerBlock);
      PutU64(out, EpochOfSlot(slot));
      PutU32(out, LayerOfSlot(slot));
      for (uint64_t w : words) PutU64(out, w);
    }
  });
}

namespace {

absl::StatusOr<ParsedSnapshot> Parse(std::string_view bytes, const ClusterSecret& secret, const FilterParams* expected,
                                     bool verify, uint32_t* version_out) {
  EnsureSodiumInitialized();
  if (bytes.size() < kPreambleBytes + kCrcBytes) return Corrupt("file too short");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return Corrupt("bad magic: not a Pollen snapshot");
  uint32_t version = 0;
  Reader(bytes.substr(sizeof kMagic, 4)).U32(version);
  if (bytes.size() < kPreambleBytes + TrailerBytes(version)) return Corrupt("file too short");
  const std::string_view body = bytes.substr(0, bytes.size() - TrailerBytes(version));
  if (verify && Trailer(version, body) != bytes.substr(body.size())) {
    return Corrupt("checksum mismatch (corrupt or truncated)");
  }
  if (version_out != nullptr) *version_out = version;

  Reader r(body.substr(sizeof kMagic + 4));
  uint32_t header_len = 0;
  r.U32(header_len);
  if (version < 1 || version > kSnapshotVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot: format version ", version, " (this build reads ", kSnapshotVersion, ")"));
  }
  std::string_view header;
  if (!r.Bytes(header_len, header)) return Corrupt("header longer than file");

  // v1: no scaling fields, and sub-filters are generations (layer 0) with
  // no layer field.
  const bool v1 = version == 1;
  const size_t fixed_bytes = v1 ? kHeaderFixedBytesV1 : kHeaderFixedBytesV2;
  Reader h(header);
  FilterParams p;
  uint16_t short_len = 0;
  std::string_view name;
  uint32_t sub_count = 0;
  if (!h.U16(short_len)) return Corrupt("malformed header");
  size_t name_len = short_len;
  if (short_len == kLongNameMark) {
    if (h.remaining() < fixed_bytes + kLongNameMark) return Corrupt("malformed header");
    name_len = h.remaining() - fixed_bytes;
  }
  uint64_t fpr_bits = 0;
  if (!h.Bytes(name_len, name) || !h.U64(p.filter_id) || !h.U64(p.shape.blocks) ||
      !h.U32(p.shape.k) || !h.U32(p.generations) || !h.U32(p.hash_scheme) || !h.U64(p.key_id) ||
      (!v1 && (!h.U32(p.expansion) || !h.U64(p.capacity) || !h.U64(fpr_bits))) || !h.U32(sub_count) ||
      h.remaining() != 0) {
    return Corrupt("malformed header");
  }
  p.name = std::string(name);
  p.fpr = std::bit_cast<double>(fpr_bits);
  p.shape = ShapeFor(p.hash_scheme, p.shape.blocks, p.shape.k);  // parts: not stored, the scheme's
  if (absl::Status s = ValidateParams(p); !s.ok()) return Corrupt(std::string(s.message()));
  if (p.key_id != KeyIdForSecret(secret)) {
    return absl::FailedPreconditionError("snapshot: written under a different cluster secret (key id mismatch)");
  }
  if (expected != nullptr && !(p == *expected)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot: parameters of filter '", p.name, "' differ from the configured ones"));
  }
  if (sub_count < 1 || sub_count > p.generations * kMaxLayers) {
    return Corrupt(absl::StrCat("sub-filter count ", sub_count, " outside [1, ", p.generations * kMaxLayers, "]"));
  }

  // Read slots first: per generation layers 0, 1, ... in order, generations
  // ascending and within one window; each payload the size of its layer.
  std::vector<uint64_t> slots(sub_count);
  std::vector<std::string_view> payloads(sub_count);
  std::map<uint64_t, uint32_t> layers;  // epoch -> layer count
  for (uint32_t i = 0; i < sub_count; ++i) {
    uint64_t epoch = 0;
    uint32_t layer = 0;
    if (!r.U64(epoch) || (!v1 && !r.U32(layer))) return Corrupt("size does not match its parameters");
    if (epoch >= (uint64_t{1} << (64 - kLayerBits)) || layer >= kMaxLayers) return Corrupt("epoch or layer out of range");
    const uint32_t expected_layer = layers.count(epoch) ? layers[epoch] : 0;
    if (layer != expected_layer || (i > 0 && epoch < EpochOfSlot(slots[i - 1]))) {
      return Corrupt("sub-filters not in (epoch, layer) order");
    }
    absl::StatusOr<FilterShape> shape = LayerShape(p, layer);
    if (!shape.ok()) return Corrupt(std::string(shape.status().message()));
    if (!r.Bytes(shape->blocks * kWordsPerBlock * 8, payloads[i])) return Corrupt("size does not match its parameters");
    slots[i] = SlotOf(epoch, layer);
    layers[epoch] = layer + 1;
  }
  if (r.remaining() != 0) return Corrupt("size does not match its parameters");
  const uint64_t newest = layers.rbegin()->first;
  if (newest - layers.begin()->first >= p.generations) return Corrupt("generations span more than the window");
  return ParsedSnapshot{std::move(p), std::move(slots), std::move(payloads), std::move(layers), newest};
}

}  // namespace

absl::StatusOr<ParsedSnapshot> ParseSnapshot(std::string_view bytes, const ClusterSecret& secret,
                                             const FilterParams* expected) {
  return Parse(bytes, secret, expected, true, nullptr);
}

absl::StatusOr<ParsedSnapshot> ParseSnapshotUnverified(std::string_view bytes, const ClusterSecret& secret,
                                                       const FilterParams* expected, uint32_t* version) {
  return Parse(bytes, secret, expected, false, version);
}

absl::Status VerifySnapshotChecksum(std::string_view bytes) {
  assert(bytes.size() >= kPreambleBytes + kCrcBytes);
  uint32_t version = 0;
  Reader(bytes.substr(sizeof kMagic, 4)).U32(version);
  const std::string_view body = bytes.substr(0, bytes.size() - TrailerBytes(version));
  if (Trailer(version, body) != bytes.substr(body.size())) return Corrupt("checksum mismatch (corrupt or truncated)");
  return absl::OkStatus();
}

  
absl::StatusOr<std::unique_ptr<GenerationSet>> DecodeSnapshot(std::string_view bytes, const ClusterSecret& secret,
                                                              const FilterParams* expected) {
  absl::StatusOr<ParsedSnapshot> parsed = ParseSnapshot(bytes, secret, expected);
  if (!parsed.ok()) return parsed.status();
  return BuildSnapshot(*parsed, secret);
}

absl::StatusOr<std::unique_ptr<GenerationSet>> BuildSnapshot(const ParsedSnapshot& parsed,
                                                             const ClusterSecret& secret) {
  const FilterParams& p = parsed.params;
  const std::vector<uint64_t>& slots = parsed.slots;
  const std::vector<std::string_view>& payloads = parsed.payloads;
  const uint32_t sub_count = static_cast<uint32_t>(slots.size());
  const uint64_t newest = parsed.newest;
  const std::map<uint64_t, uint32_t>& layers = parsed.layers;
  absl::StatusOr<std::unique_ptr<GenerationSet>> set = GenerationSet::Create(p, secret, newest);
  if (!set.ok()) return set.status();
  for (const auto& [epoch, count] : layers) {
    if (absl::StatusOr<bool> grew = (*set)->Grow(epoch, count); !grew.ok()) return grew.status();
  }
  std::vector<uint64_t> buffer;
  for (uint32_t i = 0; i < sub_count; ++i) {
    buffer.resize(payloads[i].size() / 8);
    Reader w(payloads[i]);
    for (uint64_t& word : buffer) w.U64(word);
    if (absl::Status s = (*set)->LoadWords(slots[i], buffer); !s.ok()) return s;
    // Growth resumes where it was: the layer counts the keys its bits show.
    std::shared_ptr<const SubFilter> sub = (*set)->Sub(slots[i]);
    const double items = EstimateCardinality(sub->filter->shape(), sub->filter->CountSetBits());
    (*set)->RaiseItems(slots[i], ItemsFromEstimate(items));
  }
  return set;
}

constexpr size_t kOrPieceBytes = size_t{8} << 16;

absl::Status OrSnapshotInto(const ParsedSnapshot& parsed, GenerationSet& into,
                            std::map<uint64_t, uint64_t>* set_bits) {
  if (!(parsed.params == into.params())) return absl::FailedPreconditionError("snapshot: other parameters");
  // Pieces of 512 KiB: each is ORed in and then counted while it is still in
  // the cache, so the filter is read once (the count used to be a second scan
  // of it, and a third in the caller: 1.0 s of a 4 GiB restart, perf).
  constexpr size_t kPieceBytes = kOrPieceBytes;
  for (size_t i = 0; i < parsed.slots.size(); ++i) {
    std::shared_ptr<const SubFilter> sub = into.Sub(parsed.slots[i]);
    if (sub == nullptr) continue;  // a generation the window has left
    const std::string_view payload = parsed.payloads[i];
    assert(payload.size() == sub->filter->word_count() * 8);  // ParseSnapshot checked it
    uint64_t bits = 0;
    for (size_t offset = 0; offset < payload.size(); offset += kPieceBytes) {
      bits += sub->filter->OrLittleEndianWords(offset / 8, payload.substr(offset, kPieceBytes));
    }
    into.RaiseItems(parsed.slots[i], ItemsFromEstimate(EstimateCardinality(sub->filter->shape(), bits)));
    if (set_bits != nullptr) (*set_bits)[parsed.slots[i]] = bits;
  }
  return absl::OkStatus();
}

absl::Status OrSnapshotIntoEmpty(std::string_view bytes, const ParsedSnapshot& parsed, GenerationSet& into,
                                 std::map<uint64_t, uint64_t>* set_bits, const std::function<void(size_t)>& consumed) {
  if (!(parsed.params == into.params())) return absl::FailedPreconditionError("snapshot: other parameters");
  uint32_t version = 0;
  Reader(bytes.substr(sizeof kMagic, 4)).U32(version);
  if (TrailerBytes(version) != kCrcBytes) return absl::FailedPreconditionError("snapshot: not a CRC-32C version");
  const size_t body_size = bytes.size() - kCrcBytes;
  std::vector<std::shared_ptr<const SubFilter>> subs;
  for (uint64_t slot : parsed.slots) {
    subs.push_back(into.Sub(slot));
    if (subs.back() == nullptr) return absl::FailedPreconditionError("snapshot: a sub-filter is not live");
  }
  std::map<uint64_t, uint64_t> counts;
  uint32_t crc = 0;
  size_t done = 0;  // bytes checksummed so far
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string_view payload = parsed.payloads[i];
    const size_t start = static_cast<size_t>(payload.data() - bytes.data());
    assert(start >= done && start + payload.size() <= body_size);
    crc = Crc32c(bytes.substr(done, start - done), crc);
    uint64_t bits = 0;
    for (size_t offset = 0; offset < payload.size(); offset += kOrPieceBytes) {
      const std::string_view piece = payload.substr(offset, kOrPieceBytes);
      crc = Crc32c(piece, crc);
      bits += subs[i]->filter->StoreLittleEndianWordsIntoEmpty(offset / 8, piece);
      if (consumed) consumed(start + offset + piece.size());
    }
    done = start + payload.size();
    counts[parsed.slots[i]] = bits;
  }
  crc = Crc32c(bytes.substr(done, body_size - done), crc);
  if (CrcTrailer(crc) != bytes.substr(body_size)) {
    for (const auto& sub : subs) sub->filter->ClearAll();
    return Corrupt("checksum mismatch (corrupt or truncated)");
  }
  for (const auto& [slot, bits] : counts) {
    into.RaiseItems(slot, ItemsFromEstimate(EstimateCardinality(into.Sub(slot)->filter->shape(), bits)));
  }
  if (set_bits != nullptr) *set_bits = std::move(counts);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  return WriteFileAtomically(path, [&](const SnapshotSink& write) { return write(contents); });
}

namespace {

// Write-behind for a big file (a base snapshot is the whole filter: 4 GiB and
// more). Without it the kernel holds the whole file as dirty page cache until
// the fsync at the end, then writes it back at once, and its clean pages stay
// cached afterwards. With three 4 GiB nodes on this 24 GiB machine, that is up
// to 12 GiB of page cache on top of 12.3 GiB of filters: reclaim then stalls
// whichever thread allocates, and a peer marked the writing node suspect
// during a base (tests/scale/scale.sh 4gb, 2026-12-06). So every kWindow
// bytes the window just written is sent to the disk (sync_file_range,
// asynchronous), the one before it is waited for and dropped from the cache
// (its pages are clean by then): at most two windows of a file are dirty or
// cached at once. The fsync at the end still makes the file durable (and
// covers the metadata); this only spreads the writes and drops the cache.
class WriteBehind {
 public:
  static constexpr uint64_t kWindow = uint64_t{32} << 20;
  explicit WriteBehind(int fd) : fd_(fd) {}
  void Wrote(uint64_t total) {
    while (total - started_ >= kWindow) {
#if defined(__linux__)
      (void)::sync_file_range(fd_, static_cast<off_t>(started_), kWindow, SYNC_FILE_RANGE_WRITE);
      if (started_ >= kWindow) {
        const auto previous = static_cast<off_t>(started_ - kWindow);
        (void)::sync_file_range(fd_, previous, kWindow,
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        (void)::posix_fadvise(fd_, previous, kWindow, POSIX_FADV_DONTNEED);
      }
#endif
      started_ += kWindow;
    }
  }

 private:
  const int fd_;
  uint64_t started_ = 0;  // bytes before this offset were sent to the disk
};

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::function<absl::Status(const SnapshotSink&)>& fill,
                                 uint64_t* bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", ErrnoText()));
  uint64_t written = 0;
  WriteBehind behind(fd);
  absl::Status status = fill([&](std::string_view piece) {
    written += piece.size();
    absl::Status s = WriteAll(fd, piece, tmp);
    if (s.ok()) behind.Wrote(written);
    return s;
  });
  if (bytes != nullptr) *bytes = written;
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
