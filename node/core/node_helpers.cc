// Node::Impl helpers: sending, sealing, peers, membership plumbing.
#include "node/core/node_impl.h"

namespace pollen::node {

std::string Node::Impl::Serialize(wire::Envelope& env) const {
  env.set_version(kWireVersion);
  env.set_sender_name(config.name);
  env.set_sender_address(config.advertise);
  std::string plain;
  env.SerializeToString(&plain);
  return plain;
}

std::string Node::Impl::SerializeBody(int field, const google::protobuf::MessageLite& body, Header form) {
  if (envelope_header.empty()) {
    wire::Envelope header;
    envelope_header = Serialize(header);
    header.clear_sender_address();
    header.SerializeToString(&envelope_header_implicit);
  }
  static const std::string kNoHeader;
  const std::string& header = form == Header::kFull        ? envelope_header
                              : form == Header::kNoAddress ? envelope_header_implicit
                                                           : kNoHeader;
  const size_t size = body.ByteSizeLong();
  assert(field > 0 && field < 2048 && size <= protocol::kMaxFrameBytes);
  std::string plain;
  plain.reserve(header.size() + 2 + 5 + size);
  plain = header;
  auto put_varint = [&plain](uint64_t v) {
    while (v >= 0x80) {
      plain.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    plain.push_back(static_cast<char>(v));
  };
  put_varint((static_cast<uint64_t>(field) << 3) | 2);  // length-delimited
  put_varint(size);
  const size_t start = plain.size();
  plain.resize(start + size);
  uint8_t* end = body.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(plain.data() + start));
  assert(end == reinterpret_cast<uint8_t*>(plain.data() + plain.size()));
  (void)end;
  return plain;
}

void Node::Impl::SendPlain(const Address& to, const std::string& plain, size_t type, bool stream) {
  SendPlainToAll({&to, 1}, plain, type, stream);
}

void Node::Impl::SendPlainToAll(std::span<const Address> peers, const std::string& plain, size_t type, bool stream,
                                protocol::SealForm seal) {
  if (peers.empty()) return;
  const size_t sealed = plain.size() + FrameCodec::kOverhead;
  if (sealed > protocol::kMaxFrameBytes) {  // senders chunk below this; never expected
    Stats([&](NodeCounters& s) { ++s.rejected_by_reason["oversize_out"]; });
    return;
  }
  const Channel channel =
      (stream || config.tcp_only || sealed > config.max_datagram_bytes) ? Channel::kStream : Channel::kDatagram;
  std::string frame = codec.Seal(plain, channel, seal);
  {
    std::lock_guard lock(stats_mu);
    stats.frames_out += peers.size();
    stats.bytes_out += frame.size() * peers.size();
    bytes_out_type[type] += frame.size() * peers.size();
    frames_out_type[type] += peers.size();
  }
  for (size_t i = 0; i + 1 < peers.size(); ++i) out.push_back(Outgoing{peers[i], channel, frame});
  out.push_back(Outgoing{peers.back(), channel, std::move(frame)});
}

std::vector<Address> Node::Impl::PickPeers(size_t count) {
  std::vector<Address> out;
  for (size_t i : PickDistinct(rng, membership->live_peer_count(), count)) {
    out.push_back(membership->LivePeerAddress(i));
  }
  return out;
}

void Node::Impl::PumpMembership(bool force) {
  for (const Membership::Send& s : membership->TakeOutgoing()) {
    // Compact (Membership, "Compact frames"): the receiver names the sender
    // from the envelope and finds its address in its member list (or, for a
    // sender it does not know yet, takes the datagram's source). Only as a
    // datagram: a stream's source port is not where the sender listens.
    std::string plain;
    if (s.compact && !config.tcp_only) {
      const std::string sender = s.msg->sender();
      const uint32_t features = s.msg->features();
      s.msg->clear_sender();
      s.msg->clear_features();
      plain = SerializeBody(wire::Envelope::kMembershipFieldNumber, *s.msg, Header::kNoAddress);
      if (plain.size() + FrameCodec::kOverhead <= config.max_datagram_bytes) {
        SendPlainToAll({&s.to, 1}, plain, BodyIndex(wire::Envelope::kMembership), false, protocol::SealForm::kCompact);
        continue;
      }
      s.msg->set_sender(sender);  // a full list: the full form, by stream
      s.msg->set_features(features);
    }
    plain = SerializeBody(wire::Envelope::kMembershipFieldNumber, *s.msg);
    SendPlain(s.to, plain, BodyIndex(wire::Envelope::kMembership), /*stream=*/s.reliable);
  }
  std::vector<Event> member_events = membership->TakeEvents();
  // Every state change of another member comes with an event; our own
  // incarnation and the live count catch the rest.
  const bool refresh = !member_events.empty() || membership->incarnation() != cached_incarnation ||
                       membership->LiveCount() != cached_live;
  membership_changes += member_events.size();
  for (Event& e : member_events) {
    if (e.kind == Event::Kind::kMemberJoined || e.kind == Event::Kind::kMemberAlive) QueueAntiEntropy(e.subject);
    events.push_back(std::move(e));
  }
  if (refresh) {
    cached_incarnation = membership->incarnation();
    cached_live = membership->LiveCount();
    members_dirty = true;
  }
  // Never read and refresh_unread_members off (the simulator): no copy but
  // the first, at Create (a warm start's table at Start would be N entries
  // per node). Otherwise at most once per kMembersIdleRefresh, and after a
  // Members() call every kMembersRefresh; forced at Create, Start and Leave.
  const Duration period =
      members_requested.load(std::memory_order_relaxed) ? kMembersRefresh : kMembersIdleRefresh;
  const bool read = config.refresh_unread_members || members_ever_read.load(std::memory_order_relaxed);
  const bool first = !members_refreshed_once;
  if (members_dirty && (first || (read && (force || now >= members_refreshed + period)))) {
    members_refreshed_once = true;
    members_requested.store(false, std::memory_order_relaxed);
    members_dirty = false;
    members_refreshed = now;
    std::vector<MemberInfo> members = membership->Members();
    std::lock_guard lock(members_mu);
    members_cache = std::move(members);
  }
}

void Node::Impl::QueueAntiEntropy(const std::string& member) {
  const double live = static_cast<double>(std::max<size_t>(1, membership->LiveCount()));
  if (rng.Unit() * live >= kJoinSyncs) return;
  if (membership->LiveAddressOf(member) == nullptr) return;
  if (std::find(ae_queue.begin(), ae_queue.end(), member) != ae_queue.end()) return;
  if (ae_queue.size() >= kMaxQueuedSyncs) return;
  ae_queue.push_back(member);
}

void Node::Impl::CopyMembershipStats() {
  uint64_t total = 0;
  for (const auto& [reason, count] : membership->rejected()) total += count;
  const uint32_t health = membership->health_score();
  const uint64_t stalls = membership->stalls();
  if (total == membership_rejected && health == membership_health && stalls == membership_stalls) return;
  membership_rejected = total;
  membership_health = health;
  membership_stalls = stalls;
  Stats([&](NodeCounters& s) {
    for (const auto& [reason, count] : membership->rejected()) s.rejected_by_reason["membership_" + reason] = count;
    s.health_score = health;
    s.membership_stalls = stalls;
  });
}

}  // namespace pollen::node
