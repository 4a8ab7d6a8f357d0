// Anti-entropy helpers: range summaries and range transfer for one generation.
//
// A generation of B blocks is cut into ranges of BlocksPerRange(B) blocks (at
// most kTargetRanges ranges), so a summary costs at most 8 * kTargetRanges bytes
// per generation whatever the filter size. Two replicas exchange summaries and
// then only the contents of the ranges whose summaries differ, in both
// directions; merging is OR, so the exchange is safe to repeat, reorder or lose.
//
// Protocol (all stream frames, stateless on both sides):
//   A -> B  SyncRequest: A's catalog and summaries of every live generation.
//   B -> A  SyncRanges(reply=true): B's catalog; per generation the ranges that
//           differ ("wanted") with B's contents of them; whole generations A did
//           not summarize (B is ahead, or A lacks the filter).
//   A -> B  SyncRanges(reply=false): A's contents of the wanted ranges.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/blocked_filter.h"
#include "protocol/wire.pb.h"

namespace pollen::node {

inline constexpr uint64_t kTargetRanges = 1024;

uint64_t BlocksPerRange(uint64_t blocks);

// Fills `out` with the summaries of `filter` at `epoch`.
void Summarize(const crdt::BlockedFilter& filter, uint64_t epoch, wire::GenerationSummary* out);

// The same from precomputed summaries (SummaryCache) of a filter of `blocks` blocks.
void Summarize(std::span<const uint64_t> summaries, uint64_t blocks, uint64_t epoch, wire::GenerationSummary* out);

// Checks blocks_per_range and the summary count against `shape`.
absl::Status ValidateSummary(const wire::GenerationSummary& summary, crdt::FilterShape shape);

// Ranges whose summary differs from ours (`theirs` validated for this shape).
std::vector<uint64_t> DifferingRanges(const crdt::BlockedFilter& ours, const wire::GenerationSummary& theirs);
std::vector<uint64_t> DifferingRanges(std::span<const uint64_t> ours, const wire::GenerationSummary& theirs);

// The set bits of one range, and the reverse (validating index and contents).
void EncodeRange(const crdt::BlockedFilter& filter, uint64_t range, wire::RangeData* out);
absl::StatusOr<std::vector<crdt::WordBits>> DecodeRange(const wire::RangeData& data, crdt::FilterShape shape);

}  // namespace pollen::node
