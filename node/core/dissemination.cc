#include "node/core/dissemination.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <utility>

#include "crdt/popcount.h"
#include "crdt/sizing.h"
#include "node/core/recycle_buffer.h"
#include "protocol/delta_codec.h"

namespace pollen::node {

void PendingAdds::Push(uint64_t filter_uid, uint64_t slot, std::span<const crdt::AddResult> results) {
  size_t n = 0;
  uint64_t bits = 0;
  for (const crdt::AddResult& r : results) {
    r.ForEachNewWord([&](uint64_t, uint64_t word_bits) {
      ++n;
      bits += crdt::Popcount64(word_bits);
    });
  }
  if (n == 0) return;
  std::lock_guard lock(mu_);
  if (entries_.size() + n > max_words_) {
    dropped_.words += n;
    if (dropped_.untracked) return;
    auto it = std::find_if(dropped_.by_generation.begin(), dropped_.by_generation.end(),
                           [&](const Dropped& d) { return d.filter_uid == filter_uid && d.slot == slot; });
    if (it != dropped_.by_generation.end()) {
      it->words += n;
      it->bits += bits;
    } else if (dropped_.by_generation.size() < kMaxDroppedGenerations) {
      dropped_.by_generation.push_back({filter_uid, slot, n, bits});
    } else {
      dropped_.untracked = true;
      dropped_.by_generation.clear();
    }
    return;
  }
  for (const crdt::AddResult& r : results) {
    r.ForEachNewWord([&](uint64_t index, uint64_t bits) { entries_.push_back({filter_uid, slot, {index, bits}}); });
  }
}

void PendingAdds::Drain(std::vector<Entry>* out, DropReport* dropped) {
  RecycleBuffer(*out);  // outside the lock: it may free
  std::lock_guard lock(mu_);
  out->swap(entries_);
  *dropped = std::exchange(dropped_, DropReport{});
}

bool DeltaBuffer::Add(const std::string& filter, uint64_t filter_uid, uint64_t slot,
                      std::span<const crdt::WordBits> words) {
  if (words.empty()) return true;
  if (total_ + words.size() > max_words_) {
    buffers_.clear();
    total_ = 0;
    return false;
  }
  Bits& bits = buffers_[Key(filter, slot)];
  if (bits.filter_uid != filter_uid) {  // the filter was replaced: old bits are void
    total_ -= bits.words.size();
    bits.words.clear();
    bits.filter_uid = filter_uid;
  }
  bits.words.insert(bits.words.end(), words.begin(), words.end());
  total_ += words.size();
  return true;
}

std::map<DeltaBuffer::Key, DeltaBuffer::Bits> DeltaBuffer::Take() {
  std::map<Key, Bits> out;
  out.swap(buffers_);
  total_ = 0;
  for (auto& [key, bits] : out) crdt::Canonicalize(bits.words);
  return out;
}

void UnionCanonical(std::vector<crdt::WordBits>& into, std::span<const crdt::WordBits> batch,
                    std::vector<crdt::WordBits>& scratch) {
  if (batch.empty()) return;
  if (into.empty() || into.back().index < batch.front().index) {  // disjoint and after: append
    into.insert(into.end(), batch.begin(), batch.end());
    return;
  }
  scratch.clear();
  scratch.reserve(into.size() + batch.size());
  size_t a = 0, b = 0;
  while (a < into.size() && b < batch.size()) {
    assert(batch[b].bits != 0 && (b == 0 || batch[b - 1].index < batch[b].index));
    if (into[a].index < batch[b].index) {
      scratch.push_back(into[a++]);
    } else if (batch[b].index < into[a].index) {
      scratch.push_back(batch[b++]);
    } else {
      scratch.push_back(crdt::WordBits{into[a].index, into[a].bits | batch[b].bits});
      ++a;
      ++b;
    }
  }
  scratch.insert(scratch.end(), into.begin() + static_cast<std::ptrdiff_t>(a), into.end());
  scratch.insert(scratch.end(), batch.begin() + static_cast<std::ptrdiff_t>(b), batch.end());
  into.swap(scratch);
}

namespace {

// A set goes as a bitmap of its words (protocol::EncodeWordsAsBitmap, a
// copy) when that is at most kBitmapCostRatio times the entropy bound of its
// positions: from 11% fill of the words' span up to 89%. Sparser (and
// fuller) sets, a push of a few keys among them, are position-coded. Coding
// every position was ~60% of pollend's CPU while anti-entropy and the tree
// spread a partition's 10^6 keys after a heal (perf; simulation/README.md,
// "Speed, idle ticks and big heals"), and a LAN carries twice the bytes
// sooner than they are coded. At 3x (from 7% fill) pollen-sim's N=100,
// 20,000 adds/s row cost 1,282 bytes per key instead of 1,126; at 2x, 1,182.
// (Anti-entropy ranges pass their own ratio: anti_entropy.cc.)

// The bound in closed form, span_bits x H(count / span_bits), within
// O(log span_bits) bits of protocol::EntropyBoundBits, which sums a term per
// position and so costs what this choice exists to avoid.
bool BitmapIsCheapEnough(uint64_t span_bits, uint64_t count, double cost_ratio) {
  if (count == 0 || count >= span_bits) return false;
  const double f = static_cast<double>(count) / static_cast<double>(span_bits);
  const double bound_bits = static_cast<double>(span_bits) * -(f * std::log2(f) + (1 - f) * std::log2(1 - f));
  return static_cast<double>(span_bits) <= cost_ratio * bound_bits;
}

}  // namespace

std::string EncodeWords(std::span<const crdt::WordBits> words, uint64_t base_bit, uint64_t universe_bits,
                        double bitmap_cost_ratio) {
  if (!words.empty() && base_bit % 64 == 0) {
    const uint64_t span_words = words.back().index - words.front().index + 1;
    if (BitmapIsCheapEnough(64 * span_words, crdt::CountBits(words), bitmap_cost_ratio)) {
      std::vector<uint64_t> dense(span_words, 0);
      for (const crdt::WordBits& w : words) dense[w.index - words.front().index] = w.bits;
      return protocol::EncodeWordsAsBitmap(universe_bits, words.front().index - base_bit / 64, dense);
    }
  }
  // Kept from call to call, up to 2^20 positions (8 MiB): a fresh vector per
  // range, its pages faulted in each time, slowed a sender's catch-up legs
  // (perf, 512 MiB filter: 9% of its CPU in page faults).
  thread_local std::vector<uint64_t> positions;
  positions.clear();
  crdt::AppendBitPositions(words, base_bit, &positions);
  assert(positions.empty() || positions.back() < universe_bits);
  std::string out = protocol::EncodeBitPositions(universe_bits, positions);
  if (positions.capacity() > (size_t{1} << 20)) std::vector<uint64_t>().swap(positions);
  return out;
}

absl::StatusOr<std::vector<crdt::WordBits>> DecodeWords(std::string_view bytes, uint64_t base_bit,
                                                        uint64_t universe_bits, size_t max_positions,
                                                        uint64_t* bits) {
  std::vector<crdt::WordBits> words;
  if (absl::Status s = DecodeWordsInto(bytes, base_bit, universe_bits, max_positions, &words, bits); !s.ok()) return s;
  return words;
}

absl::Status DecodeWordsInto(std::string_view bytes, uint64_t base_bit, uint64_t universe_bits, size_t max_positions,
                             std::vector<crdt::WordBits>* out, uint64_t* bits) {
  // A bitmap (mode 2, or the empty set) straight into words; Rice (mode 1)
  // too, below; the dense mode through positions.
  if (base_bit % 64 == 0) {
    thread_local std::vector<uint64_t> span;
    uint64_t first_word = 0, count = 0;
    absl::StatusOr<bool> bitmap =
        protocol::DecodeBitmapToWords(universe_bits, bytes, max_positions, &span, &first_word, &count);
    if (!bitmap.ok()) return bitmap.status();
    if (*bitmap) {
      if (bits != nullptr) *bits = count;
      const uint64_t base_word = base_bit / 64 + first_word;
      for (size_t i = 0; i < span.size(); ++i) {
        if (span[i] != 0) out->push_back({base_word + i, span[i]});
      }
      if (span.capacity() > (size_t{1} << 16)) std::vector<uint64_t>().swap(span);
      return absl::OkStatus();
    }
  }
  // Rice codes straight into words too.
  uint64_t count = 0;
  absl::StatusOr<bool> rice = protocol::DecodeRiceToWords(universe_bits, bytes, max_positions, base_bit, out, &count);
  if (!rice.ok()) return rice.status();
  if (*rice) {
    if (bits != nullptr) *bits = count;
    return absl::OkStatus();
  }
  // The dense mode through positions. Per-thread scratch for them: no
  // allocation per frame; a rare huge decode does not keep its memory.
  thread_local std::vector<uint64_t> positions;
  struct Shrink {
    ~Shrink() {
      if (positions.capacity() > (size_t{1} << 16)) std::vector<uint64_t>().swap(positions);
    }
  } shrink;
  if (absl::Status s = protocol::DecodeBitPositionsInto(universe_bits, bytes, max_positions, &positions); !s.ok()) {
    return s;
  }
  if (bits != nullptr) *bits = positions.size();  // strictly ascending (codec-checked): distinct bits
  for (const crdt::WordBits& w : crdt::FromBitPositions(positions, base_bit)) out->push_back(w);  // codec-checked
  return absl::OkStatus();
}

}  // namespace pollen::node
