#include "crdt/snapshot_delta.h"

#include <sodium.h>

#include <array>
#include <bit>

#include "absl/strings/str_cat.h"
#include "crdt/little_endian.h"
#include "crdt/keyed_hash.h"

namespace pollen::crdt {
namespace {

constexpr std::string_view kMagic = "PLNDLTA1";
constexpr size_t kChecksumBytes = 32;  // BLAKE2b-256
constexpr uint8_t kFormWords = 0xFF;
constexpr uint8_t kFormEnd = 0xFE;
// Dirty words taken per piece: 4096 blocks scanned, at most ~270 KiB written.
constexpr uint64_t kDirtyWordsPerPiece = 64;


// One block's entry: positions when it has few bits, else its words.
void PutBlock(std::string& out, uint64_t gap, const std::array<uint64_t, kWordsPerBlock>& words) {
  int bits = 0;
  for (uint64_t w : words) bits += std::popcount(w);
  if (bits > kMaxDeltaPositions) {
    out.push_back(static_cast<char>(kFormWords));
    PutVarint(out, gap);
    for (uint64_t w : words) PutU64(out, w);
    return;
  }
  out.push_back(static_cast<char>(bits));
  PutVarint(out, gap);
  for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
    for (uint64_t rest = words[w]; rest != 0; rest &= rest - 1) {
      PutU16(out, static_cast<uint16_t>(w * 64 + std::countr_zero(rest)));
    }
  }
}

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(absl::StrCat("snapshot delta: ", std::string(what)));
}

}  // namespace

absl::Status StreamDelta(std::span<const std::shared_ptr<const SubFilter>> subs, const SnapshotSink& sink,
                         uint64_t* blocks) {
  EnsureSodiumInitialized();
  crypto_generichash_state sum;
  crypto_generichash_init(&sum, nullptr, 0, kChecksumBytes);
  auto emit = [&](std::string_view bytes) {
    crypto_generichash_update(&sum, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return sink(bytes);
  };
  uint64_t written = 0;
  std::string piece(kMagic);
  PutU32(piece, static_cast<uint32_t>(subs.size()));
  std::array<uint64_t, kDirtyWordsPerPiece> marks;
  for (const auto& sub : subs) {
    BlockedFilter& f = *sub->filter;  // TakeDirty: the marks are the filter's, not its contents
    PutU64(piece, sub->epoch);
    PutU32(piece, sub->layer);
    uint64_t next = 0;  // the index a gap of 0 means
    for (uint64_t first = 0; first < f.dirty_word_count(); first += marks.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(marks.size(), f.dirty_word_count() - first));
      f.TakeDirty(first, std::span(marks).first(n));
      for (size_t i = 0; i < n; ++i) {
        for (uint64_t rest = marks[i]; rest != 0; rest &= rest - 1) {
          const uint64_t block = (first + i) * 64 + std::countr_zero(rest);
          std::array<uint64_t, kWordsPerBlock> words;
          for (uint32_t w = 0; w < kWordsPerBlock; ++w) words[w] = f.LoadWord(block * kWordsPerBlock + w);
          PutBlock(piece, block - next, words);
          next = block + 1;
          ++written;
        }
      }
      if (piece.size() >= (size_t{1} << 16)) {
        if (absl::Status s = emit(piece); !s.ok()) return s;
        piece.clear();
      }
    }
    piece.push_back(static_cast<char>(kFormEnd));
  }
  if (absl::Status s = emit(piece); !s.ok()) return s;
  std::string trailer(kChecksumBytes, '\0');
  crypto_generichash_final(&sum, reinterpret_cast<uint8_t*>(trailer.data()), trailer.size());
  if (blocks != nullptr) *blocks = written;
  return sink(trailer);
}

namespace {

// Checks the structure of a delta whose checksum passed and, given a sink,
// hands it the words in batches of at most kDeltaBatchWords (each batch of
// one slot). Changes nothing itself.
absl::Status WalkDelta(std::string_view body, const GenerationSet& set, const DeltaBatchSink* sink) {
  LittleEndianReader r(body.substr(kMagic.size()));
  uint32_t sub_count = 0;
  if (!r.U32(sub_count) || sub_count > set.slots().size()) return Corrupt("sub-filter count out of range");
  std::vector<WordBits> batch;
  if (sink != nullptr) batch.reserve(kDeltaBatchWords);
  uint64_t last_slot = 0;
  for (uint32_t s = 0; s < sub_count; ++s) {
    uint64_t epoch = 0;
    uint32_t layer = 0;
    if (!r.U64(epoch) || !r.U32(layer) || layer >= kMaxLayers || epoch > (~uint64_t{0} >> kLayerBits)) {
      return Corrupt("truncated sub-filter header");
    }
    const uint64_t slot = SlotOf(epoch, layer);
    if (s > 0 && slot <= last_slot) return Corrupt("sub-filters out of order");
    last_slot = slot;
    std::shared_ptr<const SubFilter> sub = set.Sub(slot);
    if (sub == nullptr) return Corrupt(absl::StrCat("epoch ", epoch, " layer ", layer, " is not live"));
    const uint64_t block_count = sub->filter->shape().blocks;
    uint64_t next = 0;
    for (;;) {  // one entry per block: at most block_count entries, then the end mark
      uint8_t form = 0;
      if (!r.U8(form)) return Corrupt("truncated block list");
      if (form == kFormEnd) break;
      if (form > kMaxDeltaPositions && form != kFormWords) return Corrupt("unknown block form");
      uint64_t gap = 0;
      if (!r.Varint(gap) || gap >= block_count - std::min(next, block_count) ||
          next >= block_count) {
        return Corrupt("block index out of range");
      }
      const uint64_t block = next + gap;
      next = block + 1;
      std::array<uint64_t, kWordsPerBlock> block_words{};
      if (form == kFormWords) {
        for (uint64_t& w : block_words) {
          if (!r.U64(w)) return Corrupt("truncated block");
        }
      } else {
        int previous = -1;
        for (uint8_t i = 0; i < form; ++i) {
          uint16_t pos = 0;
          if (!r.U16(pos)) return Corrupt("truncated block");
          if (pos >= kWordsPerBlock * 64 || static_cast<int>(pos) <= previous) return Corrupt("bad bit position");
          previous = pos;
          block_words[pos / 64] |= uint64_t{1} << (pos % 64);
        }
      }
      if (sink == nullptr) continue;
      for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
        if (block_words[w] != 0) batch.push_back({block * kWordsPerBlock + w, block_words[w]});
      }
      if (batch.size() + kWordsPerBlock > kDeltaBatchWords) {
        (*sink)(slot, batch);
        batch.clear();
      }
    }
    if (sink != nullptr && !batch.empty()) {
      (*sink)(slot, batch);
      batch.clear();
    }
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> VerifiedBody(std::string_view bytes) {
  EnsureSodiumInitialized();
  if (bytes.size() < kMagic.size() + 4 + kChecksumBytes || bytes.substr(0, kMagic.size()) != kMagic) {
    return Corrupt("bad magic or truncated");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  std::array<uint8_t, kChecksumBytes> want;
  crypto_generichash(want.data(), want.size(), reinterpret_cast<const uint8_t*>(body.data()), body.size(), nullptr,
                     0);
  if (std::string_view(reinterpret_cast<const char*>(want.data()), want.size()) != bytes.substr(body.size())) {
    return Corrupt("checksum mismatch");
  }
  return body;
}

}  // namespace

absl::Status VisitDelta(std::string_view bytes, const GenerationSet& set, const DeltaBatchSink& sink) {
  absl::StatusOr<std::string_view> body = VerifiedBody(bytes);
  if (!body.ok()) return body.status();
  if (absl::Status s = WalkDelta(*body, set, nullptr); !s.ok()) return s;
  return WalkDelta(*body, set, &sink);
}

absl::StatusOr<DeltaContents> DecodeDelta(std::string_view bytes, const GenerationSet& set) {
  DeltaContents out;
  absl::Status s = VisitDelta(bytes, set, [&](uint64_t slot, std::span<const WordBits> words) {
    if (out.empty() || out.back().first != slot) out.emplace_back(slot, std::vector<WordBits>());
    out.back().second.insert(out.back().second.end(), words.begin(), words.end());
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace pollen::crdt
