// WAIT and the quorum EXISTS (node/core/peer_checks.h): the asker's side
// (BeginWait, BeginQuorumExists, replies, resends) and the peer's
// (HandleKeyCheck).
#include "node/core/bit_pack.h"
#include "node/core/node_impl.h"

namespace pollen::node {

absl::StatusOr<uint64_t> Node::BeginWait(const std::vector<KeyBatch>& batches, uint32_t replicas, Duration timeout,
                                         Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  size_t total = 0;
  for (const KeyBatch& b : batches) total += b.keys.size();
  if (total > kMaxWaitKeys) return absl::ResourceExhaustedError("ERR WAIT covers too many keys");
  if (timeout.count() < 0) return absl::InvalidArgumentError("ERR timeout is negative");
  CheckTicket ticket;
  ticket.add = true;
  ticket.wanted = replicas;
  ticket.began = now;
  ticket.deadline = now + (timeout.count() > 0 ? std::min(timeout, kMaxWaitTime) : kMaxWaitTime);
  bool checkable = true;
  size_t chunk_bytes = 0;
  for (const KeyBatch& b : batches) {
    std::shared_ptr<const FilterState> state = impl.DriverLookup(b.filter);
    if (state == nullptr) continue;  // deleted (or never here): nothing holds the keys
    if (b.incarnation != 0 && state->uid != b.incarnation) {
      // Replaced since the keys were added: pushing them would put them in
      // the successor, and skipping them would count peers for keys nobody
      // holds. Answer 0, as the RESP layer does when it sees this first.
      checkable = false;
      continue;
    }
    for (const std::string& key : b.keys) {
      if (key.size() > kMaxCheckKeyBytes) checkable = false;  // no peer can be asked about it
      if (ticket.chunks.empty() || ticket.chunks.back().filter != b.filter ||
          ticket.chunks.back().keys.size() >= kMaxCheckKeys || chunk_bytes + key.size() > kMaxCheckBytes) {
        ticket.chunks.push_back(CheckChunk{b.filter, {}, {}, state->uid});
        chunk_bytes = 0;
      }
      ticket.chunks.back().keys.push_back(key);
      chunk_bytes += key.size();
    }
  }
  std::vector<std::string> peers;
  if (replicas > 0 && checkable) {
    for (size_t i = 0; i < impl.membership->live_peer_count(); ++i) peers.push_back(impl.membership->LivePeerName(i));
  }
  // The caller may forget the keys only if every member is live and asked:
  // a lone node, a member held dead (partitioned away), or a key too long
  // to ask about keeps them for the next WAIT.
  ticket.every_live_peer = !peers.empty() && impl.membership->dead_count() == 0;
  if (!checkable) ticket.chunks.clear();  // nobody asked: answers 0 at once
  return impl.StartCheck(std::move(ticket), peers);
}

absl::StatusOr<uint64_t> Node::BeginQuorumExists(std::string_view filter, std::span<const std::string_view> keys,
                                                 uint32_t replicas, Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  std::shared_ptr<const FilterState> state = impl.DriverLookup(std::string(filter));
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  CheckTicket ticket;
  ticket.began = now;
  ticket.deadline = now + impl.config.route_timeout * kRouteAttempts;
  ticket.present.resize(keys.size());
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  state->set->MightContainMany(keys, std::span<bool>(found.get(), keys.size()));
  uint64_t hits = 0;
  size_t chunk_bytes = 0;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    ticket.present[i] = found[i];
    hits += found[i] ? 1 : 0;
    if (found[i] || keys[i].size() > kMaxCheckKeyBytes) continue;
    if (ticket.chunks.empty() || ticket.chunks.back().keys.size() >= kMaxCheckKeys ||
        chunk_bytes + keys[i].size() > kMaxCheckBytes) {
      ticket.chunks.push_back(CheckChunk{state->entry.config.name, {}, {}});  // any incarnation: a read
      chunk_bytes = 0;
    }
    chunk_bytes += keys[i].size();
    ticket.chunks.back().keys.emplace_back(keys[i]);
    ticket.chunks.back().indices.push_back(i);
  }
  // Counted as reads here, like ExistsMany (the peers count theirs).
  impl.queries.fetch_add(keys.size(), std::memory_order_relaxed);
  impl.hits.fetch_add(hits, std::memory_order_relaxed);
  std::vector<std::string> peers;
  const size_t live = impl.membership->live_peer_count();
  const size_t want = std::min<size_t>({replicas, kMaxQuorumPeers, live});
  // A partial Fisher-Yates draw of `want` distinct live peers.
  std::vector<size_t> order(live);
  for (size_t i = 0; i < live; ++i) order[i] = i;
  for (size_t i = 0; i < want; ++i) {
    std::swap(order[i], order[i + impl.rng.Below(live - i)]);
    peers.push_back(impl.membership->LivePeerName(order[i]));
  }
  if (ticket.chunks.empty()) peers.clear();  // every key is present here
  return impl.StartCheck(std::move(ticket), peers);
}

std::vector<PeerCheckResult> Node::TakePeerChecks() {
  std::vector<PeerCheckResult> out;
  out.swap(impl_->checks_done);
  return out;
}

absl::StatusOr<uint64_t> Node::Impl::StartCheck(CheckTicket ticket, const std::vector<std::string>& peers) {
  if (check_tickets.size() >= kMaxCheckTickets ||
      check_requests.size() + peers.size() * ticket.chunks.size() > kMaxCheckRequests) {
    return absl::ResourceExhaustedError("ERR too many WAIT or quorum EXISTS calls in flight");
  }
  const uint64_t ticket_id = next_ticket++;
  // With no chunks (a WAIT without keys) every peer is complete at once: it
  // holds every key of the call.
  for (const std::string& name : peers) {
    CheckTicket::Peer peer;
    peer.name = name;
    peer.resend_interval = config.route_timeout;
    peer.next_resend = now + peer.resend_interval;
    peer.ids.assign(ticket.chunks.size(), 0);
    peer.chunks_left = ticket.chunks.size();
    ticket.peers.push_back(std::move(peer));
  }
  if (ticket.chunks.empty()) ticket.complete_peers = static_cast<uint32_t>(peers.size());
  if (ticket.add && ticket.complete_peers >= ticket.wanted) ticket.grace_end = now;
  CheckTicket& stored = check_tickets[ticket_id] = std::move(ticket);
  if (next_check_id == 0 && !stored.peers.empty()) next_check_id = rng.Next() | 1;
  for (uint32_t p = 0; p < stored.peers.size(); ++p) {
    for (uint32_t c = 0; c < stored.chunks.size(); ++c) {
      stored.peers[p].ids[c] = next_check_id++;
      check_requests[stored.peers[p].ids[c]] = CheckRequest{ticket_id, p, c};
      SendCheck(stored, p, c);
    }
  }
  FinishCheckIfAnswered(ticket_id);
  return ticket_id;
}

void Node::Impl::SendCheck(CheckTicket& ticket, uint32_t peer, uint32_t chunk) {
  CheckTicket::Peer& p = ticket.peers[peer];
  const CheckChunk& c = ticket.chunks[chunk];
  std::shared_ptr<const FilterState> state = DriverLookup(c.filter);
  const Address* to = membership->LiveAddressOf(p.name);
  if (state == nullptr || (c.incarnation != 0 && state->uid != c.incarnation) || to == nullptr) {
    p.failed = true;  // the filter is gone (or replaced) here, or the peer left: it cannot count
    return;
  }
  wire::Envelope env;
  wire::KeyCheck* msg = env.mutable_key_check();
  msg->set_id(p.ids[chunk]);
  ToWire(state->entry.params, msg->mutable_filter());
  for (const std::string& key : c.keys) msg->add_keys(key);
  msg->set_add(ticket.add);
  Send(*to, env, false);
}

void Node::Impl::ServiceChecks() {
  // Bounded by kMaxCheckTickets tickets of bounded chunks.
  std::vector<uint64_t> ids;
  for (auto& [id, ticket] : check_tickets) ids.push_back(id);
  for (uint64_t id : ids) {
    CheckTicket& t = check_tickets.at(id);
    for (uint32_t p = 0; p < t.peers.size(); ++p) {
      CheckTicket::Peer& peer = t.peers[p];
      if (peer.failed || peer.chunks_left == 0 || now < peer.next_resend) continue;
      peer.resend_interval = std::min(peer.resend_interval * 2, config.route_timeout * kMaxResendTimeouts);
      peer.next_resend = now + peer.resend_interval;
      for (uint32_t c = 0; c < t.chunks.size(); ++c) {
        if (t.peers[p].ids[c] != 0) SendCheck(t, p, c);
      }
    }
    FinishCheckIfAnswered(id);
  }
}

void Node::Impl::FinishCheckIfAnswered(uint64_t ticket_id) {
  auto it = check_tickets.find(ticket_id);
  assert(it != check_tickets.end());
  CheckTicket& t = it->second;
  if (!CheckAnswered(t, now)) return;
  PeerCheckResult result;
  result.ticket = ticket_id;
  result.latency = now - t.began;
  if (t.add) {
    result.peers_acked = t.complete_peers;
    result.every_live_peer = t.every_live_peer && t.complete_peers == t.peers.size();
  } else {
    result.present = std::move(t.present);
    result.peers_answered = t.complete_peers;
  }
  for (const CheckTicket::Peer& p : t.peers) {
    for (uint64_t id : p.ids) {
      if (id != 0) check_requests.erase(id);
    }
  }
  checks_done.push_back(std::move(result));
  check_tickets.erase(it);
}

Time Node::Impl::NextCheckWakeup() const {
  Time next = Time::max();
  for (const auto& [id, t] : check_tickets) {
    next = std::min({next, t.deadline, t.grace_end});
    for (const CheckTicket::Peer& p : t.peers) {
      if (!p.failed && p.chunks_left > 0) next = std::min(next, p.next_resend);
    }
  }
  return next;
}

void Node::Impl::HandleKeyCheck(const Address& from, const wire::KeyCheck& msg) {
  std::optional<crdt::FilterParams> params = ValidKeyRequest(from, msg);  // before any state changes
  if (!params) return;
  wire::Envelope env;
  wire::KeyCheckReply* reply = env.mutable_key_check_reply();
  reply->set_id(msg.id());
  std::shared_ptr<const FilterState> state = DriverLookup(params->name);
  if (state == nullptr || !(state->entry.params == *params)) {
    reply->set_refused(true);  // not here yet (or another filter of that name): asked again
  } else {
    std::vector<std::string_view> keys(msg.keys().begin(), msg.keys().end());
    // A digest filter is written by its owner only (CheckWritable): a
    // replica reports what it holds and waits for the owner's gossip.
    if (msg.add() && CheckWritable(*state).ok()) {
      std::vector<bool> full;
      AddLocal(*state, keys, &full);  // a full NONSCALING filter refuses: not held
      NotePeerAdds(*state, keys, full);
    }
    std::unique_ptr<bool[]> found(new bool[keys.size()]);
    state->set->MightContainMany(keys, std::span<bool>(found.get(), keys.size()));
    reply->set_held(PackBits(std::vector<bool>(found.get(), found.get() + keys.size())));
  }
  Send(from, env, false);
}

void Node::Impl::HandleKeyCheckReply(const Address& from, const std::string& sender, const wire::KeyCheckReply& msg) {
  auto req = check_requests.find(msg.id());
  if (req == check_requests.end()) return;  // late or repeated
  const CheckRequest r = req->second;
  CheckTicket& t = check_tickets.at(r.ticket);
  CheckTicket::Peer& peer = t.peers[r.peer];
  if (sender != peer.name) return;  // only the member asked answers for it
  if (msg.refused()) {
    // A live peer without the filter yet (its catalog lags the add): asked
    // again after one route timeout, not on a silent peer's backoff.
    peer.resend_interval = config.route_timeout;
    peer.next_resend = std::min(peer.next_resend, now + config.route_timeout);
    return;
  }
  const CheckChunk& chunk = t.chunks[r.chunk];
  std::vector<bool> held;
  if (!UnpackBits(msg.held(), chunk.keys.size(), &held)) {
    Reject(from, "malformed");
    return;
  }
  check_requests.erase(req);
  peer.ids[r.chunk] = 0;
  --peer.chunks_left;
  if (t.add) {
    if (std::find(held.begin(), held.end(), false) != held.end()) peer.failed = true;  // it cannot hold them all
  } else {
    for (size_t j = 0; j < held.size(); ++j) {
      if (held[j]) t.present[chunk.indices[j]] = true;
    }
  }
  if (peer.chunks_left == 0 && !peer.failed) {
    ++t.complete_peers;
    if (t.add && t.complete_peers == t.wanted) t.grace_end = now + config.route_timeout / 4;
  }
  FinishCheckIfAnswered(r.ticket);
}

}  // namespace pollen::node
