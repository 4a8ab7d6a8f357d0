#include "crdt/blocked_filter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "crdt/block_probe.h"
#include "crdt/cpu_paths.h"
#include "crdt/popcount.h"

namespace pollen::crdt {
namespace {

constexpr uint64_t kHugePage = 2 << 20;
// The order of every read-modify-write that sets filter bits: seq_cst, so that
// MarkDirty needs no fence (see there).
constexpr std::memory_order kSetOrder = std::memory_order_seq_cst;

uint64_t Fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

constexpr size_t kPrefetchDistance = BlockedFilter::kDefaultPrefetchDistance;

std::atomic<HugePages> huge_pages{HugePages::kAdvise};

}  // namespace

void SetHugePages(HugePages policy) { huge_pages.store(policy, std::memory_order_relaxed); }
HugePages GetHugePages() { return huge_pages.load(std::memory_order_relaxed); }

bool AddResult::was_present() const {
  const uint32_t used = parts == 1 ? kWordsPerBlock : parts;
  for (uint32_t w = 0; w < used; ++w) {
    if (new_bits[w] != 0) return false;
  }
  return true;
}

void AddResult::AppendTo(std::vector<WordBits>& out) const {
  ForEachNewWord([&](uint64_t index, uint64_t bits) { out.push_back({index, bits}); });
}

absl::StatusOr<std::unique_ptr<BlockedFilter>> BlockedFilter::Create(FilterShape shape) {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  size_t bytes = shape.bytes();
  if (bytes >= kHugePage) bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Filters of 2 MiB and more start on a 2 MiB boundary, so that every one
  // of their 2 MiB pieces can be a huge page: map 2 MiB more, then unmap the
  // unaligned head and the tail (address space only: nothing was touched).
  const size_t slack = bytes >= kHugePage ? kHugePage : 0;
  void* mem = mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for a filter: ", std::strerror(errno)));
  }
  if (slack > 0) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(mem);
    const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
    if (aligned > start) munmap(mem, aligned - start);
    if (const size_t tail = start + slack - aligned; tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    mem = reinterpret_cast<void*>(aligned);
  }
  // Huge pages cut TLB misses on large filters; refusal is harmless.
  if (bytes >= kHugePage && GetHugePages() == HugePages::kAdvise) madvise(mem, bytes, MADV_HUGEPAGE);
  const size_t dirty_bytes = (shape.blocks + 63) / 64 * 8;
  void* dirty = mmap(nullptr, dirty_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (dirty == MAP_FAILED) {
    munmap(mem, bytes);
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", dirty_bytes,
                                                     " bytes for a filter's dirty marks: ", std::strerror(errno)));
  }
  return std::unique_ptr<BlockedFilter>(
      new BlockedFilter(shape, static_cast<uint64_t*>(mem), bytes, static_cast<uint64_t*>(dirty), dirty_bytes));
}

BlockedFilter::BlockedFilter(FilterShape shape, uint64_t* words, size_t mapped_bytes, uint64_t* dirty,
                             size_t dirty_bytes)
    : shape_(shape),
      words_(words),
      mapped_bytes_(mapped_bytes),
      dirty_(dirty),
      dirty_mapped_bytes_(dirty_bytes),
      vector_probe_(probe::VectorProbeAvailable()) {
  assert(reinterpret_cast<uintptr_t>(words) % 64 == 0);
}

BlockedFilter::~BlockedFilter() {
  munmap(words_, mapped_bytes_);
  munmap(dirty_, dirty_mapped_bytes_);
}

// The order, and why the mark is loaded before it is set: this is the
// store-buffering pattern. A writer sets bits W with seq_cst read-modify-writes
// (kSetOrder), then loads the block's mark L (seq_cst); the consumer clears
// marks X (TakeDirty's exchange), then a seq_cst fence F, then reads words R.
// If L reads the mark as set, L is coherence-ordered before X, so L precedes F
// in the single total order S ([atomics.order]/4.2), and W, sequenced before L,
// precedes it too. Were R to read a word older than W, R would be
// coherence-ordered before W, and F, which happens before R, would precede W
// in S (/4.3): a contradiction. So a writer that finds its mark still set may
// skip setting it: the consumer's read of the block sees its bits. A writer
// that finds it clear sets it, and the mark waits for the next TakeDirty. A
// relaxed load would be wrong: it could see a mark the consumer had already
// cleared. Loading first keeps the marks' cache lines shared while they are
// set: most adds of a snapshot interval find their block's mark set already.
//
// An earlier form set W relaxed and put a seq_cst fence between W and L. On
// x86 a locked RMW is already a full barrier and a seq_cst load a plain load,
// so the fence (GCC 12: `lock orq $0, (%rsp)`) was one more locked
// instruction per add, for nothing: BM_TestAndAddNew/0/16 went from 47.6-49.1
// to 45.5-47.1 ns (three alternating runs of the two builds, 2026-12-06). On
// ARM a seq_cst fetch_or and load (LSE ldsetal, ldar) cost about what the
// fence did.
void BlockedFilter::MarkDirty(std::span<const uint64_t> blocks) {
  for (uint64_t block : blocks) {
    assert(block < shape_.blocks);
    std::atomic_ref<uint64_t> marks = Word(dirty_, block / 64);
    const uint64_t bit = uint64_t{1} << (block % 64);
    if ((marks.load(std::memory_order_seq_cst) & bit) == 0) marks.fetch_or(bit, std::memory_order_relaxed);
  }
}

void BlockedFilter::TakeDirty(uint64_t first, std::span<uint64_t> out) {
  assert(first <= dirty_word_count() && out.size() <= dirty_word_count() - first);
  for (size_t i = 0; i < out.size(); ++i) {
    std::atomic_ref<uint64_t> marks = Word(dirty_, first + i);
    out[i] = marks.load(std::memory_order_relaxed) == 0 ? 0 : marks.exchange(0, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void BlockedFilter::ClearDirty() {
  std::vector<uint64_t> sink(std::min<uint64_t>(dirty_word_count(), 4096));
  for (uint64_t first = 0; first < dirty_word_count(); first += sink.size()) {
    TakeDirty(first, std::span(sink).first(std::min<uint64_t>(sink.size(), dirty_word_count() - first)));
  }
}

uint64_t BlockedFilter::LoadRelaxed(uint64_t index) const {
  return Word(words_, index).load(std::memory_order_relaxed);
}

// Each probe ORs its bit into its word's mask in a stack array. (An earlier
// form kept the 8 masks in registers with "m_w |= word == w ? bit : 0" for
// every word; GCC 12 compiled that to a chain of data-dependent branches, ~7
// mispredictions per key: 39% of a new key's add in perf.)
std::array<uint64_t, kWordsPerBlock> BlockedFilter::MasksOf(uint64_t hash) const {
  std::array<uint64_t, kWordsPerBlock> masks{};
  probe::ForEachPosition(hash, shape_.k / shape_.parts,
                         [&](uint64_t pos) { masks[pos >> 6] |= uint64_t{1} << (pos & 63); });
  return masks;
}

// Loads first and only issues fetch_or for words missing a bit: an add of a key
// already present dirties no cache line, so a dedup stream full of repeats runs
// at the cost of a test. Readers need no more than relaxed ordering: bits only
// ever go from 0 to 1, and a reader that learns of the add through any
// synchronizing channel (the reply to a client, a mutex, a join) is ordered
// after the fetch_or. The dirty marks need seq_cst (kSetOrder, MarkDirty).
AddResult BlockedFilter::AddMasks(uint64_t block, const std::array<uint64_t, kWordsPerBlock>& masks) {
  AddResult result = SetMasks(block, masks);
  if (!result.was_present()) MarkDirty(std::span(&block, 1));
  return result;
}

AddResult BlockedFilter::SetMasks(uint64_t block, const std::array<uint64_t, kWordsPerBlock>& masks) {
  AddResult result;
  result.block = block;
  const uint64_t base = block * kWordsPerBlock;
  for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
    const uint64_t mask = masks[w];
    if (mask == 0) continue;
    std::atomic_ref<uint64_t> word = Word(words_, base + w);
    if ((word.load(std::memory_order_relaxed) & mask) == mask) continue;
    const uint64_t old = word.fetch_or(mask, kSetOrder);
    result.new_bits[w] = mask & ~old;
  }
  return result;
}

// Tests first, as the one-part Add: a key present in every part sets
// nothing. Otherwise each part is set as SetMasks sets a block (a part
// whose bits are all there already issues loads only), and its new bits
// are packed into the result (AddResult).
AddResult BlockedFilter::AddParts(uint64_t hash, bool mark) {
  assert(shape_.parts > 1 && shape_.parts <= kMaxParts);
  if (MightContainPortable(hash)) return Unchanged(BlockOf(hash));
  const uint32_t per_part = shape_.k / shape_.parts;
  AddResult result;
  result.parts = shape_.parts;
  result.new_bits[AddResult::kHashWord] = hash;
  result.new_bits[AddResult::kFilterBlocksWord] = shape_.blocks;
  std::array<uint64_t, kMaxParts> changed;
  size_t n_changed = 0;
  for (uint32_t i = 0; i < shape_.parts; ++i) {
    const uint64_t part_hash = probe::PartHash(hash, i);
    const uint64_t block = BlockOf(part_hash);
    std::array<uint64_t, kWordsPerBlock> fresh = SetMasks(block, MasksOf(part_hash)).new_bits;
    if (i == 0) result.block = block;
    uint64_t packed = 0;
    uint32_t field = 0;
    probe::ForEachPosition(part_hash, per_part, [&](uint64_t pos) {
      const uint64_t bit = uint64_t{1} << (pos & 63);
      if ((fresh[pos >> 6] & bit) == 0) return;
      fresh[pos >> 6] &= ~bit;  // a position probed twice is packed once
      packed |= (AddResult::kFieldSet | pos) << (AddResult::kFieldBits * field++);
    });
    assert(field <= kMaxBitsPerPart);
    result.new_bits[i] = packed;
    if (packed != 0) changed[n_changed++] = block;
  }
  if (mark) MarkDirty(std::span(changed).first(n_changed));
  return result;
}

// Several parts: part by part, stopping at the first that misses (a
// non-member at rate p passes a part with p^(1 / parts): at 0.01% and 4
// parts, 90% stop after one cache line).
bool BlockedFilter::MightContainPortable(uint64_t hash) const {
  const uint32_t per_part = shape_.k / shape_.parts;
  for (uint32_t i = 0; i < shape_.parts; ++i) {
    const uint64_t part_hash = probe::PartHash(hash, i);
    const uint64_t base = BlockOf(part_hash) * kWordsPerBlock;
    uint64_t all = 1;
    probe::ForEachPosition(part_hash, per_part,
                           [&](uint64_t pos) { all &= LoadRelaxed(base + (pos >> 6)) >> (pos & 63); });
    if ((all & 1) == 0) return false;
  }
  return true;
}

void BlockedFilter::AddMany(std::span<const uint64_t> hashes, std::span<AddResult> out) {
  assert(hashes.size() == out.size());
  for (size_t i = 0; i < hashes.size() && i < kPrefetchDistance; ++i) Prefetch(hashes[i]);
  AddBatch batch(*this);
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (i + kPrefetchDistance < hashes.size()) Prefetch(hashes[i + kPrefetchDistance]);
    out[i] = batch.Add(hashes[i]);
  }
}

void BlockedFilter::MightContainMany(std::span<const uint64_t> hashes, std::span<bool> out,
                                     size_t prefetch_distance) const {
  assert(hashes.size() == out.size());
  if (vector_probe()) {
    probe::BlocksHaveAllVector(words_, shape_.blocks, shape_.k, hashes, out, prefetch_distance);
    return;
  }
  // Several parts: part 0's block only is prefetched; most non-members
  // stop there (MightContainPortable).
  for (size_t i = 0; i < hashes.size() && i < prefetch_distance; ++i) PrefetchBlock(BlockOf(hashes[i]));
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (i + prefetch_distance < hashes.size()) PrefetchBlock(BlockOf(hashes[i + prefetch_distance]));
    out[i] = MightContainPortable(hashes[i]);
  }
}

BlockedFilter::AddBatch::AddBatch(BlockedFilter& f) : f_(f) {}

BlockedFilter::AddBatch::~AddBatch() { f_.MarkDirty(std::span(blocks_).first(n_)); }

AddResult BlockedFilter::AddBatch::Add(uint64_t hash) {
  const AddResult result = f_.AddUnmarked(hash);
  if (result.was_present()) return result;
  static_assert(std::tuple_size_v<decltype(blocks_)> >= kMaxParts);
  if (n_ + result.parts > blocks_.size()) f_.MarkDirty(std::span(blocks_).first(std::exchange(n_, 0)));
  if (result.parts == 1) {
    blocks_[n_++] = result.block;
    return result;
  }
  for (uint32_t i = 0; i < result.parts; ++i) {
    if (result.new_bits[i] != 0) blocks_[n_++] = result.part_block(i);
  }
  return result;
}

namespace {

// Blocks a merge changed, marked dirty 64 at a time and at the end
// (consecutive words of one block are marked once).
class DirtyBatch {
 public:
  explicit DirtyBatch(std::function<void(std::span<const uint64_t>)> mark) : mark_(std::move(mark)) {}
  ~DirtyBatch() { mark_(std::span(blocks_).first(n_)); }
  void Add(uint64_t block) {
    if (n_ > 0 && blocks_[n_ - 1] == block) return;
    blocks_[n_++] = block;
    if (n_ == blocks_.size()) mark_(std::span(blocks_).first(std::exchange(n_, 0)));
  }

 private:
  std::function<void(std::span<const uint64_t>)> mark_;
  std::array<uint64_t, 64> blocks_;
  size_t n_ = 0;
};

}  // namespace

absl::Status BlockedFilter::Merge(std::span<const WordBits> words, std::vector<WordBits>* changed) {
  const uint64_t limit = word_count();
  for (const WordBits& w : words) {  // validate everything before changing anything
    if (w.index >= limit) {
      return absl::InvalidArgumentError(absl::StrCat("word index ", w.index, " outside filter of ", limit, " words"));
    }
  }
  DirtyBatch dirty([this](std::span<const uint64_t> blocks) { MarkDirty(blocks); });
  for (const WordBits& w : words) {
    std::atomic_ref<uint64_t> word = Word(words_, w.index);
    if ((word.load(std::memory_order_relaxed) & w.bits) == w.bits) continue;
    const uint64_t fresh = w.bits & ~word.fetch_or(w.bits, kSetOrder);
    if (fresh == 0) continue;
    if (changed != nullptr) changed->push_back({w.index, fresh});
    dirty.Add(w.index / kWordsPerBlock);
  }
  return absl::OkStatus();
}

absl::Status BlockedFilter::MergeFrom(const BlockedFilter& other, std::vector<WordBits>* changed) {
  if (other.shape_ != shape_) return absl::InvalidArgumentError("cannot merge filters of different shapes");
  DirtyBatch dirty([this](std::span<const uint64_t> blocks) { MarkDirty(blocks); });
  for (uint64_t i = 0; i < word_count(); ++i) {
    const uint64_t bits = other.LoadRelaxed(i);
    if (bits == 0) continue;
    std::atomic_ref<uint64_t> word = Word(words_, i);
    if ((word.load(std::memory_order_relaxed) & bits) == bits) continue;
    const uint64_t fresh = bits & ~word.fetch_or(bits, kSetOrder);
    if (fresh == 0) continue;
    if (changed != nullptr) changed->push_back({i, fresh});
    dirty.Add(i / kWordsPerBlock);
  }
  return absl::OkStatus();
}

uint64_t BlockedFilter::LoadWord(uint64_t index) const {
  assert(index < word_count());
  return LoadRelaxed(index);
}

std::vector<WordBits> BlockedFilter::ExportBlocks(uint64_t first_block, uint64_t block_count) const {
  std::vector<WordBits> out;
  ExportBlocksInto(first_block, block_count, &out);
  return out;
}

void BlockedFilter::ExportBlocksInto(uint64_t first_block, uint64_t block_count, std::vector<WordBits>* out) const {
  assert(first_block <= shape_.blocks);
  const uint64_t last_block = std::min(shape_.blocks, first_block + block_count);
  // 64 blocks a step into room made for all their words, then cut back. A
  // block of zero words is skipped whole (an empty range, a joining node's
  // asked for its contents, costs a read of it and no stores); the words of
  // other blocks are each written and kept only if non-zero, without a
  // branch: between 1% and 60% fill "is this word zero" is a coin toss, and
  // that branch with push_back made a joining node's sender export at 1.7
  // GB/s (perf, 1 GiB filter).
  constexpr uint64_t kStepBlocks = 64;
  for (uint64_t block = first_block; block < last_block;) {
    const uint64_t stop = std::min(last_block, block + kStepBlocks);
    size_t filled = out->size();
    out->resize(filled + (stop - block) * kWordsPerBlock);
    WordBits* const room = out->data();
    for (; block < stop; ++block) {
      uint64_t words[kWordsPerBlock];
      uint64_t any = 0;
      for (uint64_t j = 0; j < kWordsPerBlock; ++j) any |= words[j] = LoadRelaxed(block * kWordsPerBlock + j);
      if (any == 0) continue;
      for (uint64_t j = 0; j < kWordsPerBlock; ++j) {
        room[filled] = {block * kWordsPerBlock + j, words[j]};
        filled += words[j] != 0;
      }
    }
    out->resize(filled);
  }
}

uint64_t BlockedFilter::RangeCount(uint64_t blocks_per_range) const {
  assert(blocks_per_range > 0);
  return (shape_.blocks + blocks_per_range - 1) / blocks_per_range;
}

// A sum of per-word mixes of (index, word) over the non-zero words: order-free,
// cheap on sparse ranges, and any change to one word changes the sum unless two
// 64-bit mixes collide.
uint64_t BlockedFilter::EmptyRangeSummary(uint64_t range, uint64_t blocks_per_range) const {
  assert(blocks_per_range > 0 && range < RangeCount(blocks_per_range));
  const uint64_t begin = range * blocks_per_range * kWordsPerBlock;
  const uint64_t end = std::min(shape_.blocks, (range + 1) * blocks_per_range) * kWordsPerBlock;
  return Fmix64(0 ^ (end - begin));  // RangeSummary's with no word to add
}

uint64_t BlockedFilter::RangeSummary(uint64_t range, uint64_t blocks_per_range) const {
  assert(blocks_per_range > 0 && range < RangeCount(blocks_per_range));
  const uint64_t begin = range * blocks_per_range * kWordsPerBlock;
  const uint64_t end = std::min(shape_.blocks, (range + 1) * blocks_per_range) * kWordsPerBlock;
  // A word's term is Fmix64 of its bits XOR its index times an odd constant
  // (a bijection of the index, as the Fmix64 of it this replaced): one mix per
  // word instead of two took RangeSummaries from 6.1x to 4.3x the time of a
  // plain sum of as many bytes (bench_scan, 12 MB at 12.5% fill). During a
  // big repair every exchange summarizes every range again: it was 9.5% of
  // pollend's CPU in jepsen heal-under-load (perf).
  constexpr uint64_t kIndexMix = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, odd
  uint64_t sum = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const uint64_t bits = LoadRelaxed(i);
    if (bits != 0) sum += Fmix64(bits ^ ((i + 1) * kIndexMix));
  }
  return Fmix64(sum ^ (end - begin));
}

std::vector<uint64_t> BlockedFilter::RangeSummaries(uint64_t blocks_per_range) const {
  std::vector<uint64_t> out(RangeCount(blocks_per_range));
  for (uint64_t r = 0; r < out.size(); ++r) out[r] = RangeSummary(r, blocks_per_range);
  return out;
}

namespace {

// The set bits of words[0, count), each read relaxed (client threads may be
// setting bits meanwhile). Skips the zero words that dominate a filter below
// capacity.
inline uint64_t SumBitsPortable(const uint64_t* words, uint64_t count) {
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t v = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
    if (v != 0) total += Popcount64(v);
  }
  return total;
}

// The same with the POPCNT instruction (every x86-64 CPU since 2008), which
// the baseline build may not assume. /metrics counts every generation's bits
// on each scrape: jepsen heal-under-load polls every 0.25 s, and the count
// was 6% of pollend's CPU while a healed partition's 12 MB filters were
// repaired (perf), SWAR-counted. 4.3x -> 1.6x the time of a plain sum of as
// many bytes (bench_scan).
__attribute__((target("popcnt"))) uint64_t SumBitsPopcnt(const uint64_t* words, uint64_t count) {
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) total += static_cast<uint64_t>(__builtin_popcountll(__atomic_load_n(&words[i], __ATOMIC_RELAXED)));
  return total;
}

uint64_t SumBits(const uint64_t* words, uint64_t count) {
  static const bool popcnt = CpuPathsAllowed() && __builtin_cpu_supports("popcnt");
  return popcnt ? SumBitsPopcnt(words, count) : SumBitsPortable(words, count);
}

uint64_t LoadLittleEndian64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

// Faults in the pages under words [first, first + count) for writing, in one
// call. Recovery ORs a snapshot into a fresh filter; word by word, each page
// took two faults there, a read fault that maps the shared zero page (Merge
// loads a word before it ORs) and a copy-on-write fault that replaces it, with
// a TLB flush between (perf of a 4 GiB restart: do_wp_page under Merge, 44% of
// its CPU with the zeroing it does). Failure (an old kernel) only loses speed.
void PopulateForWriting(uint64_t* words, uint64_t first, uint64_t count) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(words + first) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(words + first + count);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older kernels answer EINVAL
#endif

void BlockedFilter::AdviseHugePages(bool on) const {
  if (mapped_bytes_ < kHugePage || GetHugePages() != HugePages::kAdvise) return;
  (void)madvise(words_, mapped_bytes_, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

void BlockedFilter::CollapseHugePages(uint64_t first, uint64_t count) const {
  assert(first <= word_count() && count <= word_count() - first);
  if (mapped_bytes_ < kHugePage || GetHugePages() != HugePages::kAdvise) return;
  // Whole 2 MiB pages inside the range (words_ is 2 MiB aligned or not:
  // the kernel collapses what is aligned and answers EINVAL for the rest).
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(words_ + first) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(words_ + first + count) & ~(kHugePage - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLLAPSE);
}

void BlockedFilter::ClearAll() {
  // Anonymous private memory reads back as zeros after MADV_DONTNEED (and
  // goes back to the kernel); memset where that is refused.
  if (madvise(words_, mapped_bytes_, MADV_DONTNEED) != 0) std::memset(words_, 0, mapped_bytes_);
  if (madvise(dirty_, dirty_mapped_bytes_, MADV_DONTNEED) != 0) std::memset(dirty_, 0, dirty_mapped_bytes_);
}

void BlockedFilter::Populate(uint64_t first, uint64_t count) const {
  assert(first <= word_count() && count <= word_count() - first);
  if (count == 0) return;
  PopulateForWriting(words_, first, count);
  static const uint64_t page_words = static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 8;
  uint64_t sum = 0;
  for (uint64_t i = first; i < first + count; i += page_words) sum += LoadRelaxed(i);  // count / page_words loads
  [[maybe_unused]] volatile uint64_t keep = sum;  // the loads are the point
}

uint64_t BlockedFilter::StoreLittleEndianWordsIntoEmpty(uint64_t first, std::string_view bytes) {
  assert(bytes.size() % 8 == 0);
  const uint64_t count = bytes.size() / 8;
  assert(first <= word_count() && count <= word_count() - first);
  PopulateForWriting(words_, first, count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t bits = LoadLittleEndian64(bytes.data() + 8 * i);
    if (bits == 0) continue;
    std::atomic_ref<uint64_t> word = Word(words_, first + i);
    assert(word.load(std::memory_order_relaxed) == 0);
    word.store(word.load(std::memory_order_relaxed) | bits, std::memory_order_relaxed);
  }
  return SumBits(words_ + first, count);
}

uint64_t BlockedFilter::OrLittleEndianWords(uint64_t first, std::string_view bytes) {
  assert(bytes.size() % 8 == 0);
  const uint64_t count = bytes.size() / 8;
  assert(first <= word_count() && count <= word_count() - first);
  bool any = false;
  for (uint64_t i = 0; i < count && !any; ++i) any = LoadLittleEndian64(bytes.data() + 8 * i) != 0;
  if (!any) return SumBits(words_ + first, count);
  PopulateForWriting(words_, first, count);
  {
    DirtyBatch dirty([this](std::span<const uint64_t> blocks) { MarkDirty(blocks); });
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t bits = LoadLittleEndian64(bytes.data() + 8 * i);
      if (bits == 0) continue;
      std::atomic_ref<uint64_t> word = Word(words_, first + i);
      if ((word.load(std::memory_order_relaxed) & bits) == bits) continue;
      if ((bits & ~word.fetch_or(bits, kSetOrder)) != 0) dirty.Add((first + i) / kWordsPerBlock);
    }
  }
  return SumBits(words_ + first, count);
}

uint64_t BlockedFilter::CountSetBits() const { return SumBits(words_, word_count()); }

double BlockedFilter::FillRatio() const {
  return static_cast<double>(CountSetBits()) / static_cast<double>(shape_.bits());
}

bool BlockedFilter::SameContents(const BlockedFilter& other) const {
  if (other.shape_ != shape_) return false;
  for (uint64_t i = 0; i < word_count(); ++i) {
    if (LoadRelaxed(i) != other.LoadRelaxed(i)) return false;
  }
  return true;
}

}  // namespace pollen::crdt
