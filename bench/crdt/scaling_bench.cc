// Test cost of a key in a grown scaling filter against one filter sized right
// from the start (issue 10: "<= 3x for non-members; member tests hit the
// newest layer first"). Both hold the same 10^7 keys at p = 1%:
//   - stack:  capacity 1000, expansion 2, grown by adds to 14 layers
//             (crdt/generations.h: layer L at 1000 * 2^L keys, p * 0.1 * 0.9^L);
//   - single: a fixed-size filter for 10^7 keys at 1%.
// Read every figure as a ratio to the single filter's in the same run:
//
//   bench_scaling --benchmark_min_time=0.5 --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//   (one command line)
//
// Members are drawn from the keys of the newest layer (most keys live there
// at expansion 2); non-members are never-added keys (every layer is probed).
// Keys are ~21 bytes; the Url forms test 64-byte non-members (crawl URLs),
// where SipHash is a larger share of a test. Batch forms go through
// MightContainMany (one SipHash per key, then one batch call per layer,
// prefetching 128 keys ahead); single forms through MightContain.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/generations.h"

namespace pollen::crdt {
namespace {

constexpr uint64_t kKeys = 10'000'000;
constexpr double kFpr = 0.01;
constexpr size_t kBatch = 1024;  // keys per MightContainMany call
constexpr size_t kProbeKeys = 1 << 20;

std::string Key(char prefix, uint64_t i) { return prefix + std::to_string(i * 0x9e3779b97f4a7c15ULL); }

struct Filters {
  std::unique_ptr<GenerationSet> stack, single;
  uint32_t layers = 0;
  std::vector<std::string> non_members, newest_members;
  std::vector<std::string> url_non_members;  // 64-byte keys, like crawl URLs
};

std::unique_ptr<GenerationSet> Make(uint64_t capacity, uint32_t expansion) {
  ClusterSecret secret;
  for (size_t i = 0; i < secret.bytes.size(); ++i) secret.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  absl::StatusOr<FilterParams> params = MakeParams("bench", capacity, kFpr, 1, secret, expansion);
  if (!params.ok()) std::abort();
  absl::StatusOr<std::unique_ptr<GenerationSet>> set = GenerationSet::Create(*params, secret, 0);
  if (!set.ok()) std::abort();
  return *std::move(set);
}

const Filters& Shared() {
  static const Filters* filters = [] {
    auto* f = new Filters;
    f->stack = Make(1000, 2);
    f->single = Make(kKeys, 0);
    std::vector<std::string> chunk;
    std::vector<std::string_view> views;
    std::vector<KeyAdd> out;
    for (uint64_t start = 0; start < kKeys; start += 65536) {
      chunk.clear();
      for (uint64_t i = start; i < std::min(kKeys, start + 65536); ++i) chunk.push_back(Key('m', i));
      views.assign(chunk.begin(), chunk.end());
      out.resize(views.size());
      f->stack->AddMany(views, out);
      f->single->AddMany(views, out);
    }
    f->layers = f->stack->layers(0);
    for (size_t i = 0; i < kProbeKeys; ++i) {
      f->non_members.push_back(Key('n', i));
      // Layers 0..12 hold 1000 * (2^13 - 1) = 8.19M keys: the last 1.5M are in layer 13.
      f->newest_members.push_back(Key('m', kKeys - 1 - (i % 1'500'000)));
    }
    for (size_t i = 0; i < kProbeKeys; ++i) {  // after the others, so no list's strings interleave
      std::string url = "https://crawl.example.org/section/page?id=" + Key('u', i);
      url.resize(64, '/');
      f->url_non_members.push_back(std::move(url));
    }
    return f;
  }();
  return *filters;
}

void Single(benchmark::State& state, const GenerationSet& set, const std::vector<std::string>& keys) {
  size_t i = 0, found = 0;
  for (auto _ : state) {
    found += set.MightContain(keys[i]);
    i = (i + 1) & (kProbeKeys - 1);
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void Batch(benchmark::State& state, const GenerationSet& set, const std::vector<std::string>& keys) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::unique_ptr<bool[]> out(new bool[kBatch]);
  size_t start = 0, found = 0;
  for (auto _ : state) {
    set.MightContainMany(std::span<const std::string_view>(views).subspan(start, kBatch),
                         std::span<bool>(out.get(), kBatch));
    found += out[0];
    start = (start + kBatch) & (kProbeKeys - 1);
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

void BM_NonMember_Single(benchmark::State& s) { Single(s, *Shared().single, Shared().non_members); }
void BM_NonMember_Stack(benchmark::State& s) {
  s.counters["layers"] = Shared().layers;
  Single(s, *Shared().stack, Shared().non_members);
}
void BM_NonMemberBatch_Single(benchmark::State& s) { Batch(s, *Shared().single, Shared().non_members); }
void BM_NonMemberBatch_Stack(benchmark::State& s) { Batch(s, *Shared().stack, Shared().non_members); }
void BM_UrlNonMemberBatch_Single(benchmark::State& s) { Batch(s, *Shared().single, Shared().url_non_members); }
void BM_UrlNonMemberBatch_Stack(benchmark::State& s) { Batch(s, *Shared().stack, Shared().url_non_members); }
void BM_Member_Single(benchmark::State& s) { Single(s, *Shared().single, Shared().newest_members); }
void BM_MemberNewest_Stack(benchmark::State& s) { Single(s, *Shared().stack, Shared().newest_members); }
void BM_MemberBatch_Single(benchmark::State& s) { Batch(s, *Shared().single, Shared().newest_members); }
void BM_MemberNewestBatch_Stack(benchmark::State& s) { Batch(s, *Shared().stack, Shared().newest_members); }

BENCHMARK(BM_NonMember_Single);
BENCHMARK(BM_NonMember_Stack);
BENCHMARK(BM_NonMemberBatch_Single);
BENCHMARK(BM_NonMemberBatch_Stack);
BENCHMARK(BM_UrlNonMemberBatch_Single);
BENCHMARK(BM_UrlNonMemberBatch_Stack);
BENCHMARK(BM_Member_Single);
BENCHMARK(BM_MemberNewest_Stack);
BENCHMARK(BM_MemberBatch_Single);
BENCHMARK(BM_MemberNewestBatch_Stack);

}  // namespace
}  // namespace pollen::crdt

BENCHMARK_MAIN();
