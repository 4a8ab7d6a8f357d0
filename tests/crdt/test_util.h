// Helpers shared by the crdt tests: deterministic secrets and keys.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "crdt/keyed_hash.h"

namespace pollen::crdt::testing {

inline ClusterSecret SecretFromSeed(uint64_t seed) {
  std::mt19937_64 rng(seed);
  ClusterSecret s;
  for (auto& b : s.bytes) b = static_cast<uint8_t>(rng());
  return s;
}

// A random key of length 0..max_len (empty and 1-byte keys included).
inline std::string RandomKey(std::mt19937_64& rng, size_t max_len) {
  std::string key(rng() % (max_len + 1), '\0');
  for (char& c : key) c = static_cast<char>(rng());
  return key;
}

}  // namespace pollen::crdt::testing
