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

void Node::Impl::SendPlain(const Address& to, const std::string& plain, size_t type, bool stream) {
  const size_t sealed = plain.size() + FrameCodec::kOverhead;
  if (sealed > protocol::kMaxFrameBytes) {  // senders chunk below this; never expected
    Stats([&](NodeCounters& s) { ++s.rejected_by_reason["oversize_out"]; });
    return;
  }
  const Channel channel =
      (stream || config.tcp_only || sealed > config.max_datagram_bytes) ? Channel::kStream : Channel::kDatagram;
  Outgoing o{to, channel, codec.Seal(plain, channel)};
  {
    std::lock_guard lock(stats_mu);
    ++stats.frames_out;
    stats.bytes_out += o.bytes.size();
    bytes_out_type[type] += o.bytes.size();
    ++frames_out_type[type];
  }
  out.push_back(std::move(o));
}

const std::vector<Address>& Node::Impl::LivePeers() {
  if (membership->peers_version() != live_peers_version) {
    live_peers = membership->LivePeers();
    live_peers_version = membership->peers_version();
  }
  return live_peers;
}

std::vector<Address> Node::Impl::PickPeers(const std::vector<Address>& peers, size_t count) {
  count = std::min(count, peers.size());
  std::vector<size_t> chosen;
  if (count * 4 > peers.size()) {  // dense: partial Fisher-Yates over indices
    std::vector<size_t> all(peers.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng.Below(all.size() - i)]);
    chosen.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count));
  } else {
    while (chosen.size() < count) {  // expected < 2 draws per pick here
      const size_t i = rng.Below(peers.size());
      if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
    }
  }
  std::vector<Address> out;
  out.reserve(count);
  for (size_t i : chosen) out.push_back(peers[i]);
  return out;
}

void Node::Impl::PumpMembership(bool force) {
  for (Membership::Send& s : membership->TakeOutgoing()) {
    wire::Envelope env;
    *env.mutable_membership() = std::move(s.msg);
    Send(s.to, env, false);
  }
  std::vector<Event> member_events = membership->TakeEvents();
  // Every state change of another member comes with an event; our own
  // incarnation and the live count catch the rest.
  const bool refresh = !member_events.empty() || membership->incarnation() != cached_incarnation ||
                       membership->LiveCount() != cached_live;
  for (Event& e : member_events) {
    if (e.kind == Event::Kind::kMemberJoined || e.kind == Event::Kind::kMemberAlive) QueueAntiEntropy(e.subject);
    events.push_back(std::move(e));
  }
  if (refresh) {
    cached_incarnation = membership->incarnation();
    cached_live = membership->LiveCount();
    members_dirty = true;
  }
  // Without readers (the simulator never asks) the copy is made at most once
  // per kMembersIdleRefresh; after a Members() call, every kMembersRefresh.
  const Duration period =
      members_requested.load(std::memory_order_relaxed) ? kMembersRefresh : kMembersIdleRefresh;
  if (members_dirty && (force || now >= members_refreshed + period)) {
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
  std::optional<MemberInfo> m = membership->Find(member);
  if (!m || std::find(ae_queue.begin(), ae_queue.end(), m->address) != ae_queue.end()) return;
  if (ae_queue.size() >= kMaxQueuedSyncs) return;
  ae_queue.push_back(m->address);
}

void Node::Impl::CopyMembershipRejections() {
  uint64_t total = 0;
  for (const auto& [reason, count] : membership->rejected()) total += count;
  if (total == membership_rejected) return;
  membership_rejected = total;
  Stats([&](NodeCounters& s) {
    for (const auto& [reason, count] : membership->rejected()) s.rejected_by_reason["membership_" + reason] = count;
  });
}

}  // namespace pollen::node
