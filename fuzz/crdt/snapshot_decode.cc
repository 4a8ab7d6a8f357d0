// Fuzzes DecodeSnapshot: arbitrary bytes must yield an error or a set whose
// re-encoding is byte-identical (so nothing is ever half-loaded; a file that
// leaves out generations of its window loads them empty, and only then may the
// re-encoding differ, by listing them). Because the
// checksum stops nearly every mutated input early, the first byte picks a mode
// that re-seals the mutated body with a valid checksum, reaching the parser.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/crdt/reseal.h"

#include "crdt/snapshot.h"

namespace {

pollen::crdt::ClusterSecret Secret() {
  pollen::crdt::ClusterSecret s;
  for (int i = 0; i < 32; ++i) s.bytes[i] = static_cast<uint8_t>(i * 7);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::crdt;
  static const ClusterSecret secret = Secret();
  std::string input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && (input[0] & 1)) {
    // Build a valid snapshot, overlay the input on it, and re-seal.
    static const std::string base = [] {
      FilterParams p;
      p.name = "fuzz";
      p.filter_id = FilterIdForName(p.name);
      p.shape = {2, 3};
      p.generations = 2;
      p.key_id = KeyIdForSecret(secret);
      auto set = *GenerationSet::Create(p, secret, 1);
      set->Add("x");
      return EncodeSnapshot(*set);
    }();
    // The body keeps the base's version (3, a CRC-32C trailer) unless the
    // overlay changed it: SealSnapshot seals by the version it finds, and
    // too short a body stays unsealed (the parser must refuse it anyway).
    input = pollen::fuzz::OverlayAndReseal(input, base, 4, [](std::string body) {
      return body.size() >= 16 ? SealSnapshot(std::move(body)) : body;
    });
  }
  auto set = DecodeSnapshot(input, secret, nullptr);
  if (!set.ok()) return 0;
  // The loaded state is the file's: its re-encoding is the input, except that
  // generations of the window the file leaves out load as empty ones (the same
  // bits), which the re-encoding lists; either way it is a fixed point.
  const std::string again = EncodeSnapshot(**set);
  auto reloaded = DecodeSnapshot(again, secret, nullptr);
  if (!reloaded.ok() || EncodeSnapshot(**reloaded) != again) std::abort();
  if (again.size() == input.size() && again != input) std::abort();
  return 0;
}
