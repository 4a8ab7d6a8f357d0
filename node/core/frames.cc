#include "node/core/frames.h"

#include "absl/strings/str_cat.h"

namespace pollen::node {

FrameCodec::FrameCodec(const crdt::ClusterSecret& secret, std::string label, Rng& rng)
    : keyring_(protocol::DeriveGossipKey(secret)), label_(std::move(label)) {
  senders_[0] = rng.Next();
  senders_[1] = rng.Next();
  if (senders_[1] == senders_[0]) senders_[1] ^= 1;
}

std::string FrameCodec::Seal(std::string_view plaintext, Channel channel) {
  const int c = channel == Channel::kDatagram ? 0 : 1;
  return protocol::Seal(keyring_, label_, senders_[c], ++counters_[c], plaintext);
}

std::variant<wire::Envelope, FrameCodec::Rejection> FrameCodec::Open(std::string_view frame, size_t max_bytes) {
  auto opened = protocol::Open(keyring_, label_, frame, max_bytes);
  if (auto* err = std::get_if<protocol::OpenError>(&opened)) {
    return Rejection{std::string(protocol::RejectReasonName(err->reason)), err->message};
  }
  protocol::Opened& ok = std::get<protocol::Opened>(opened);
  if (!replay_.Accept(ok.sender, ok.counter)) {
    return Rejection{"replay", absl::StrCat("replayed or stale frame from sender ", ok.sender)};
  }
  wire::Envelope envelope;
  if (!envelope.ParseFromString(ok.plaintext)) return Rejection{"malformed", "envelope does not parse"};
  if (envelope.version() != kWireVersion) {
    return Rejection{"version", absl::StrCat("unsupported protocol version ", envelope.version())};
  }
  if (envelope.body_case() == wire::Envelope::BODY_NOT_SET) return Rejection{"malformed", "empty envelope"};
  return envelope;
}

}  // namespace pollen::node
