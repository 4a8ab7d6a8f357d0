#include "node/runtime/resp/bloom_dump.h"

#include <sodium.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "crdt/snapshot.h"
#include "node/core/catalog.h"
#include "node/core/node.h"
#include "protocol/wire.pb.h"

namespace pollen::resp {
namespace {

constexpr std::string_view kHeaderMagic = "PLNDUMP2";
constexpr std::string_view kChunkMagic = "PLNDCHK2";
constexpr size_t kSumBytes = 16;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string Sum(std::string_view bytes) {
  std::string out(kSumBytes, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), nullptr, 0);
  return out;
}

void Seal(std::string& out) { out += Sum(out); }

absl::Status Bad(absl::string_view why) { return absl::InvalidArgumentError(absl::StrCat("received bad data: ", why)); }

// Checks magic and checksum; returns the body between them.
absl::StatusOr<std::string_view> Open(std::string_view bytes, std::string_view magic) {
  if (bytes.size() < magic.size() + kSumBytes || bytes.substr(0, magic.size()) != magic) {
    return Bad("not a Pollen dump chunk");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kSumBytes);
  if (Sum(body) != bytes.substr(body.size())) return Bad("checksum mismatch");
  return body.substr(magic.size());
}

// Little-endian reads from a shrinking view.
struct Reader {
  std::string_view in;
  bool U32(uint32_t& v) { return Uint(v, 4); }
  bool U64(uint64_t& v) { return Uint(v, 8); }
  bool Bytes(size_t n, std::string_view& v) {
    if (in.size() < n) return false;
    v = in.substr(0, n);
    in.remove_prefix(n);
    return true;
  }
  template <typename T>
  bool Uint(T& v, int bytes) {
    if (in.size() < static_cast<size_t>(bytes)) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<T>(static_cast<uint8_t>(in[i])) << (8 * i);
    in.remove_prefix(static_cast<size_t>(bytes));
    return true;
  }
};

}  // namespace

uint64_t DumpChunkWords(uint64_t chunk_bytes, uint64_t max_bulk_bytes) {
  const uint64_t room = max_bulk_bytes > kDumpChunkOverhead ? max_bulk_bytes - kDumpChunkOverhead : 0;
  return std::clamp<uint64_t>(std::min(chunk_bytes, room) / 8, 1, kMaxDumpChunkWords);
}

bool SizeDump(DumpHeader& h) {
  h.words.clear();
  for (uint64_t slot : h.slots) {
    absl::StatusOr<crdt::FilterShape> shape = crdt::LayerShape(h.params, crdt::LayerOfSlot(slot));
    if (!shape.ok()) return false;
    h.words.push_back(shape->blocks * crdt::kWordsPerBlock);
  }
  return true;
}

ChunkPlace PlaceOfChunk(const DumpHeader& h, uint64_t c) {
  assert(c >= 1 && c <= h.data_chunks());
  uint64_t skip = c - 1;
  ChunkPlace p;
  for (; p.sub < h.words.size(); ++p.sub) {
    const uint64_t chunks = (h.words[p.sub] + h.chunk_words - 1) / h.chunk_words;
    if (skip < chunks) break;
    skip -= chunks;
  }
  assert(p.sub < h.words.size());
  p.first_word = skip * h.chunk_words;
  p.words = std::min(h.chunk_words, h.words[p.sub] - p.first_word);
  return p;
}

std::string EncodeDumpHeader(const DumpHeader& h) {
  std::string out(kHeaderMagic);
  PutU32(out, static_cast<uint32_t>(h.entry.size()));
  out += h.entry;
  PutU32(out, static_cast<uint32_t>(h.slots.size()));
  for (uint64_t slot : h.slots) PutU64(out, slot);
  PutU64(out, h.chunk_words);
  Seal(out);
  return out;
}

std::string EncodeDumpChunk(uint64_t slot, uint64_t first_word, std::span<const uint64_t> words) {
  std::string out(kChunkMagic);
  out.reserve(out.size() + 20 + 8 * words.size() + kSumBytes);
  PutU64(out, slot);
  PutU64(out, first_word);
  PutU32(out, static_cast<uint32_t>(words.size()));
  for (uint64_t w : words) PutU64(out, w);
  Seal(out);
  assert(out.size() == kDumpChunkOverhead + 8 * words.size());
  return out;
}

absl::StatusOr<DumpHeader> DecodeDumpHeader(std::string_view bytes) {
  absl::StatusOr<std::string_view> body = Open(bytes, kHeaderMagic);
  if (!body.ok()) return body.status();
  Reader r{*body};
  DumpHeader h;
  uint32_t entry_len = 0, sub_count = 0;
  std::string_view entry;
  if (!r.U32(entry_len) || !r.Bytes(entry_len, entry) || !r.U32(sub_count)) return Bad("truncated header");
  wire::CatalogEntry w;
  if (!w.ParseFromArray(entry.data(), static_cast<int>(entry.size()))) return Bad("catalog entry does not parse");
  absl::StatusOr<node::CatalogEntry> parsed = node::FromWire(w);
  if (!parsed.ok()) return Bad(parsed.status().message());
  h.entry = std::string(entry);
  h.params = parsed->params;
  if (sub_count < 1 || sub_count > h.params.generations * crdt::kMaxLayers) return Bad("sub-filter count out of range");
  for (uint32_t i = 0; i < sub_count; ++i) {
    uint64_t slot = 0;
    if (!r.U64(slot)) return Bad("truncated header");
    // Each generation's layers from 0, generations ascending.
    const bool next_layer = !h.slots.empty() && slot == h.slots.back() + 1 && crdt::LayerOfSlot(slot) > 0;
    const bool next_generation = crdt::LayerOfSlot(slot) == 0 &&
                                 (h.slots.empty() || crdt::EpochOfSlot(slot) > crdt::EpochOfSlot(h.slots.back()));
    if (!next_layer && !next_generation) return Bad("sub-filters not in order");
    h.slots.push_back(slot);
  }
  const uint64_t first = crdt::EpochOfSlot(h.slots.front()), last = crdt::EpochOfSlot(h.slots.back());
  if (last != w.epoch() || last - first >= h.params.generations) return Bad("epochs outside the filter's window");
  if (!r.U64(h.chunk_words) || !r.in.empty()) return Bad("malformed header");
  if (!SizeDump(h)) return Bad("a layer does not fit the parameters");
  if (h.chunk_words < 1 || h.chunk_words > kMaxDumpChunkWords) return Bad("chunk size out of range");
  return h;
}

absl::StatusOr<DumpChunk> DecodeDumpChunk(std::string_view bytes) {
  absl::StatusOr<std::string_view> body = Open(bytes, kChunkMagic);
  if (!body.ok()) return body.status();
  Reader r{*body};
  DumpChunk c;
  uint32_t n = 0;
  if (!r.U64(c.slot) || !r.U64(c.first_word) || !r.U32(n) || n > kMaxDumpChunkWords || r.in.size() != uint64_t{n} * 8) {
    return Bad("malformed data chunk");
  }
  c.words.resize(n);
  for (uint64_t& w : c.words) r.U64(w);
  return c;
}

PendingRestore::PendingRestore(DumpHeader header) : header_(std::move(header)) {}

absl::StatusOr<std::unique_ptr<PendingRestore>> PendingRestore::Begin(std::string_view key, std::string_view header,
                                                                      uint64_t max_bytes) {
  absl::StatusOr<DumpHeader> h = DecodeDumpHeader(header);
  if (!h.ok()) return h.status();
  if (h->params.name != key) {
    // Loaded under another name: the filter keeps the dumped filter's
    // identity (params.filter_id), from which its hash keys derive, so its
    // bits answer for the same keys under the new name.
    wire::CatalogEntry entry;
    if (!entry.ParseFromString(h->entry)) return Bad("catalog entry does not parse");
    entry.mutable_filter()->set_name(std::string(key));
    h->entry = entry.SerializeAsString();
    h->params.name = std::string(key);
    if (absl::Status s = crdt::ValidateParams(h->params); !s.ok()) return Bad(s.message());
  }
  uint64_t words = 0;
  for (uint64_t w : h->words) words += w;
  if (words > max_bytes / 8) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the filter would need ", words * 8, " bytes, over max-filter-bytes (", max_bytes, ")"));
  }
  std::unique_ptr<PendingRestore> p(new PendingRestore(*std::move(h)));
  for (uint64_t w : p->header_.words) p->contents_.emplace_back(w, 0);
  return p;
}

absl::Status PendingRestore::Add(uint64_t iterator, std::string_view bytes) {
  if (complete()) return absl::OutOfRangeError("invalid offset: the dump is already complete");
  if (iterator != next_chunk_ + 1) {
    return absl::OutOfRangeError(absl::StrCat("invalid offset: chunk out of order: expected iterator ", next_chunk_ + 1));
  }
  absl::StatusOr<DumpChunk> c = DecodeDumpChunk(bytes);
  if (!c.ok()) return c.status();
  const ChunkPlace place = PlaceOfChunk(header_, next_chunk_);
  if (c->slot != header_.slots[place.sub]) return Bad("the filter rotated or grew during the dump: dump it again");
  if (c->first_word != place.first_word) return Bad("chunk does not fit the dump");
  if (c->words.size() > place.words) {
    return absl::FailedPreconditionError(
        absl::StrCat("invalid chunk: ", c->words.size(), " words where the dump has room for ", place.words));
  }
  if (c->words.size() != place.words) return Bad("chunk does not fit the dump");
  std::memcpy(contents_[place.sub].data() + place.first_word, c->words.data(), place.words * 8);
  ++next_chunk_;
  return absl::OkStatus();
}

std::string PendingRestore::SnapshotValue() const {
  assert(complete());
  std::vector<std::pair<uint64_t, std::span<const uint64_t>>> subs;
  for (size_t i = 0; i < contents_.size(); ++i) subs.emplace_back(header_.slots[i], contents_[i]);
  return crdt::EncodeSnapshotWords(header_.params, subs, node::Node::SnapshotValue(header_.entry, {}));
}

}  // namespace pollen::resp
