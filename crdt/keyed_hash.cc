#include "crdt/keyed_hash.h"

#include <sodium.h>

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pollen::crdt {
namespace {

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static_assert(crypto_kdf_CONTEXTBYTES == 8);
static_assert(crypto_kdf_KEYBYTES == 32);
static_assert(crypto_shorthash_KEYBYTES == 16);
static_assert(crypto_shorthash_BYTES == 8);
constexpr char kFilterContext[crypto_kdf_CONTEXTBYTES + 1] = "PlnFiltr";
constexpr char kGenerationContext[crypto_kdf_CONTEXTBYTES + 1] = "PlnGener";
constexpr char kKeyIdLabel[] = "pollen key id v1";

}  // namespace

void EnsureSodiumInitialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) std::abort();  // no usable randomness: nothing is safe
  });
}

uint64_t FilterIdForName(std::string_view name) {
  EnsureSodiumInitialized();
  uint8_t out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const uint8_t*>(name.data()), name.size(), nullptr, 0);
  return LoadLe64(out);
}

uint64_t KeyIdForSecret(const ClusterSecret& secret) {
  EnsureSodiumInitialized();
  uint8_t out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const uint8_t*>(kKeyIdLabel), sizeof kKeyIdLabel - 1,
                     secret.bytes.data(), secret.bytes.size());
  return LoadLe64(out);
}

SipKey DeriveSipKey(const ClusterSecret& secret, uint64_t filter_id, uint64_t generation) {
  EnsureSodiumInitialized();
  uint8_t filter_key[crypto_kdf_KEYBYTES];
  SipKey key;
  crypto_kdf_derive_from_key(filter_key, sizeof filter_key, filter_id, kFilterContext, secret.bytes.data());
  crypto_kdf_derive_from_key(key.bytes.data(), key.bytes.size(), generation, kGenerationContext, filter_key);
  sodium_memzero(filter_key, sizeof filter_key);
  return key;
}

uint64_t SipHash24Sodium(const SipKey& key, std::string_view data) {
  uint8_t out[crypto_shorthash_BYTES];
  crypto_shorthash(out, reinterpret_cast<const uint8_t*>(data.data()), data.size(), key.bytes.data());
  return LoadLe64(out);
}

}  // namespace pollen::crdt
