// Dissemination buffers and the bit-set codec used on the wire.
//
// PendingAdds is the hand-off from client threads to the driver thread: a
// client Add appends the bits it newly set (crdt::AddResult) to one vector
// under a mutex held only for that copy; the driver swaps the vector out in
// Drain(). It is bounded: a push that would take the queue past `max_words`
// entries is dropped whole and counted (anti-entropy later repairs what
// dissemination missed).
//
// Why a mutex and not the lock-free stack of per-push batches it replaced:
// each push allocated on the client thread and the driver freed it, a
// cross-thread free that defeats glibc's per-thread cache, so every push took
// malloc's slow path. perf at redis-benchmark BF.ADD -P 16 -c 8 (one RESP
// thread): _int_malloc 9.3% + PendingAdds::Drain 6.6% of pollend's samples
// before; the appends reuse the vector's capacity and the critical section is
// a copy of a few 32-byte entries (~20 ns, uncontended with one RESP thread).
// DeltaBuffer (driver thread only) accumulates the bits to forward, per
// (filter, sub-filter slot): client adds drained from PendingAdds and the bits that
// merges newly set here, so each bit leaves a node at most once per gossip
// round. Also bounded: an overflow clears it (and is counted by the caller).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/blocked_filter.h"
#include "crdt/word_bits.h"

namespace pollen::node {

class PendingAdds {
 public:
  struct Entry {
    uint64_t filter_uid = 0;  // identifies one incarnation of a filter
    uint64_t slot = 0;  // crdt::SlotOf(epoch, layer)
    crdt::WordBits word;
  };
  explicit PendingAdds(size_t max_words) : max_words_(max_words) {}
  PendingAdds(const PendingAdds&) = delete;
  PendingAdds& operator=(const PendingAdds&) = delete;

  // What a push past the bound left out, per generation: the driver adds
  // `bits` to the generation's count of set bits and marks its summaries
  // stale, instead of scanning every filter again (two passes over 4 GiB on
  // the driver thread at web scale, seconds without answering probes).
  struct Dropped {
    uint64_t filter_uid = 0;
    uint64_t slot = 0;
    uint64_t words = 0;
    uint64_t bits = 0;  // newly set bits in those words
  };
  struct DropReport {
    uint64_t words = 0;  // all words dropped since the last Drain
    std::vector<Dropped> by_generation;
    // More than kMaxDroppedGenerations generations lost words: by_generation
    // is incomplete, and the driver must recount everything.
    bool untracked = false;
  };
  static constexpr size_t kMaxDroppedGenerations = 64;

  // Any thread. Queues the non-zero words of each result.
  void Push(uint64_t filter_uid, uint64_t slot, std::span<const crdt::AddResult> results);
  // The driver thread only. Replaces *out (the entries of the previous
  // Drain) with the pending entries in push order, and reports what was
  // dropped since the last Drain. The buffer *out held becomes the queue
  // that pushes fill next (RecycleBuffer): during a bulk load two buffers
  // take turns instead of a queue regrowing from empty every round.
  void Drain(std::vector<Entry>* out, DropReport* dropped);

 private:
  const size_t max_words_;
  std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_; at most max_words_
  DropReport dropped_;          // guarded by mu_
};

class DeltaBuffer {
 public:
  using Key = std::pair<std::string, uint64_t>;  // (filter name, sub-filter slot)
  struct Bits {
    uint64_t filter_uid = 0;
    std::vector<crdt::WordBits> words;  // not canonical until Take()
  };
  explicit DeltaBuffer(size_t max_words) : max_words_(max_words) {}

  // False (and the buffer is cleared) if the bound would be exceeded.
  bool Add(const std::string& filter, uint64_t filter_uid, uint64_t slot, std::span<const crdt::WordBits> words);
  // Everything buffered, each list canonical; leaves the buffer empty.
  std::map<Key, Bits> Take();
  size_t size() const { return total_; }

 private:
  const size_t max_words_;
  std::map<Key, Bits> buffers_;
  size_t total_ = 0;
};

// Bit sets on the wire: delta-codec bytes of positions relative to `base_bit`
// within a universe of `universe_bits` bits. `words` must be canonical and lie
// inside [base_bit, base_bit + universe_bits). A dense set goes as the codec's
// bitmap, copied from the words, where that costs at most `bitmap_cost_ratio`
// times the entropy bound of its positions: with kBitmapCostRatio, from 11% of
// its words' span set, even where Rice would be up to 2x smaller
// (dissemination.cc says why).
inline constexpr double kBitmapCostRatio = 2.0;
std::string EncodeWords(std::span<const crdt::WordBits> words, uint64_t base_bit, uint64_t universe_bits,
                        double bitmap_cost_ratio = kBitmapCostRatio);
// Validates (via the codec) and returns canonical words at absolute positions.
// `bits` (optional): set to the number of bits decoded, CountBits of the result
// (the codec's positions are distinct, so it is their count).
absl::StatusOr<std::vector<crdt::WordBits>> DecodeWords(std::string_view bytes, uint64_t base_bit,
                                                        uint64_t universe_bits, size_t max_positions,
                                                        uint64_t* bits = nullptr);
// The same, appended to *out (what it held stays, never folded into; on an
// error what was appended is unspecified). A joining node decodes a whole
// frame's ranges into one buffer it keeps from frame to frame.
absl::Status DecodeWordsInto(std::string_view bytes, uint64_t base_bit, uint64_t universe_bits, size_t max_positions,
                             std::vector<crdt::WordBits>* out, uint64_t* bits = nullptr);

// Merges the canonical word set `batch` (crdt::Canonicalize: ascending
// indices, no repeats, no zero words) into the canonical set `into`, which
// stays canonical: the same result as appending and calling Canonicalize, in
// one linear pass instead of a sort (gossip rounds union a few canonical
// batches per (filter, epoch); sorting them was ~2% of pollen-sim N=100).
// `scratch` is working space.
void UnionCanonical(std::vector<crdt::WordBits>& into, std::span<const crdt::WordBits> batch,
                    std::vector<crdt::WordBits>& scratch);

}  // namespace pollen::node
