// Whole-filter scans: the bit count (/metrics, BF.INFO) and the anti-entropy
// range summaries, each read as a ratio to BM_ScanFloor in the same run (a
// plain sum of as many bytes: memory bandwidth and the loop, nothing else).
//
//   bench_scan --benchmark_min_time=0.5
//
// The filter is the jepsen heal-under-load one (capacity 5,000,000 at 0.01%:
// ~12 MB, 187,000 blocks), 12.5% of its bits set, as after a healed partition.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "crdt/blocked_filter.h"
#include "crdt/sizing.h"

namespace pollen::crdt {
namespace {

constexpr uint64_t kBlocks = 187'000;
constexpr uint64_t kBlocksPerRange = (kBlocks + 1023) / 1024;  // anti-entropy's 1,024 ranges

const BlockedFilter& Filled() {
  static std::unique_ptr<BlockedFilter> filter = [] {
    FilterShape shape;
    shape.blocks = kBlocks;
    shape.k = 13;
    std::unique_ptr<BlockedFilter> f = *BlockedFilter::Create(shape);
    std::vector<WordBits> words;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (uint64_t i = 0; i < f->word_count(); ++i) {
      uint64_t bits = ~uint64_t{0};
      for (int j = 0; j < 3; ++j) {  // the AND of three random words: 1/8 of the bits set
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        bits &= x;
      }
      if (bits != 0) words.push_back({i, bits});
    }
    if (!f->Merge(words, nullptr).ok()) std::abort();
    return f;
  }();
  return *filter;
}

// The same number of bytes summed from a plain array (the filter's words are
// read through atomics, out of line for a caller outside its file).
void BM_ScanFloor(benchmark::State& state) {
  static const std::vector<uint64_t> plain(kBlocks * kWordsPerBlock, 0x5a5a5a5a5a5a5a5aULL);
  for (auto _ : state) {
    uint64_t sum = 0;
    for (uint64_t w : plain) sum += w;
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * plain.size() * 8);
}
BENCHMARK(BM_ScanFloor)->Unit(benchmark::kMillisecond);

void BM_CountSetBits(benchmark::State& state) {
  const BlockedFilter& f = Filled();
  for (auto _ : state) benchmark::DoNotOptimize(f.CountSetBits());
  state.SetBytesProcessed(state.iterations() * f.word_count() * 8);
  state.counters["fill"] = static_cast<double>(f.CountSetBits()) / static_cast<double>(f.word_count() * 64);
}
BENCHMARK(BM_CountSetBits)->Unit(benchmark::kMillisecond);

void BM_RangeSummaries(benchmark::State& state) {
  const BlockedFilter& f = Filled();
  for (auto _ : state) benchmark::DoNotOptimize(f.RangeSummaries(kBlocksPerRange));
  state.SetBytesProcessed(state.iterations() * f.word_count() * 8);
}
BENCHMARK(BM_RangeSummaries)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pollen::crdt

BENCHMARK_MAIN();
