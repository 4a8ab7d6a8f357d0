// Fuzzes DecodeDelta against a small live set: arbitrary bytes must yield an
// error, or words that all lie inside live sub-filters and merge cleanly; the
// set's own delta after the merge must decode again (a fixed point). As in
// snapshot_decode.cc, an odd first byte overlays the input on a valid delta
// and re-seals it, so mutations reach the parser past the checksum. Each
// input gets a fresh set: a crash replays from the input alone.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/crdt/reseal.h"

#include "crdt/snapshot_delta.h"

namespace {

using namespace pollen::crdt;

ClusterSecret Secret() {
  ClusterSecret s;
  for (int i = 0; i < 32; ++i) s.bytes[i] = static_cast<uint8_t>(i * 11);
  return s;
}

std::unique_ptr<GenerationSet> SmallSet(const ClusterSecret& secret) {
  FilterParams p;
  p.name = "fuzz";
  p.filter_id = FilterIdForName(p.name);
  p.shape = {4, 3};
  p.generations = 2;
  p.key_id = KeyIdForSecret(secret);
  auto set = *GenerationSet::Create(p, secret, 1);
  if (!*set->Advance(2)) std::abort();
  return set;
}

std::vector<std::shared_ptr<const SubFilter>> Subs(const GenerationSet& set) {
  std::vector<std::shared_ptr<const SubFilter>> subs;
  for (uint64_t slot : set.slots()) subs.push_back(set.Sub(slot));
  return subs;
}

std::string DeltaOf(const GenerationSet& set) {
  std::string out;
  if (!StreamDelta(Subs(set), [&](std::string_view b) {
        out.append(b);
        return absl::OkStatus();
      }).ok()) {
    std::abort();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ClusterSecret secret = Secret();
  std::string input(reinterpret_cast<const char*>(data), size);
  auto set = SmallSet(secret);
  if (!input.empty() && (input[0] & 1)) {
    static const std::string base = [] {
      auto s = SmallSet(secret);
      for (int i = 0; i < 40; ++i) s->Add(std::to_string(i));
      return DeltaOf(*s);
    }();
    input = pollen::fuzz::OverlayAndReseal(input, base, 32, pollen::fuzz::SealBlake2b);
  }
  auto delta = DecodeDelta(input, *set);
  if (!delta.ok()) return 0;
  for (const auto& [slot, words] : *delta) {
    auto sub = set->Sub(slot);
    if (sub == nullptr) std::abort();
    for (const WordBits& w : words) {
      if (w.bits == 0 || w.index >= sub->filter->word_count()) std::abort();
    }
    if (!set->Merge(slot, words, nullptr).ok()) std::abort();
  }
  if (!DecodeDelta(DeltaOf(*set), *set).ok()) std::abort();
  return 0;
}
