// For fuzz targets of checksummed formats (snapshots, snapshot deltas): a
// mutated input would stop at the checksum, so this overlays the input on a
// valid encoding and seals it again, reaching the parser behind it.
#pragma once

#include <sodium.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace pollen::fuzz {

// A body followed by its trailer.
using Seal = std::function<std::string(std::string body)>;

// A snapshot delta's seal: BLAKE2b-256 of the body.
inline std::string SealBlake2b(std::string body) {
  std::string sum(32, '\0');
  crypto_generichash(reinterpret_cast<uint8_t*>(sum.data()), 32, reinterpret_cast<const uint8_t*>(body.data()),
                     body.size(), nullptr, 0);
  return body + sum;
}

// `valid` ends in a trailer of `trailer_bytes`. Byte pairs of `input` after its
// first byte each set one body byte (position, value); bit 1 of the first byte
// cuts the body to input[2] bytes. Returns seal(body).
inline std::string OverlayAndReseal(std::string_view input, const std::string& valid, size_t trailer_bytes,
                                    const Seal& seal) {
  std::string body = valid.substr(0, valid.size() - trailer_bytes);
  for (size_t i = 1; i < input.size() && i < body.size() * 2; i += 2) {
    body[static_cast<uint8_t>(input[i]) % body.size()] = i + 1 < input.size() ? input[i + 1] : 0;
  }
  if (input.size() > 2 && (input[0] & 2)) body.resize(static_cast<uint8_t>(input[2]) % (body.size() + 1));
  return seal(std::move(body));
}

}  // namespace pollen::fuzz
