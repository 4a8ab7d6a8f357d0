// Snapshot deltas: the blocks of a filter that changed since its last
// snapshot or delta (BlockedFilter's dirty marks), with their contents then.
// A delta ORed into the state its predecessors describe gives at least the
// state when the delta began; since a filter only grows, deltas may be
// applied in any order and more than once (an older one over a newer base
// changes nothing).
//
// Format (all integers little-endian):
//   magic "PLNDLTA1" | sub_count u32 |
//   per sub-filter, ascending slot: epoch u64 | layer u32 | entries | 0xFE
//     entry: form u8 | gap varint (LEB128) | payload, for a block whose index
//            is the previous entry's + 1 + gap (the first: gap itself)
//       form 0..kMaxPositions: that many set-bit positions in the block, u16
//            each, ascending, < 512 (2 bytes a bit: the form for sparse blocks)
//       form 0xFF: the block's 8 words, u64 each
//   trailer: BLAKE2b-256 of every byte before it
// Sizes: a block with b bits set costs 2 + 2b bytes (b <= 31) or 66: a 1%
// filter near its capacity has ~45% of its bits set, so most blocks take 66
// bytes; a filter at 0.3% fill ~20.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/generations.h"
#include "crdt/snapshot.h"
#include "crdt/word_bits.h"

namespace pollen::crdt {

inline constexpr uint8_t kMaxDeltaPositions = 31;

// Takes the dirty marks of `subs` (a filter's live sub-filters, ascending
// slot; one consumer of the marks at a time) and hands the delta to `sink`
// in pieces (one per 4096 blocks scanned). Sets *blocks to the number of
// blocks written if non-null. A sink error stops it: the marks taken so far
// are gone, so the caller must then write a whole snapshot next time.
absl::Status StreamDelta(std::span<const std::shared_ptr<const SubFilter>> subs, const SnapshotSink& sink,
                         uint64_t* blocks = nullptr);

// A decoded delta: per slot, the words to OR in (non-zero, ascending index).
using DeltaContents = std::vector<std::pair<uint64_t, std::vector<WordBits>>>;

// Validates everything (magic, checksum, structure, every slot live in `set`,
// every block and position within its sub-filter) before returning; changes
// nothing. Apply the result with GenerationSet::Merge.
absl::StatusOr<DeltaContents> DecodeDelta(std::string_view bytes, const GenerationSet& set);

// The same validation, all of it before `sink` is first called; then the
// words in batches of at most kDeltaBatchWords (non-zero, ascending slot and
// index; a batch holds one slot's words). For recovery: a 4 GiB filter's
// 83 MB delta decoded into one vector took 10^7 words, 160 MB of fresh pages
// (restart, 2026-12-05); the batches reuse one small buffer.
inline constexpr size_t kDeltaBatchWords = 4096;
using DeltaBatchSink = std::function<void(uint64_t slot, std::span<const WordBits> words)>;
absl::Status VisitDelta(std::string_view bytes, const GenerationSet& set, const DeltaBatchSink& sink);

}  // namespace pollen::crdt
