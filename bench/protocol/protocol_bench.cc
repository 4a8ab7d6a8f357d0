// Protocol benchmarks: delta codec throughput and size against the entropy
// bound log2(C(m, b)) (counter "ratio", deterministic: fixed seed), and
// seal/open throughput for 1200-byte datagrams.
//
//   bench_protocol --benchmark_counters_tabular=true
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "benchmark/benchmark.h"
#include "protocol/delta_codec.h"
#include "protocol/seal.h"

namespace pollen::protocol {
namespace {

constexpr uint64_t kUniverse = uint64_t{1} << 26;

std::vector<uint64_t> RandomPositions(uint64_t m, uint64_t b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<uint64_t> s;
  while (s.size() < b) s.insert(rng() % m);
  return {s.begin(), s.end()};
}

void SetSizeCounters(benchmark::State& state, uint64_t b, size_t encoded_bytes) {
  const double bound = EntropyBoundBits(kUniverse, b);
  state.counters["bytes"] = static_cast<double>(encoded_bytes);
  state.counters["bits_per_bit"] = 8.0 * encoded_bytes / b;
  state.counters["bound_per_bit"] = bound / b;
  state.counters["ratio"] = 8.0 * encoded_bytes / bound;
}

void BM_DeltaEncode(benchmark::State& state) {
  const uint64_t b = state.range(0);
  const auto pos = RandomPositions(kUniverse, b, 42 + b);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string enc = EncodeBitPositions(kUniverse, pos);
    bytes = enc.size();
    benchmark::DoNotOptimize(enc);
  }
  state.SetItemsProcessed(state.iterations() * b);
  SetSizeCounters(state, b, bytes);
}

void BM_DeltaDecode(benchmark::State& state) {
  const uint64_t b = state.range(0);
  const auto pos = RandomPositions(kUniverse, b, 42 + b);
  const std::string enc = EncodeBitPositions(kUniverse, pos);
  for (auto _ : state) {
    auto dec = DecodeBitPositions(kUniverse, enc, b);
    if (!dec.ok() || dec->size() != b) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(dec);
  }
  state.SetItemsProcessed(state.iterations() * b);
  SetSizeCounters(state, b, enc.size());
}

void DeltaArgs(benchmark::internal::Benchmark* bench) {
  for (int64_t b : {100, 300, 1000, 3000, 10000, 30000, 100000}) bench->Arg(b);
}
BENCHMARK(BM_DeltaEncode)->Apply(DeltaArgs);
BENCHMARK(BM_DeltaDecode)->Apply(DeltaArgs);

Keyring BenchRing() {
  crdt::ClusterSecret secret;
  for (int i = 0; i < 32; ++i) secret.bytes[i] = static_cast<uint8_t>(i + 1);
  return Keyring(DeriveGossipKey(secret));
}

constexpr size_t kDatagram = 1200;

// A joining node's catch-up: one anti-entropy range of a big filter (1 MiB,
// 2^23 bits) at 1.5% fill, Rice coded, decoded into words as
// HandleSyncRanges does (the words' buffer kept between calls).
constexpr uint64_t kRangeBits = uint64_t{1} << 23;
constexpr uint64_t kRangeSetBits = 125000;

void BM_RangeRiceEncode(benchmark::State& state) {
  const auto pos = RandomPositions(kRangeBits, kRangeSetBits, 7);
  for (auto _ : state) {
    std::string enc = EncodeBitPositions(kRangeBits, pos);
    benchmark::DoNotOptimize(enc);
  }
  state.SetItemsProcessed(state.iterations() * kRangeSetBits);
}
BENCHMARK(BM_RangeRiceEncode);

void BM_RangeRiceToWords(benchmark::State& state) {
  const auto pos = RandomPositions(kRangeBits, kRangeSetBits, 7);
  const std::string enc = EncodeBitPositions(kRangeBits, pos);
  std::vector<crdt::WordBits> words;
  for (auto _ : state) {
    words.clear();
    uint64_t count = 0;
    absl::StatusOr<bool> rice = DecodeRiceToWords(kRangeBits, enc, kRangeSetBits, 0, &words, &count);
    if (!rice.ok() || !*rice || count != kRangeSetBits) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(words.data());
  }
  state.SetItemsProcessed(state.iterations() * kRangeSetBits);
}
BENCHMARK(BM_RangeRiceToWords);

void BM_Seal1200(benchmark::State& state) {
  const Keyring ring = BenchRing();
  const std::string plain(kDatagram - kSealOverheadBytes, 'x');
  uint64_t counter = 0;
  for (auto _ : state) {
    std::string frame = Seal(ring, "bench", 7, ++counter, plain);
    benchmark::DoNotOptimize(frame);
  }
  state.SetBytesProcessed(state.iterations() * kDatagram);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Seal1200);

void BM_Open1200(benchmark::State& state) {
  const Keyring ring = BenchRing();
  const std::string frame = Seal(ring, "bench", 7, 1, std::string(kDatagram - kSealOverheadBytes, 'x'));
  for (auto _ : state) {
    auto opened = Open(ring, "bench", frame, kDatagram);
    if (!std::holds_alternative<Opened>(opened)) state.SkipWithError("open failed");
    benchmark::DoNotOptimize(opened);
  }
  state.SetBytesProcessed(state.iterations() * kDatagram);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Open1200);

void BM_OpenTampered1200(benchmark::State& state) {  // cost of refusing a forged datagram
  const Keyring ring = BenchRing();
  std::string frame = Seal(ring, "bench", 7, 1, std::string(kDatagram - kSealOverheadBytes, 'x'));
  frame[600] ^= 1;
  for (auto _ : state) {
    auto opened = Open(ring, "bench", frame, kDatagram);
    benchmark::DoNotOptimize(opened);
  }
  state.SetBytesProcessed(state.iterations() * kDatagram);
}
BENCHMARK(BM_OpenTampered1200);

}  // namespace
}  // namespace pollen::protocol

BENCHMARK_MAIN();
