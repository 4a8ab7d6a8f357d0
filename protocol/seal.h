// Frame sealing: every datagram and stream frame is encrypted and authenticated.
//
// Frame layout (all integers little-endian):
//   offset  0  version   u8     kProtocolVersion
//   offset  1  key_id    u64    Keyring::IdOf(key) of the sealing key
//   offset  9  sender    u64    random per-boot id of the sending node
//   offset 17  counter   u64    per-sender sequence number, never reused
//   offset 25  ciphertext (same length as the plaintext) followed by a 16-byte tag
// The compact layout (SealForm::kCompact; tree frames to a neighbour that
// advertises it, node/core/catalog.h, and membership datagrams to a member
// that announced compact frames, node/core/membership.h) says the same in
// 11-20 bytes instead of 25 (a one-key tree push is ~77 bytes sealed):
//   offset  0  version   u8     kCompactVersion
//   offset  1  key_hint  u8     the low byte of the sealing key's id
//   offset  2  sender    u64
//   offset 10  counter   LEB128, 1-10 bytes, minimal (per-boot counters
//                        start at 1: 3 bytes up to 2^21 frames)
//   then the ciphertext and tag as above.
// Open tries every installed key whose id ends in the hint (at most
// Keyring::kMaxKeys tries), and the nonce and associated data are built the
// same way from the compact header.
//
// AEAD: XChaCha20-Poly1305 (libsodium crypto_aead_xchacha20poly1305_ietf)
// under a gossip key derived from the cluster secret with its own KDF context
// "PlnGossp" (never the SipHash subkeys, never the secret itself).
// Associated data = the 25 header bytes followed by the optional cluster label,
// so a frame opens only under the same header and the same label.
// Nonce (24 bytes) = sender (8 bytes LE) | counter (8 bytes LE) | 8 zero bytes.
// A (sender, counter) pair therefore must never be sealed twice under one key:
// senders pick a random 64-bit id per boot and count up from there.
//
// Open() refuses, in order: too short or too long (kMalformed, kOversize), an
// unknown version (kVersion), a truncated or non-minimal compact header
// (kMalformed), a key id not in the keyring (kUnknownKey), a failed
// authentication (kAuth). Replay is the caller's check after Open():
// ReplayWindow::Accept() (kReplay). Nothing is allocated from a length the
// frame claims: the only allocation is the plaintext, sized from the actual
// frame length, after the size check.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "crdt/keyed_hash.h"
#include "protocol/replay_window.h"

namespace pollen::protocol {

inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr uint8_t kCompactVersion = 2;
inline constexpr size_t kFrameHeaderBytes = 1 + 8 + 8 + 8;  // the longest header (compact: at most 1 + 1 + 8 + 10)
inline constexpr size_t kSealTagBytes = 16;
inline constexpr size_t kSealOverheadBytes = kFrameHeaderBytes + kSealTagBytes;  // sealed = plaintext + this
inline constexpr size_t kMaxFrameBytes = 4 << 20;  // stream frames; datagrams are smaller
inline constexpr size_t kMaxLabelBytes = 256;       // cluster label; Seal() aborts on a longer one

using GossipKey = std::array<uint8_t, 32>;

// Reasons a frame is refused, each counted by the node.
enum class RejectReason : uint8_t { kMalformed, kOversize, kVersion, kUnknownKey, kAuth, kReplay };
inline constexpr size_t kRejectReasonCount = 6;
// "malformed", "oversize", "version", "unknown_key", "auth", "replay".
std::string_view RejectReasonName(RejectReason reason);

// The gossip key derived from the cluster secret (crypto_kdf, subkey id 1,
// context "PlnGossp"). Deterministic: equal secrets give equal keys.
GossipKey DeriveGossipKey(const crdt::ClusterSecret& secret);

// Keys by id (id = public fingerprint of the key, see IdOf). The primary
// seals; every installed key opens. Bounded: at most kMaxKeys keys. The
// primary can never be removed, so the ring is never empty. Key bytes are
// wiped when the ring is destroyed or a key is removed.
class Keyring {
 public:
  static constexpr size_t kMaxKeys = 8;
  explicit Keyring(const GossipKey& primary);
  ~Keyring();
  Keyring(const Keyring&) = default;
  Keyring& operator=(const Keyring&) = default;

  // Returns the key's id. Installing a key that is already there is a no-op
  // returning its id. ResourceExhausted when kMaxKeys keys are installed.
  absl::StatusOr<uint64_t> Install(const GossipKey& key);
  absl::Status Use(uint64_t key_id);     // NotFound if not installed
  absl::Status Remove(uint64_t key_id);  // FailedPrecondition for the primary, NotFound if absent
  uint64_t primary_id() const { return primary_; }
  std::vector<uint64_t> ids() const;     // primary first, then ascending
  // The ids whose low byte is `hint` (a compact header's key hint) into
  // `out`, ascending; returns how many. No allocation.
  size_t IdsWithHint(uint8_t hint, std::array<uint64_t, kMaxKeys>* out) const;
  size_t size() const { return keys_.size(); }
  const GossipKey* Find(uint64_t key_id) const;  // nullptr if not installed
  // BLAKE2b keyed by the key over a fixed label, first 8 bytes LE. Reveals
  // nothing about the key; equal keys give equal ids.
  static uint64_t IdOf(const GossipKey& key);

 private:
  std::map<uint64_t, GossipKey> keys_;
  uint64_t primary_ = 0;
};

enum class SealForm : uint8_t { kFull, kCompact };
// Seals `plaintext` under the keyring's primary key. The result is
// plaintext.size() + kSealOverheadBytes long (kFull), or up to that (kCompact).
std::string Seal(const Keyring& keys, std::string_view label, uint64_t sender, uint64_t counter,
                 std::string_view plaintext, SealForm form = SealForm::kFull);

struct Opened {
  uint64_t key_id = 0;
  uint64_t sender = 0;
  uint64_t counter = 0;
  std::string plaintext;
};
struct OpenError {
  RejectReason reason;
  std::string message;  // "<reason name>: <detail>", e.g. "auth: frame failed authentication"
};
// Checks size, version and key, then authenticates and decrypts. Does not
// check replay (the caller does, with its ReplayWindow, after this succeeds).
// Frames longer than min(max_bytes, kMaxFrameBytes) are kOversize.
std::variant<Opened, OpenError> Open(const Keyring& keys, std::string_view label, std::string_view frame,
                                     size_t max_bytes);
// The same into `out`, reusing its plaintext buffer (no allocation per frame
// once it is large enough). On error `out` holds no valid plaintext.
std::optional<OpenError> OpenInto(const Keyring& keys, std::string_view label, std::string_view frame,
                                  size_t max_bytes, Opened* out);

}  // namespace pollen::protocol
