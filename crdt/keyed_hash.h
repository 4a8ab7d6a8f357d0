// Keyed hashing: SipHash-2-4 (inlined, checked against libsodium's
// crypto_shorthash bit for bit) under per-filter,
// per-generation subkeys derived from the cluster secret.
//
// Derivation (libsodium crypto_kdf, BLAKE2b-based):
//   filter_key  = KDF(secret,     id = filter_id,  context "PlnFiltr", 32 bytes)
//   sip_key     = KDF(filter_key, id = generation, context "PlnGener", 16 bytes)
// so every generation of every filter hashes with its own key, and knowing one
// SipHash key reveals neither the secret nor another generation's key.
// The key id (a public fingerprint of the secret) lets peers check that they
// share a secret without revealing it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "crdt/siphash.h"

namespace pollen::crdt {

// 32 bytes of cluster secret. Never logged, sent or persisted by Pollen.
struct ClusterSecret {
  std::array<uint8_t, 32> bytes{};
};

struct SipKey {
  std::array<uint8_t, 16> bytes{};
  friend bool operator==(const SipKey&, const SipKey&) = default;
};

// Initializes libsodium once; safe to call from any thread, any number of times.
// Aborts if libsodium cannot initialize (no usable randomness source).
void EnsureSodiumInitialized();

// A stable 64-bit id for a filter name (BLAKE2b of the name, first 8 bytes LE):
// the identity a filter is created with. Its hash keys derive from the
// identity, not the name, so a copy, a renamed filter or a dump loaded under
// another name keeps its source's identity and its bits stay valid.
uint64_t FilterIdForName(std::string_view name);

// The identity the owner routing of node/core/routing.h derives its key from:
// no filter may carry it (ValidateParams), so no filter's bits reveal the
// routing hash.
inline constexpr uint64_t kRoutingKeyId = 0x726f757465000001ULL;

// Public fingerprint of the secret: BLAKE2b keyed by the secret over a fixed
// label, 8 bytes LE. Equal secrets give equal ids; it reveals nothing useful.
uint64_t KeyIdForSecret(const ClusterSecret& secret);

SipKey DeriveSipKey(const ClusterSecret& secret, uint64_t filter_id, uint64_t generation);

// SipHash-2-4 of `data` under `key`, as a little-endian uint64.
inline uint64_t SipHash24(const SipKey& key, std::string_view data) { return SipHasher(key.bytes.data())(data); }

// The same function computed by libsodium (crypto_shorthash): the reference
// for tests and the baseline for benchmarks.
uint64_t SipHash24Sodium(const SipKey& key, std::string_view data);

}  // namespace pollen::crdt
