#include "node/core/frames.h"

#include "absl/strings/str_cat.h"

namespace pollen::node {
namespace {
constexpr size_t kArenaBlockBytes = 16 << 10;     // most envelopes parse within it
// The reused decryption buffer is kept up to this: every datagram fits, and
// the stream frames beyond it (full member lists, anti-entropy ranges) are
// rare next to datagrams. pollen-sim holds one buffer per node: at 64 KB
// they averaged ~33 KB (heaptrack, N=2000 cold start), 330 MB at N=10,000.
constexpr size_t kKeepPlaintextBytes = 16 << 10;
}  // namespace

FrameCodec::FrameCodec(const crdt::ClusterSecret& secret, std::string label, Rng& rng)
    : keyring_(protocol::DeriveGossipKey(secret)), label_(std::move(label)) {
  senders_[0] = rng.Next();
  senders_[1] = rng.Next();
  if (senders_[1] == senders_[0]) senders_[1] ^= 1;
  google::protobuf::ArenaOptions options;
  arena_block_ = std::make_unique<char[]>(kArenaBlockBytes);
  options.initial_block = arena_block_.get();
  options.initial_block_size = kArenaBlockBytes;
  arena_ = std::make_unique<google::protobuf::Arena>(options);
}

std::string FrameCodec::Seal(std::string_view plaintext, Channel channel, protocol::SealForm form) {
  const int c = channel == Channel::kDatagram ? 0 : 1;
  return protocol::Seal(keyring_, label_, senders_[c], ++counters_[c], plaintext, form);
}

std::variant<const wire::Envelope*, FrameCodec::Rejection> FrameCodec::Open(std::string_view frame, size_t max_bytes) {
  if (std::optional<protocol::OpenError> err = protocol::OpenInto(keyring_, label_, frame, max_bytes, &opened_)) {
    return Rejection{std::string(protocol::RejectReasonName(err->reason)), err->message};
  }
  const protocol::Opened& ok = opened_;
  // The buffer is reused across frames; a rare large one is not kept.
  struct Shrink {
    std::string& s;
    ~Shrink() {
      if (s.capacity() > kKeepPlaintextBytes) std::string().swap(s);
    }
  } shrink{opened_.plaintext};
  if (!replay_.Accept(ok.sender, ok.counter)) {
    return Rejection{"replay", absl::StrCat("replayed or stale frame from sender ", ok.sender)};
  }
  arena_->Reset();  // frees the previous frame's Envelope; keeps the initial block
  auto* envelope = google::protobuf::Arena::CreateMessage<wire::Envelope>(arena_.get());
  if (!envelope->ParseFromString(ok.plaintext)) return Rejection{"malformed", "envelope does not parse"};
  // A bare tree push (kTreeFeatureBarePushes) says neither version nor
  // sender: the node attributes it by opened_sender().
  const bool bare = envelope->version() == 0 && envelope->sender_name().empty() &&
                    envelope->sender_address().empty() && envelope->body_case() == wire::Envelope::kTree;
  if (envelope->version() != kWireVersion && !bare) {
    return Rejection{"version", absl::StrCat("unsupported protocol version ", envelope->version())};
  }
  if (envelope->body_case() == wire::Envelope::BODY_NOT_SET) return Rejection{"malformed", "empty envelope"};
  return envelope;
}

}  // namespace pollen::node
