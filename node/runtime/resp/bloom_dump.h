// BF.SCANDUMP / BF.LOADCHUNK: a filter's dump, in bounded chunks, with
// RedisBloom's iterator contract (SCANDUMP key 0 starts; each reply is
// [iterator, data]; LOADCHUNK key iterator data loads it; iterator 0 ends).
//
// The data is Pollen's own (a RedisBloom dump cannot carry Pollen's pinned
// parameters and epochs, nor the reverse):
//   iterator 1, the header:
//     "PLNDUMP2" | entry_len u32 | entry (wire::CatalogEntry, epoch included) |
//     sub_count u32 | slots u64 x sub_count (crdt::SlotOf(epoch, layer),
//     ascending; each generation's layers from 0) | chunk_words u64 |
//     BLAKE2b-128 of the above
//   iterator c + 1 (c = 1..chunks), a data chunk:
//     "PLNDCHK2" | slot u64 | first_word u64 | n u32 | words u64 x n |
//     BLAKE2b-128 of the above
// Sub-filters are dumped in slot order, each in chunks of chunk_words words
// (a sub-filter's size follows from its layer, crdt::LayerShape). A data
// chunk is kDumpChunkOverhead bytes more than its words, and SCANDUMP sizes
// chunks (DumpChunkWords) so that the whole chunk fits the server's bulk
// limit: the restore sends it back as one LOADCHUNK argument. By default a
// chunk carries 10 MiB of words (RedisBloom 2.4's MAX_SCANDUMP_SIZE), so a
// 1 GiB filter streams in ~103 chunks per sub-filter.
//
// SCANDUMP reads each chunk from the live filter when asked, so adds between
// calls may or may not be in the dump (they are in the source); a rotation or
// a growth between calls makes the loader refuse the dump (a chunk's slot is
// not the header's): dump again. LOADCHUNK assembles the whole dump on the side and
// changes the node only when the last chunk has arrived and everything checked
// out (Node::PrepareRestore and CommitRestore, which also check the cluster
// secret's key id).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/generations.h"

namespace pollen::resp {

// Bytes of a data chunk that are not filter words: magic, slot, first word,
// word count, checksum.
inline constexpr uint64_t kDumpChunkOverhead = 8 + 8 + 8 + 4 + 16;
// The most words a data chunk may carry (what a decoder accepts): 16 MiB.
inline constexpr uint64_t kMaxDumpChunkWords = uint64_t{1} << 21;

// Words per data chunk for a server that wants chunks of about
// `chunk_bytes` of words and accepts arguments of at most `max_bulk_bytes`:
// the whole encoded chunk stays within the bulk limit. At least 1.
uint64_t DumpChunkWords(uint64_t chunk_bytes, uint64_t max_bulk_bytes);

struct DumpHeader {
  std::string entry;  // serialized wire::CatalogEntry
  crdt::FilterParams params;  // from the entry (decoded headers only)
  std::vector<uint64_t> slots;  // ascending
  std::vector<uint64_t> words;  // per slot: its layer's word count
  uint64_t chunk_words = 0;

  uint64_t data_chunks() const {
    uint64_t n = 0;
    for (uint64_t w : words) n += (w + chunk_words - 1) / chunk_words;
    return n;
  }
};

// Fills h.words from h.params and h.slots. False if a slot's layer cannot exist.
bool SizeDump(DumpHeader& h);

struct DumpChunk {
  uint64_t slot = 0;
  uint64_t first_word = 0;
  std::vector<uint64_t> words;
};

// Where data chunk c (1-based) of `h` lies.
struct ChunkPlace {
  size_t sub = 0;  // index into slots
  uint64_t first_word = 0;
  uint64_t words = 0;
};
ChunkPlace PlaceOfChunk(const DumpHeader& h, uint64_t c);

std::string EncodeDumpHeader(const DumpHeader& h);
std::string EncodeDumpChunk(uint64_t slot, uint64_t first_word, std::span<const uint64_t> words);
// Decoders validate everything (lengths, checksum, the entry, the slots'
// order and window, sizes against the parameters) before returning.
absl::StatusOr<DumpHeader> DecodeDumpHeader(std::string_view bytes);
absl::StatusOr<DumpChunk> DecodeDumpChunk(std::string_view bytes);

// One filter being loaded by LOADCHUNK: its header and contents so far.
class PendingRestore {
 public:
  // From the header chunk, for the filter `key`: the dumped filter's name or
  // any other (the filter keeps the dumped one's identity, which its hash
  // keys derive from). Errors: InvalidArgument for a header that is not a
  // valid dump (or `key` is not a valid name); ResourceExhausted (naming
  // max-filter-bytes) for a filter whose generations would need more than
  // `max_bytes`.
  static absl::StatusOr<std::unique_ptr<PendingRestore>> Begin(std::string_view key, std::string_view header,
                                                               uint64_t max_bytes);
  // The chunk LOADCHUNK got with `iterator`: it must be the next one, in order.
  // Errors, and nothing changes: OutOfRange when `iterator` is not the next
  // chunk's (RedisBloom's "invalid offset"), FailedPrecondition when the
  // chunk carries more words than its place holds ("invalid chunk"),
  // InvalidArgument for anything else that is not that chunk ("bad data").
  absl::Status Add(uint64_t iterator, std::string_view bytes);
  bool complete() const { return next_chunk_ > header_.data_chunks(); }
  // The node snapshot value of the whole dump (Node::PrepareRestore); once complete.
  std::string SnapshotValue() const;

 private:
  explicit PendingRestore(DumpHeader header);
  DumpHeader header_;
  std::vector<std::vector<uint64_t>> contents_;  // per slot
  uint64_t next_chunk_ = 1;
};

}  // namespace pollen::resp
