#include "node/core/anti_entropy.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "node/core/dissemination.h"
#include "crdt/mix64.h"

namespace pollen::node {
namespace {

struct RangeSpan {
  uint64_t first_block, blocks;
};

RangeSpan SpanOf(crdt::FilterShape shape, uint64_t range) {
  const uint64_t bpr = BlocksPerRange(shape.blocks);
  const uint64_t first = range * bpr;
  return {first, std::min(bpr, shape.blocks - first)};
}

}  // namespace

uint64_t BlocksPerRange(uint64_t blocks) { return std::max<uint64_t>(1, (blocks + kTargetRanges - 1) / kTargetRanges); }

uint64_t RangeCount(uint64_t blocks) {
  const uint64_t bpr = BlocksPerRange(blocks);
  return (blocks + bpr - 1) / bpr;
}

uint64_t ItemsAt(uint32_t level, uint64_t ranges) {
  assert(level <= kDigestLevel);
  if (level == 0) return ranges;
  if (level == 1) return (ranges + kRangesPerGroup - 1) / kRangesPerGroup;
  return 1;
}

namespace {

// SplitMix64's finalizer over a running fold: a change in any input changes
// the result (with probability 1 - 2^-64), and the order of inputs counts.
uint64_t Fold(std::span<const uint64_t> hashes) {
  uint64_t h = crdt::kGoldenGamma ^ hashes.size();
  for (uint64_t x : hashes) {
    h = crdt::Mix64(h ^ x);
  }
  return h;
}

}  // namespace

std::vector<uint64_t> LevelHashes(std::span<const uint64_t> range_summaries, uint32_t level) {
  assert(level <= kDigestLevel);
  if (level == 0) return {range_summaries.begin(), range_summaries.end()};
  std::vector<uint64_t> groups;
  for (size_t first = 0; first < range_summaries.size(); first += kRangesPerGroup) {
    groups.push_back(Fold(range_summaries.subspan(first, std::min<size_t>(kRangesPerGroup, range_summaries.size() - first))));
  }
  if (level == 1) return groups;
  return {Fold(groups)};
}

void Summarize(std::span<const uint64_t> range_summaries, uint64_t blocks, uint64_t epoch, uint32_t level,
               std::span<const uint64_t> items, wire::GenerationSummary* out) {
  assert(range_summaries.size() == RangeCount(blocks));
  out->set_epoch(epoch);
  out->set_blocks_per_range(BlocksPerRange(blocks));
  if (level > 0) out->set_level(level);
  const std::vector<uint64_t> hashes = LevelHashes(range_summaries, level);
  if (items.empty() || items.size() == hashes.size()) {
    out->mutable_summaries()->Add(hashes.begin(), hashes.end());
    return;
  }
  for (uint64_t item : items) {
    assert(item < hashes.size());
    out->add_items(item);
    out->add_summaries(hashes[item]);
  }
}

absl::Status ValidateSummary(const wire::GenerationSummary& summary, crdt::FilterShape shape) {
  const uint64_t bpr = BlocksPerRange(shape.blocks);
  if (summary.blocks_per_range() != bpr) {
    return absl::InvalidArgumentError(absl::StrCat("blocks per range ", summary.blocks_per_range(), ", expected ", bpr));
  }
  if (summary.level() > kDigestLevel) return absl::InvalidArgumentError(absl::StrCat("level ", summary.level()));
  const uint64_t items = ItemsAt(summary.level(), RangeCount(shape.blocks));
  for (int i = 0; i < summary.items_size(); ++i) {
    if (summary.items(i) >= items || (i > 0 && summary.items(i) <= summary.items(i - 1))) {
      return absl::InvalidArgumentError("items out of bounds or not ascending");
    }
  }
  if (summary.blocks()) {
    if (summary.level() != 0 || summary.summaries_size() != 0) {
      return absl::InvalidArgumentError("block hashes are of ranges, without range summaries");
    }
    uint64_t hashes = 0;
    for (uint64_t range : summary.items()) hashes += BlocksInRange(shape.blocks, range);
    if (summary.items_size() == 0) hashes = shape.blocks;
    if (static_cast<uint64_t>(summary.block_hashes_size()) != hashes) {
      return absl::InvalidArgumentError(absl::StrCat(summary.block_hashes_size(), " block hashes, expected ", hashes));
    }
    return absl::OkStatus();
  }
  if (summary.block_hashes_size() > 0) return absl::InvalidArgumentError("block hashes without `blocks`");
  if (summary.items_size() == 0) {
    if (static_cast<uint64_t>(summary.summaries_size()) != items) {
      return absl::InvalidArgumentError(absl::StrCat(summary.summaries_size(), " summaries, expected ", items));
    }
    return absl::OkStatus();
  }
  if (summary.summaries_size() != summary.items_size()) {
    return absl::InvalidArgumentError(absl::StrCat(summary.summaries_size(), " summaries for ", summary.items_size(), " items"));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> DifferingItems(std::span<const uint64_t> our_range_summaries,
                                     const wire::GenerationSummary& theirs) {
  const std::vector<uint64_t> ours = LevelHashes(our_range_summaries, theirs.level());
  std::vector<uint64_t> out;
  for (int i = 0; i < theirs.summaries_size(); ++i) {
    const uint64_t item = theirs.items_size() == 0 ? static_cast<uint64_t>(i) : theirs.items(i);
    if (item < ours.size() && ours[item] != theirs.summaries(i)) out.push_back(item);
  }
  return out;
}

std::vector<uint64_t> ChildItems(uint32_t level, std::span<const uint64_t> items, uint64_t ranges) {
  assert(level >= 1 && level <= kDigestLevel);
  const uint64_t below = ItemsAt(level - 1, ranges);
  const uint64_t fan = level == 1 ? kRangesPerGroup : below;  // the digest covers every group
  std::vector<uint64_t> out;
  for (uint64_t item : items) {
    for (uint64_t child = item * fan; child < std::min(below, (item + 1) * fan); ++child) out.push_back(child);
  }
  return out;
}

// Ranges go as bitmaps from 3% fill (5x the entropy bound), where other
// sets wait for 11% (kBitmapCostRatio, 2x). A healed partition's ranges
// carry one side's bits: 3-9% of them, by how the writes were split. Coding
// each position was ~40% of pollend's CPU while it repaired one under
// overload (perf, jepsen heal-under-load, at 3x: one side's 5.6% went as
// Rice codes); a bitmap is a copy of the words each way. At 5x the heal
// took 2.6-4.5 s, median 3.4 s, over seeds 1-8, against 3.6-6.0 s, median
// 4.5 s, at 3x, for twice the bytes (168-235 MB of ranges from the five
// nodes, against 67-139 MB; simulation/README.md, "Bitmaps from 3% fill").
// Steady-state ranges, sparse with the bits in flight, stay Rice coded:
// pollen-sim's N=100, 20,000 adds/s row, 952 -> 954 bytes per key.
constexpr double kRangeBitmapCostRatio = 5.0;

uint64_t BlocksInRange(uint64_t blocks, uint64_t range) {
  crdt::FilterShape shape;
  shape.blocks = blocks;
  return SpanOf(shape, range).blocks;
}

void UnansweredBlocks::DropFront(size_t n, uint64_t blocks) {
  assert(n <= ranges.size());
  size_t hashed = 0;
  for (size_t i = 0; i < n; ++i) hashed += BlocksInRange(blocks, ranges[i]);
  assert(hashed <= hashes.size());
  ranges.erase(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(n));
  hashes.erase(hashes.begin(), hashes.begin() + static_cast<std::ptrdiff_t>(hashed));
}

size_t UnansweredBlocks::DropRanges(std::span<const uint64_t> newer, uint64_t blocks) {
  const absl::flat_hash_set<uint64_t> drop(newer.begin(), newer.end());
  std::vector<uint64_t> kept_ranges;
  std::vector<uint32_t> kept_hashes;
  size_t offset = 0;
  for (uint64_t r : ranges) {
    const size_t n = BlocksInRange(blocks, r);
    assert(offset + n <= hashes.size());
    if (!drop.contains(r)) {
      kept_ranges.push_back(r);
      kept_hashes.insert(kept_hashes.end(), hashes.begin() + static_cast<std::ptrdiff_t>(offset),
                         hashes.begin() + static_cast<std::ptrdiff_t>(offset + n));
    }
    offset += n;
  }
  const size_t dropped = hashes.size() - kept_hashes.size();
  ranges.swap(kept_ranges);
  hashes.swap(kept_hashes);
  return dropped;
}

namespace {

uint32_t HashBlockWords(uint64_t block, uint64_t salt, const std::array<uint64_t, crdt::kWordsPerBlock>& words) {
  uint64_t h = crdt::Mix64(salt ^ block);
  for (uint64_t word : words) h = crdt::Mix64(h ^ word);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

uint32_t BlockHash(const crdt::BlockedFilter& filter, uint64_t block, uint64_t salt) {
  std::array<uint64_t, crdt::kWordsPerBlock> words;
  for (uint64_t w = 0; w < crdt::kWordsPerBlock; ++w) words[w] = filter.LoadWord(block * crdt::kWordsPerBlock + w);
  return HashBlockWords(block, salt, words);
}

bool InMask(std::string_view blocks, uint64_t i) { return (static_cast<uint8_t>(blocks[i / 8]) >> (i % 8)) & 1; }

}  // namespace

void AppendBlockHashes(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                       google::protobuf::RepeatedField<uint32_t>* out) {
  const RangeSpan span = SpanOf(filter.shape(), range);
  for (uint64_t b = span.first_block; b < span.first_block + span.blocks; ++b) out->Add(BlockHash(filter, b, salt));
}

void AppendTheirBlockHashes(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                            std::span<const crdt::WordBits> theirs, std::string_view blocks,
                            std::vector<uint32_t>* out) {
  const RangeSpan span = SpanOf(filter.shape(), range);
  assert(blocks.empty() || blocks.size() == (span.blocks + 7) / 8);
  size_t next = 0;  // into theirs, ascending
  for (uint64_t i = 0; i < span.blocks; ++i) {
    const uint64_t block = span.first_block + i;
    if (!blocks.empty() && !InMask(blocks, i)) {
      out->push_back(BlockHash(filter, block, salt));
      continue;
    }
    std::array<uint64_t, crdt::kWordsPerBlock> words{};
    for (; next < theirs.size() && theirs[next].index / crdt::kWordsPerBlock <= block; ++next) {
      assert(theirs[next].index / crdt::kWordsPerBlock == block);
      words[theirs[next].index % crdt::kWordsPerBlock] = theirs[next].bits;
    }
    out->push_back(HashBlockWords(block, salt, words));
  }
  assert(next == theirs.size());
}

std::string DifferingBlocks(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                            std::span<const uint32_t> theirs) {
  const RangeSpan span = SpanOf(filter.shape(), range);
  assert(theirs.size() == span.blocks);
  std::string mask((span.blocks + 7) / 8, '\0');
  bool any = false;
  for (uint64_t i = 0; i < span.blocks; ++i) {
    if (BlockHash(filter, span.first_block + i, salt) != theirs[i]) {
      mask[i / 8] = static_cast<char>(static_cast<uint8_t>(mask[i / 8]) | (1u << (i % 8)));
      any = true;
    }
  }
  return any ? mask : std::string();
}

uint64_t EncodeRange(const crdt::BlockedFilter& filter, uint64_t range, wire::RangeData* out,
                     std::span<const crdt::WordBits> known, std::string_view blocks) {
  const RangeSpan span = SpanOf(filter.shape(), range);
  // Kept from call to call: a fresh vector per range, its pages faulted in
  // each time, cost a joining node ~10% of its CPU (perf, 512 MiB filter).
  // It holds at most one range's non-zero words: 16 bytes a word, 1/512 of
  // the biggest filter's bytes.
  thread_local std::vector<crdt::WordBits> words;
  words.clear();
  filter.ExportBlocksInto(span.first_block, span.blocks, &words);
  if (!blocks.empty()) {
    assert(blocks.size() == (span.blocks + 7) / 8);
    std::erase_if(words, [&](const crdt::WordBits& w) {
      return !InMask(blocks, w.index / crdt::kWordsPerBlock - span.first_block);
    });
    out->set_blocks(std::string(blocks));
  }
  assert(std::is_sorted(known.begin(), known.end(), [](const auto& a, const auto& b) { return a.index < b.index; }));
  if (!known.empty()) {
    // Both ascending by index: one merge pass clears the known bits.
    size_t k = 0;
    for (crdt::WordBits& w : words) {
      while (k < known.size() && known[k].index < w.index) ++k;
      if (k < known.size() && known[k].index == w.index) w.bits &= ~known[k].bits;
    }
    std::erase_if(words, [](const crdt::WordBits& w) { return w.bits == 0; });
  }
  out->set_range(range);
  out->set_positions(EncodeWords(words, span.first_block * crdt::kBlockBits, span.blocks * crdt::kBlockBits,
                                 kRangeBitmapCostRatio));
  return crdt::CountBits(words);
}

absl::StatusOr<std::vector<crdt::WordBits>> DecodeRange(const wire::RangeData& data, crdt::FilterShape shape,
                                                        uint64_t* bits) {
  std::vector<crdt::WordBits> words;
  if (absl::Status s = DecodeRangeInto(data, shape, &words, bits); !s.ok()) return s;
  return words;
}

absl::Status DecodeRangeInto(const wire::RangeData& data, crdt::FilterShape shape, std::vector<crdt::WordBits>* out,
                             uint64_t* bits) {
  const uint64_t bpr = BlocksPerRange(shape.blocks);
  const uint64_t ranges = (shape.blocks + bpr - 1) / bpr;
  if (data.range() >= ranges) return absl::InvalidArgumentError(absl::StrCat("range ", data.range(), " out of bounds"));
  const RangeSpan span = SpanOf(shape, data.range());
  const uint64_t universe = span.blocks * crdt::kBlockBits;
  const std::string_view blocks = data.blocks();
  if (!blocks.empty()) {
    if (blocks.size() != (span.blocks + 7) / 8) return absl::InvalidArgumentError("block bitmap length");
    if (span.blocks % 8 != 0 && (static_cast<uint8_t>(blocks.back()) >> (span.blocks % 8)) != 0) {
      return absl::InvalidArgumentError("block bitmap past the range");
    }
    if (blocks.find_first_not_of('\0') == std::string_view::npos) return absl::InvalidArgumentError("empty block bitmap");
  }
  const size_t start = out->size();
  if (absl::Status s = DecodeWordsInto(data.positions(), span.first_block * crdt::kBlockBits, universe, universe, out, bits);
      !s.ok()) {
    return s;
  }
  if (!blocks.empty()) {
    for (size_t i = start; i < out->size(); ++i) {
      if (!InMask(blocks, (*out)[i].index / crdt::kWordsPerBlock - span.first_block)) {
        return absl::InvalidArgumentError("bits outside the range's block bitmap");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pollen::node
