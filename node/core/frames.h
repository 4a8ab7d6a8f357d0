// FrameCodec: turns Envelopes into sealed frames and back.
//
// Outgoing: the Envelope is serialized and sealed (protocol::Seal) under the
// keyring's primary key. Datagrams and stream frames use separate random
// per-boot sender ids (from the node's Rng) with their own counters, so a slow
// stream frame is never pushed out of the receiver's replay window by datagrams.
//
// Incoming: Open checks size, version, key and authenticity, then the replay
// window, then parses and checks the Envelope's protocol version (a bare tree
// push, with no version and no sender, is let through for the node to
// attribute by opened_sender()). Any failure
// yields a reason ("auth", "malformed", "oversize", "replay", "version",
// "unknown_key") and no parsed message. Only a frame that opened may advance
// the replay window; nothing else in the node changes on a rejected frame.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "crdt/keyed_hash.h"
#include "node/core/rng.h"
#include "node/core/types.h"
#include "protocol/seal.h"
#include "google/protobuf/arena.h"
#include "protocol/wire.pb.h"

namespace pollen::node {

inline constexpr uint32_t kWireVersion = 1;

class FrameCodec {
 public:
  FrameCodec(const crdt::ClusterSecret& secret, std::string label, Rng& rng);

  std::string Seal(std::string_view plaintext, Channel channel, protocol::SealForm form = protocol::SealForm::kFull);
  // Sealing overhead in bytes (header + AEAD tag), for datagram budgets.
  static constexpr size_t kOverhead = protocol::kFrameHeaderBytes + 16;

  struct Rejection {
    std::string reason;
    std::string message;
  };
  // On success the Envelope lives in this codec's arena: valid until the next
  // Open() (parsing reuses the arena's memory instead of a malloc per field).
  std::variant<const wire::Envelope*, Rejection> Open(std::string_view frame, size_t max_bytes);

  protocol::Keyring& keyring() { return keyring_; }
  const protocol::Keyring& keyring() const { return keyring_; }
  uint64_t datagram_sender() const { return senders_[0]; }
  // The seal sender id of the frame the last successful Open() returned.
  uint64_t opened_sender() const { return opened_.sender; }

 private:
  protocol::Keyring keyring_;
  std::string label_;
  protocol::ReplayWindow replay_;
  protocol::Opened opened_;  // reused decryption buffer (bounded, see frames.cc)
  std::unique_ptr<char[]> arena_block_;
  std::unique_ptr<google::protobuf::Arena> arena_;
  uint64_t senders_[2];
  uint64_t counters_[2] = {0, 0};
};

}  // namespace pollen::node
