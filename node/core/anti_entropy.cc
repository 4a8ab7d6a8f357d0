#include "node/core/anti_entropy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "node/core/dissemination.h"

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

void Summarize(const crdt::BlockedFilter& filter, uint64_t epoch, wire::GenerationSummary* out) {
  const uint64_t bpr = BlocksPerRange(filter.shape().blocks);
  out->set_epoch(epoch);
  out->set_blocks_per_range(bpr);
  for (uint64_t s : filter.RangeSummaries(bpr)) out->add_summaries(s);
}

void Summarize(std::span<const uint64_t> summaries, uint64_t blocks, uint64_t epoch, wire::GenerationSummary* out) {
  out->set_epoch(epoch);
  out->set_blocks_per_range(BlocksPerRange(blocks));
  out->mutable_summaries()->Add(summaries.begin(), summaries.end());
}

absl::Status ValidateSummary(const wire::GenerationSummary& summary, crdt::FilterShape shape) {
  const uint64_t bpr = BlocksPerRange(shape.blocks);
  if (summary.blocks_per_range() != bpr) {
    return absl::InvalidArgumentError(absl::StrCat("blocks per range ", summary.blocks_per_range(), ", expected ", bpr));
  }
  const uint64_t ranges = (shape.blocks + bpr - 1) / bpr;
  if (static_cast<uint64_t>(summary.summaries_size()) != ranges) {
    return absl::InvalidArgumentError(absl::StrCat(summary.summaries_size(), " summaries, expected ", ranges));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> DifferingRanges(const crdt::BlockedFilter& ours, const wire::GenerationSummary& theirs) {
  return DifferingRanges(ours.RangeSummaries(BlocksPerRange(ours.shape().blocks)), theirs);
}

std::vector<uint64_t> DifferingRanges(std::span<const uint64_t> mine, const wire::GenerationSummary& theirs) {
  std::vector<uint64_t> out;
  for (uint64_t r = 0; r < mine.size() && r < static_cast<uint64_t>(theirs.summaries_size()); ++r) {
    if (mine[r] != theirs.summaries(static_cast<int>(r))) out.push_back(r);
  }
  return out;
}

void EncodeRange(const crdt::BlockedFilter& filter, uint64_t range, wire::RangeData* out) {
  const RangeSpan span = SpanOf(filter.shape(), range);
  std::vector<crdt::WordBits> words = filter.ExportBlocks(span.first_block, span.blocks);
  out->set_range(range);
  out->set_positions(EncodeWords(words, span.first_block * crdt::kBlockBits, span.blocks * crdt::kBlockBits));
}

absl::StatusOr<std::vector<crdt::WordBits>> DecodeRange(const wire::RangeData& data, crdt::FilterShape shape) {
  const uint64_t bpr = BlocksPerRange(shape.blocks);
  const uint64_t ranges = (shape.blocks + bpr - 1) / bpr;
  if (data.range() >= ranges) return absl::InvalidArgumentError(absl::StrCat("range ", data.range(), " out of bounds"));
  const RangeSpan span = SpanOf(shape, data.range());
  const uint64_t universe = span.blocks * crdt::kBlockBits;
  return DecodeWords(data.positions(), span.first_block * crdt::kBlockBits, universe, universe);
}

}  // namespace pollen::node
