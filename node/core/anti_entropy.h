// Anti-entropy helpers: range summaries and range transfer for one generation.
//
// A generation of B blocks is cut into ranges of BlocksPerRange(B) blocks (at
// most kTargetRanges ranges), so a summary costs at most 8 * kTargetRanges bytes
// per generation whatever the filter size. Two replicas exchange summaries and
// then only the contents of the ranges whose summaries differ, in both
// directions; merging is OR, so the exchange is safe to repeat, reorder or lose.
//
// Summaries are hierarchical (issue 11): level 0 is one summary per range;
// level 1 folds each kRangesPerGroup consecutive ranges into one hash; level 2
// (kDigestLevel) folds the groups into one digest per generation. An exchange
// starts with digests and descends only into what differs, so equal replicas
// cost one datagram (A's catalog and a digest per generation) and no answer,
// and d differing ranges cost about 2·d·kRangesPerGroup hashes instead of all
// R = kTargetRanges summaries (8 KiB per generation, sent on every run before).
//
// Protocol (stateless on both sides but for cut legs kept for a resume;
// any leg may be lost, the next run starts over):
//   A -> B  SyncRequest: A's catalog; a level-2 digest per live generation.
//   B -> A  SyncRequest(partial): for generations whose digest differs, B's
//           hashes one level down (all groups); A answers likewise with the
//           ranges under the groups that differ, and so on down to level 0.
//   Whoever receives level-0 summaries of ranges of fewer than
//   kMinBlocksPerRangeForHashes blocks answers as the flat protocol did:
//   X -> Y  SyncRanges(reply=true): the ranges that differ ("wanted") with X's
//           contents of them, up to the exchange's byte budget (the last
//           frame of a cut exchange says `more`).
//   Y -> X  SyncRanges(reply=false): Y's bits of the wanted ranges that X's
//           contents lack.
//   Of bigger ranges, it descends once more, to blocks:
//   X -> Y  SyncRequest(partial): for each differing range, a salted 32-bit
//           hash of each of its blocks (GenerationSummary.blocks), up to the
//           exchange's byte budget (a cut leg says `more`).
//   Y -> X  SyncRanges(reply=true): Y's contents of the blocks whose hashes
//           differ, each range's with a bitmap of those blocks, wanted back;
//           `more` if the hashes' leg said so or Y's budget ran out.
//   X -> Y  SyncRanges(reply=false): X's bits of those blocks that Y lacks.
//   A leg cut by Y's budget says `resumable` too: Y kept the hashes it had
//   not got to, and X's SyncRequest(resume), sent once X has merged the
//   leg, brings the next budget's worth from there (no new descent).
//   B also answers A's first leg with whatever A did not summarize (whole
//   generations, whole filters) and with its catalog entries that differ
//   from A's. A level-0 request (the flat protocol) is still accepted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/blocked_filter.h"
#include "crdt/generations.h"
#include "protocol/wire.pb.h"

namespace pollen::node {

inline constexpr uint64_t kTargetRanges = 1024;
inline constexpr uint64_t kRangesPerGroup = 32;
inline constexpr uint32_t kDigestLevel = 2;

uint64_t BlocksPerRange(uint64_t blocks);
uint64_t RangeCount(uint64_t blocks);
// Items at `level` over `ranges` ranges: ranges, groups, or one digest.
uint64_t ItemsAt(uint32_t level, uint64_t ranges);
// Every hash at `level`, from the range summaries.
std::vector<uint64_t> LevelHashes(std::span<const uint64_t> range_summaries, uint32_t level);

// From precomputed range summaries (SummaryCache) of a filter of `blocks`
// blocks: the hashes at `level` of `items` (ascending; all of them when
// `items` is empty or lists every item, which is then left implicit).
void Summarize(std::span<const uint64_t> range_summaries, uint64_t blocks, uint64_t epoch, uint32_t level,
               std::span<const uint64_t> items, wire::GenerationSummary* out);

// Checks blocks_per_range, the level, the items (ascending, in bounds) and the
// summary count against `shape`; for a block-hash summary (`blocks`), the
// hash count against the blocks of its ranges.
absl::Status ValidateSummary(const wire::GenerationSummary& summary, crdt::FilterShape shape);

// The items of `theirs` (at its level) whose hash differs from ours
// (`theirs` validated for this shape).
std::vector<uint64_t> DifferingItems(std::span<const uint64_t> our_range_summaries,
                                     const wire::GenerationSummary& theirs);
// The items one level below `level` under `items` of that level (level >= 1).
std::vector<uint64_t> ChildItems(uint32_t level, std::span<const uint64_t> items, uint64_t ranges);

// Below level 0: block hashes. A generation whose ranges hold at least
// kMinBlocksPerRangeForHashes blocks answers level-0 summaries with a 32-bit
// hash of every block of each differing range (4 bytes per 64-byte block),
// and only the blocks whose hashes differ then go as contents. Under steady
// load every range differs by the few bits in flight, and the whole range
// went (jepsen heal-under-load: exchanges between replicas of one side
// carried ~200,000 bits per frame, 0.3% of them new). Smaller ranges go
// straight to contents, as before: there a block hash saves little.
inline constexpr uint64_t kMinBlocksPerRangeForHashes = 8;

// The blocks of `range` in a filter of `blocks` blocks.
uint64_t BlocksInRange(uint64_t blocks, uint64_t range);

// The block hashes of one generation that a content leg has not answered
// yet: a leg cut by the byte budget keeps them for the peer's resume.
struct UnansweredBlocks {
  crdt::FilterParams params;
  uint64_t epoch = 0;
  uint32_t layer = 0;
  uint64_t salt = 0;
  std::vector<uint64_t> ranges;  // in the order they are to be answered
  std::vector<uint32_t> hashes;  // each range's blocks' hashes (BlocksInRange), in order
  // Forgets the first `n` ranges and their hashes; `blocks`: the generation's.
  void DropFront(size_t n, uint64_t blocks);
  // Forgets the ranges in `newer` (a later leg's, of the same generation)
  // and their hashes: the later hashes are the fresher. Returns the number
  // of hashes dropped.
  size_t DropRanges(std::span<const uint64_t> newer, uint64_t blocks);
};
// Appends the salted hash of each block of `range`. The salt changes from
// exchange to exchange, so that two blocks whose hashes collide (2^-32) are
// told apart by the next one.
void AppendBlockHashes(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                       google::protobuf::RepeatedField<uint32_t>* out);
// The hashes AppendBlockHashes would give for the peer's copy of `range`, as
// its contents of the range show it: `theirs` (canonical words of the range,
// as DecodeRange returns them) for each block in `blocks` (their RangeData
// bitmap; every block when empty), and ours for any other block (the peer
// left it out because it was equal). An answer cut by the budget keeps these
// for the ranges it did not get to, as a content leg keeps the peer's hashes.
void AppendTheirBlockHashes(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                            std::span<const crdt::WordBits> theirs, std::string_view blocks,
                            std::vector<uint32_t>* out);
// The blocks of `range` whose hashes differ from `theirs` (that range's
// hashes, one per block) as a RangeData.blocks bitmap; empty if none.
std::string DifferingBlocks(const crdt::BlockedFilter& filter, uint64_t range, uint64_t salt,
                            std::span<const uint32_t> theirs);

// The set bits of one range less those in `known` (canonical: ascending
// word indexes, as DecodeRange returns them), and the reverse (validating
// index and contents). An answer to a peer's contents of a range carries
// only what the peer lacks: under steady load two replicas differ in every
// range by the bits still in flight, and the answer was the whole range.
// With a `blocks` bitmap (DifferingBlocks), only those blocks, and the
// bitmap goes along. Returns the number of bits encoded. DecodeRange sets
// `bits` (optional) to the number of bits decoded, CountBits of the result.
uint64_t EncodeRange(const crdt::BlockedFilter& filter, uint64_t range, wire::RangeData* out,
                     std::span<const crdt::WordBits> known = {}, std::string_view blocks = {});
absl::StatusOr<std::vector<crdt::WordBits>> DecodeRange(const wire::RangeData& data, crdt::FilterShape shape,
                                                        uint64_t* bits = nullptr);
// The same, appended to *out (DecodeWordsInto).
absl::Status DecodeRangeInto(const wire::RangeData& data, crdt::FilterShape shape, std::vector<crdt::WordBits>* out,
                             uint64_t* bits = nullptr);

}  // namespace pollen::node
