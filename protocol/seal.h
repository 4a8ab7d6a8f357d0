// Frame sealing: every datagram and stream frame is encrypted and authenticated.
//
// Frame = version u8 | key_id u64 | sender u64 | counter u64 | ciphertext+tag
// sealed with XChaCha20-Poly1305 (libsodium crypto_aead_xchacha20poly1305_ietf)
// under a gossip key that is derived from the cluster secret with its own KDF
// context (never the SipHash subkeys, never the secret itself). The header and
// the optional cluster label are associated data. `sender` is a random per-boot
// id and `counter` a per-sender sequence, together the nonce; the receiver's
// ReplayWindow rejects repeats and counters too far behind.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <array>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/keyed_hash.h"

namespace pollen::protocol {

inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 1 + 8 + 8 + 8;
inline constexpr size_t kMaxFrameBytes = 4 << 20;  // stream frames; datagrams are smaller

// Reasons a frame is refused, each counted by the node.
enum class RejectReason : uint8_t { kMalformed, kOversize, kVersion, kUnknownKey, kAuth, kReplay };
std::string_view RejectReasonName(RejectReason reason);  // "malformed", "oversize", ...

// The gossip key derived from the cluster secret (KDF context "PlnGossp").
std::array<uint8_t, 32> DeriveGossipKey(const crdt::ClusterSecret& secret);

// Keys by id (id = public fingerprint of the key). The primary seals; every
// installed key opens. Bounded: at most kMaxKeys keys.
class Keyring {
 public:
  static constexpr size_t kMaxKeys = 8;
  explicit Keyring(const std::array<uint8_t, 32>& primary);
  uint64_t Install(const std::array<uint8_t, 32>& key);  // returns its id; error-free if already there
  absl::Status Use(uint64_t key_id);                      // NotFound if not installed
  absl::Status Remove(uint64_t key_id);                   // FailedPrecondition for the primary
  uint64_t primary_id() const;
  std::vector<uint64_t> ids() const;                      // primary first, then ascending
  const std::array<uint8_t, 32>* Find(uint64_t key_id) const;
  static uint64_t IdOf(const std::array<uint8_t, 32>& key);
 private:
  std::map<uint64_t, std::array<uint8_t, 32>> keys_;
  uint64_t primary_ = 0;
};

// Per-sender sliding window over counters (like IPsec's anti-replay window).
class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;
  static constexpr size_t kMaxSenders = 4096;  // oldest sender forgotten beyond this
  // True if (sender, counter) is fresh; records it. Call only after the frame opened.
  bool Accept(uint64_t sender, uint64_t counter);
 private:
  struct State { uint64_t highest = 0; std::vector<uint64_t> bitmap; };
  std::map<uint64_t, State> senders_;
  std::deque<uint64_t> order_;
};

std::string Seal(const Keyring& keys, std::string_view label, uint64_t sender, uint64_t counter,
                 std::string_view plaintext);

struct Opened {
  uint64_t key_id = 0;
  uint64_t sender = 0;
  uint64_t counter = 0;
  std::string plaintext;
};
// Checks size, version and key, then authenticates and decrypts. Does not
// check replay (the caller does, with its ReplayWindow, after this succeeds).
struct OpenError { RejectReason reason; std::string message; };
std::variant<Opened, OpenError> Open(const Keyring& keys, std::string_view label, std::string_view frame,
                                     size_t max_bytes);

}  // namespace pollen::protocol
