// BlockedFilter: a lock-free, cache-line-blocked Bloom filter over one 64-bit
// hash per key.
//
// Layout: `blocks` 64-byte-aligned blocks of 8 atomic 64-bit words.
// A hash h picks block  mulhi(h, blocks)  (multiply-shift: uniform, no modulo)
// and k bit positions inside the block's 512 bits from a remix of h (see
// block_probe.h for the probe sequence and the FPR it measures).
//
// Promises:
//  - Add, Merge, MightContain and the summaries may run concurrently from any
//    number of threads without locks. Words only gain bits (the state is a
//    join-semilattice under OR), so a bit seen set stays set.
//  - Add returns exactly the bits it newly set (from fetch_or's old value), so a
//    node can forward those and nothing else. An add whose bits are all set
//    already performs loads only: no read-modify-write, no cache line made dirty.
//  - Merge ORs in a set of words and returns the bits that changed.
//  - No false negatives: once Add(h) or a Merge containing h's bits returned,
//    MightContain(h) is true in every thread that observes the return.
//  - Dirty blocks: every Add, AddMany, Merge and MergeFrom that sets a bit in
//    a block marks the block dirty (one bit per block, 1/512 of the filter)
//    before it returns; TakeDirty hands the marks to one consumer (the
//    incremental snapshot) and clears them. A consumer that reads a block's
//    words after TakeDirty saw its mark cleared sees every bit of the adds
//    whose marks it took, and an add whose bits it may have missed leaves its
//    mark set for the next TakeDirty (see MarkDirty for why).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/block_probe.h"
#include "crdt/sizing.h"
#include "crdt/word_bits.h"

namespace pollen::crdt {

// The bits one Add newly set.
//  - One block per key (parts == 1): `block`, and in new_bits[w] the bits
//    newly set in word w of it.
//  - Several parts (sizing.h): new_bits[i], i < parts, holds part i's new
//    bits packed, as up to kMaxBitsPerPart 10-bit fields (bit 9 set: a new
//    bit, at position bits 0-8 of the part's block); the key's hash and the
//    filter's block count (in the last two words, which no part uses) give
//    each part's block. ForEachNewWord and AppendTo unpack them.
// Why packed: a result per key is built and copied on every add. Six plain
// blocks (440 bytes) made an add of a present key 15.6 -> 30 ns and a batch
// add of present keys 2.3x slower; six blocks and the same words (120 bytes)
// still 1.25x and 1.37x (bench_filter, same run as the one-block code before
// parts). This form is the one-block result plus `parts`.
struct AddResult {
  static_assert(kMaxParts + 2 <= kWordsPerBlock && kMaxBitsPerPart * 10 <= 64);
  static constexpr uint32_t kFieldBits = 10;
  static constexpr uint64_t kFieldSet = uint64_t{1} << 9;
  static constexpr uint32_t kFilterBlocksWord = kWordsPerBlock - 2;  // several parts only
  static constexpr uint32_t kHashWord = kWordsPerBlock - 1;          // several parts only
  uint64_t block = 0;  // the key's block (part 0's)
  std::array<uint64_t, kWordsPerBlock> new_bits{};
  uint32_t parts = 1;
  uint64_t part_block(uint32_t i) const;
  bool was_present() const;  // no new bit: "already seen"
  // Calls fn(absolute word index, new bits) for every word with new bits.
  template <class Fn>
  void ForEachNewWord(Fn&& fn) const;
  // Appends the non-zero words as WordBits (absolute word indices).
  void AppendTo(std::vector<WordBits>& out) const;
};

inline uint64_t AddResult::part_block(uint32_t i) const {
  if (i == 0) return block;
  return probe::BlockOf(probe::PartHash(new_bits[kHashWord], i), new_bits[kFilterBlocksWord]);
}

template <class Fn>
void AddResult::ForEachNewWord(Fn&& fn) const {
  if (parts == 1) {
    for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
      if (new_bits[w] != 0) fn(block * kWordsPerBlock + w, new_bits[w]);
    }
    return;
  }
  for (uint32_t i = 0; i < parts; ++i) {
    if (new_bits[i] == 0) continue;
    std::array<uint64_t, kWordsPerBlock> masks{};
    for (uint64_t packed = new_bits[i]; packed != 0; packed >>= kFieldBits) {
      const uint64_t field = packed & ((uint64_t{1} << kFieldBits) - 1);
      if ((field & kFieldSet) != 0) masks[(field & 511) >> 6] |= uint64_t{1} << (field & 63);
    }
    const uint64_t base = part_block(i) * kWordsPerBlock;
    for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
      if (masks[w] != 0) fn(base + w, masks[w]);
    }
  }
}

// Whether filters of 2 MiB and more ask the kernel for transparent huge pages
// (MADV_HUGEPAGE; honoured where /sys/kernel/mm/transparent_hugepage/enabled is
// `madvise` or `always`). Process-wide: the daemon sets it once at start, from
// its `huge-pages` setting, before any filter exists; filters made earlier keep
// the policy they were made with. Default kAdvise. docs/web-scale.md has the
// measurements both ways.
enum class HugePages { kAdvise, kNone };
void SetHugePages(HugePages policy);
HugePages GetHugePages();

class BlockedFilter {
 public:
  // Errors: shape outside ValidateShape, or memory could not be allocated.
  static absl::StatusOr<std::unique_ptr<BlockedFilter>> Create(FilterShape shape);
  ~BlockedFilter();
  BlockedFilter(const BlockedFilter&) = delete;
  BlockedFilter& operator=(const BlockedFilter&) = delete;

  FilterShape shape() const { return shape_; }
  uint64_t word_count() const { return shape_.blocks * kWordsPerBlock; }

  // Test first: a present key (the common case in dedup streams) costs a test
  // (inline, like MightContain: the call it saves is ~1 ns of a ~23 ns add).
  AddResult Add(uint64_t hash) {
    if (shape_.parts != 1) return AddParts(hash, /*mark=*/true);
    const uint64_t block = BlockOf(hash);
    if (MightContain(hash)) return Unchanged(block);
    return AddMasks(block, MasksOf(hash));
  }
  // Adds whose dirty marks are set together, 64 changed blocks at a time
  // and at the end, instead of key by key: for loops that add keys one by
  // one (GenerationSet's pipelined adds). Results are final at once; the
  // marks are all set when the batch is destroyed, so destroy it before
  // anyone is told of the adds (before they are logged).
  class AddBatch {
   public:
    explicit AddBatch(BlockedFilter& f);
    ~AddBatch();
    AddBatch(const AddBatch&) = delete;
    AddBatch& operator=(const AddBatch&) = delete;
    AddResult Add(uint64_t hash);

   private:
    BlockedFilter& f_;
    std::array<uint64_t, 64> blocks_;  // 64 >= kMaxParts: one add's blocks always fit
    size_t n_ = 0;
  };

  // Uses the AVX-512 probe where the CPU has it (probe::VectorProbeAvailable):
  // one 64-byte vector load of the block, which x86 performs as 8 single-copy-
  // atomic word loads; bits only go from 0 to 1, so it sees what a relaxed
  // atomic load of each word would.
  bool MightContain(uint64_t hash) const {  // inline: one call, not two, per test
    if (!vector_probe_ || shape_.parts != 1) return MightContainPortable(hash);
    return probe::BlockHasAllVector(words_ + BlockOf(hash) * kWordsPerBlock, hash, shape_.k);
  }
  // The scalar probe, on every CPU: same answer as MightContain (a test checks
  // they agree); exposed for tests and benchmarks.
  bool MightContainPortable(uint64_t hash) const;

  // Starts fetching the block of `hash` into cache: call it as soon as a hash
  // is known, then probe a few keys later (the batch forms below do this).
  void Prefetch(uint64_t hash) const {
    PrefetchBlock(BlockOf(hash));
    for (uint32_t i = 1; i < shape_.parts; ++i) PrefetchBlock(BlockOf(probe::PartHash(hash, i)));
  }

  // Batch forms: prefetch the blocks of upcoming hashes to overlap cache misses.
  // `out` has the same length as `hashes`. MightContainMany prefetches
  // `prefetch_distance` keys ahead (0: none, for a filter that fits in cache).
  void AddMany(std::span<const uint64_t> hashes, std::span<AddResult> out);
  void MightContainMany(std::span<const uint64_t> hashes, std::span<bool> out,
                        size_t prefetch_distance = kDefaultPrefetchDistance) const;
  // 8 blocks in flight keeps the 10-12 line-fill buffers of a core busy
  // without evicting lines before use.
  static constexpr size_t kDefaultPrefetchDistance = 8;

  // The AVX-512 probes run here (one-part shapes; several parts take the scalar probe).
  bool vector_probe() const { return vector_probe_ && shape_.parts == 1; }

  // ORs `words` in (indices must be < word_count(), else InvalidArgument and
  // nothing changes). Appends the bits that were new to `changed` if non-null.
  absl::Status Merge(std::span<const WordBits> words, std::vector<WordBits>* changed);

  // ORs in all of `other` (same shape required). Appends changed bits if non-null.
  absl::Status MergeFrom(const BlockedFilter& other, std::vector<WordBits>* changed);

  // ORs little-endian words (a snapshot's payload: bytes.size() a multiple of
  // 8) into words [first, first + bytes.size() / 8), which must lie inside the
  // filter (asserted: the caller validated the snapshot), marks the blocks it
  // changed dirty, and returns the number of bits set in that range after.
  // Recovery's one pass over a snapshot: docs/web-scale.md, "Restart".
  uint64_t OrLittleEndianWords(uint64_t first, std::string_view bytes);

  // The same for words that hold no bit yet and that no other thread writes
  // (recovery, before the node serves: crdt::OrSnapshotIntoEmpty): plain
  // stores, no locked read-modify-write, and no dirty marks (the file being
  // loaded holds these words). At 4 GiB and 17% fill nearly every word is
  // non-zero, and a locked OR per word cost seconds of a restart.
  uint64_t StoreLittleEndianWordsIntoEmpty(uint64_t first, std::string_view bytes);

  // Has the kernel back words [first, first + count) with zeroed pages now
  // (MADV_POPULATE_WRITE), for a caller about to write all of them, and reads
  // one word per page so that this process's mapping of each page is made
  // here too: on this VM (a paravirtualized guest) the first access to a
  // populated 4 KiB page still cost ~4.7 us, 1.2 s/GiB, paid by whichever
  // thread touches it first, once for the whole process (C test, 2026-12-05).
  // The words keep their values, so it may run on any thread, alongside
  // everything.
  // Recovery runs it on a helper thread while the driver verifies and ORs the
  // snapshot (Persistence::Recover). Does nothing where the kernel lacks it.
  void Populate(uint64_t first, uint64_t count) const;

  // Huge pages around a restart (docs/web-scale.md, "Restart"). Recovery
  // keeps them on while it faults a filter in; where the kernel had to use
  // 4 KiB pages, RestoreHugePages asks again (AdviseHugePages(true)) and has
  // the kernel rebuild them in the background (CollapseHugePages piece by
  // piece, MADV_COLLAPSE: 2.1 s/GiB of 4 KiB pages, words readable and
  // writable throughout). AdviseHugePages(false) turns them off for a
  // mapping. No-ops under huge-pages = false, for filters under 2 MiB, and
  // where the kernel lacks them.
  void AdviseHugePages(bool on) const;
  void CollapseHugePages(uint64_t first, uint64_t count) const;

  // Zeroes every word and dirty mark. Breaks the grow-only promise, so only
  // for a filter no other thread uses: recovery undoing a snapshot whose
  // checksum failed after its words were ORed in (OrSnapshotIntoEmpty).
  void ClearAll();

  // Word-level access for snapshots, range transfer and tests.
  uint64_t LoadWord(uint64_t index) const;
  // Non-zero words of blocks [first_block, first_block + block_count).
  std::vector<WordBits> ExportBlocks(uint64_t first_block, uint64_t block_count) const;
  // The same, appended to *out (a caller's buffer, kept between calls).
  void ExportBlocksInto(uint64_t first_block, uint64_t block_count, std::vector<WordBits>* out) const;

  // Per-range summaries: a range is `blocks_per_range` consecutive blocks (the
  // last range may be shorter). A summary is a 64-bit mix of the range's words
  // (and their positions): equal ranges give equal summaries; differing ranges
  // differ except with probability ~2^-64.
  uint64_t RangeCount(uint64_t blocks_per_range) const;
  uint64_t RangeSummary(uint64_t range, uint64_t blocks_per_range) const;
  std::vector<uint64_t> RangeSummaries(uint64_t blocks_per_range) const;
  // The summary RangeSummary gives `range` when it has no bit set (no scan).
  uint64_t EmptyRangeSummary(uint64_t range, uint64_t blocks_per_range) const;

  uint64_t CountSetBits() const;  // scans the filter: O(size)
  double FillRatio() const;       // CountSetBits() / bits

  // Equal shapes and equal words (a racy snapshot if writers are active).
  bool SameContents(const BlockedFilter& other) const;

  // Dirty marks: bit b of dirty word i is block 64 * i + b. TakeDirty clears
  // dirty words [first, first + out.size()) and returns their marks in `out`;
  // after it, loads of those blocks' words see what the promise above says.
  // One consumer at a time. ClearDirty drops every mark (after a recovery
  // whose files already hold the loaded bits).
  uint64_t dirty_word_count() const { return (shape_.blocks + 63) / 64; }
  void TakeDirty(uint64_t first, std::span<uint64_t> out);
  void ClearDirty();

  // Block index and in-block bit masks for `hash` (for a shape of several
  // parts: part 0's, whose hash is `hash`): exposed for tests/benches.
  uint64_t BlockOf(uint64_t hash) const { return probe::BlockOf(hash, shape_.blocks); }
  std::array<uint64_t, kWordsPerBlock> MasksOf(uint64_t hash) const;

 private:
  BlockedFilter(FilterShape shape, uint64_t* words, size_t mapped_bytes, uint64_t* dirty, size_t dirty_bytes);
  // Words are plain uint64_t in zero-filled mmap'ed memory (so a 1 GiB filter
  // costs nothing until touched) and are only ever accessed through
  // std::atomic_ref, which makes every access atomic.
  static std::atomic_ref<uint64_t> Word(uint64_t* words, uint64_t index) {
    return std::atomic_ref<uint64_t>(words[index]);
  }
  uint64_t LoadRelaxed(uint64_t index) const;
  // Sets the masks' bits without marking the block dirty (callers mark).
  AddResult SetMasks(uint64_t block, const std::array<uint64_t, kWordsPerBlock>& masks);
  AddResult AddMasks(uint64_t block, const std::array<uint64_t, kWordsPerBlock>& masks);
  AddResult AddUnmarked(uint64_t hash) {
    if (shape_.parts != 1) return AddParts(hash, /*mark=*/false);
    const uint64_t block = BlockOf(hash);
    if (MightContain(hash)) return Unchanged(block);
    return SetMasks(block, MasksOf(hash));
  }
  static AddResult Unchanged(uint64_t block) {
    AddResult result;
    result.block = block;
    return result;
  }
  // Add for a shape of several parts: sets each part's k / parts bits in
  // its block, marking the changed blocks dirty if `mark`.
  AddResult AddParts(uint64_t hash, bool mark);
  // Marks blocks dirty after their bits were set (see the .cc for the order).
  void MarkDirty(std::span<const uint64_t> blocks);
  // Inline: as a call it was 8% of a 14-layer stack's batch test (perf).
  void PrefetchBlock(uint64_t block) const { __builtin_prefetch(words_ + block * kWordsPerBlock, 0, 3); }

  FilterShape shape_;
  uint64_t* words_;  // page-aligned (so 64-byte aligned) and zero-filled
  size_t mapped_bytes_;
  uint64_t* dirty_;  // dirty_word_count() words, zero-filled mmap, via atomic_ref
  size_t dirty_mapped_bytes_;
  bool vector_probe_;
};

}  // namespace pollen::crdt
