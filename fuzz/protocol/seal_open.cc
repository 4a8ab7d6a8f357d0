// Fuzzes Open with a fixed keyring: arbitrary bytes, and (first byte odd)
// mutations of a valid sealed frame (bit 2 of the first byte: with the
// compact header). Whatever opens must carry the keyring's key id and re-seal
// to the exact same bytes, in the header form it came in (AEAD: nothing else
// can open).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "protocol/seal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::protocol;
  static const Keyring ring = [] {
    pollen::crdt::ClusterSecret secret;
    for (int i = 0; i < 32; ++i) secret.bytes[i] = static_cast<uint8_t>(i * 11 + 3);
    return Keyring(DeriveGossipKey(secret));
  }();
  std::string frame(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1)) {
    const SealForm form = (data[0] & 4) ? SealForm::kCompact : SealForm::kFull;
    std::string base = Seal(ring, "fuzz", 77, size, std::string(size % 300, 'p'), form);
    for (size_t i = 1; i + 1 < size; i += 2) base[data[i] % base.size()] ^= static_cast<char>(data[i + 1]);
    if (data[0] & 2) base.resize(data[0] % (base.size() + 1));
    frame = base;
  }
  const auto result = Open(ring, "fuzz", frame, 2048);
  if (const auto* opened = std::get_if<Opened>(&result)) {
    if (opened->key_id != ring.primary_id()) std::abort();
    const SealForm form = frame[0] == kCompactVersion ? SealForm::kCompact : SealForm::kFull;
    if (Seal(ring, "fuzz", opened->sender, opened->counter, opened->plaintext, form) != frame) std::abort();
  } else {
    const auto& err = std::get<OpenError>(result);
    if (err.reason == RejectReason::kReplay || err.message.empty()) std::abort();
  }
  return 0;
}
