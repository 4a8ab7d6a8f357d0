// Owner-routed test-and-add (node/core/routing.h): the asker's side
// (BeginAdd, replies, timeouts) and the owner's (HandleRouteAdd).
#include "node/core/bit_pack.h"
#include "node/core/node_impl.h"

namespace pollen::node {
namespace {

std::vector<std::string_view> Views(const std::vector<std::string>& keys) {
  return std::vector<std::string_view>(keys.begin(), keys.end());
}

}  // namespace

absl::StatusOr<uint64_t> Node::BeginAdd(std::string_view filter, std::span<const std::string_view> keys, Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  std::shared_ptr<const FilterState> state = impl.DriverLookup(std::string(filter));
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  if (absl::Status s = impl.CheckWritable(*state); !s.ok()) return s;
  const uint64_t ticket_id = impl.next_ticket++;
  RouteTicket& ticket = impl.route_tickets[ticket_id];
  ticket.filter = state->entry.config.name;
  ticket.added.assign(keys.size(), false);
  ticket.full.assign(keys.size(), false);
  ticket.began = now;
  // This call holds one count of requests_left until its end, so a request
  // decided during the loop below cannot finish (and erase) the ticket.
  ticket.requests_left = 1;

  if (!state->entry.config.routed) {
    ticket.added = impl.AddLocal(*state, keys, &ticket.full);
    ticket.requests_left = 0;
    impl.FinishTicket(ticket_id);
    return ticket_id;
  }
  impl.RefreshRendezvous();
  // Sort the keys: present here (answered now), owned here, or per owner.
  std::vector<uint32_t> owned;
  uint32_t oversize = 0;  // decided here: too long to route (counted as fallbacks)
  std::map<std::string, std::vector<uint32_t>> by_owner;  // ordered: requests go out in a deterministic order
  std::map<std::string, std::string> second_of;
  uint64_t present = 0;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (state->set->MightContain(keys[i])) {
      ++present;
      continue;
    }
    auto [owner, second] = impl.rendezvous.TopTwo(impl.rendezvous.KeyHash(keys[i]));
    if (owner == nullptr || *owner == impl.config.name || keys[i].size() > kMaxRouteKeyBytes) {
      if (owner != nullptr && *owner != impl.config.name) ++oversize;
      owned.push_back(i);
      continue;
    }
    by_owner[*owner].push_back(i);
    // The second-ranked member of the group's first key stands in for the
    // group: a retry there is a best effort once the owner is silent.
    if (!second_of.count(*owner)) second_of[*owner] = second != nullptr ? *second : "";
  }
  if (!owned.empty()) {
    std::vector<std::string_view> mine;
    for (uint32_t i : owned) mine.push_back(keys[i]);
    std::vector<bool> full;
    const std::vector<bool> added = impl.AddLocal(*state, mine, &full);
    for (size_t j = 0; j < owned.size(); ++j) {
      ticket.added[owned[j]] = added[j];
      ticket.full[owned[j]] = full[j];
    }
  }
  for (auto& [owner, indices] : by_owner) {
    size_t next = 0;
    while (next < indices.size()) {
      RouteRequest req;
      size_t bytes = 0;
      while (next < indices.size() && req.keys.size() < kMaxRouteKeys &&
             bytes + keys[indices[next]].size() <= kMaxRouteBytes) {
        bytes += keys[indices[next]].size();
        req.indices.push_back(indices[next]);
        req.keys.emplace_back(keys[indices[next]]);
        ++next;
      }
      assert(!req.keys.empty());  // each key fits kMaxRouteBytes (kMaxRouteKeyBytes is smaller)
      req.ticket = ticket_id;
      req.filter = ticket.filter;
      req.owner = owner;
      req.second = second_of[owner];
      if (impl.route_requests.size() >= kMaxRoutedInFlight) {
        ++ticket.requests_left;  // DecideLocally completes it
        impl.DecideLocally(req, true);
        continue;
      }
      if (impl.next_route_id == 0) impl.next_route_id = impl.rng.Next() | 1;
      req.id = impl.next_route_id++;
      ++ticket.requests_left;
      RouteRequest& stored = impl.route_requests[req.id] = std::move(req);
      impl.SendRoute(stored);
    }
  }
  ticket.fallback_keys += oversize;
  impl.Stats([&](NodeCounters& s) {
    s.routed_present += present;
    s.routed_owned += owned.size() - oversize;
    s.routed_fallbacks += oversize;
  });
  if (--ticket.requests_left == 0) impl.FinishTicket(ticket_id);
  return ticket_id;
}

std::vector<RoutedAddResult> Node::TakeRoutedAdds() {
  std::vector<RoutedAddResult> out;
  out.swap(impl_->routed_done);
  return out;
}

std::vector<PeerAdds> Node::TakePeerAdds() {
  std::vector<PeerAdds> out;
  out.swap(impl_->peer_adds);
  return out;
}

void Node::Impl::NotePeerAdds(const FilterState& state, std::span<const std::string_view> keys,
                              const std::vector<bool>& full) {
  assert(full.size() == keys.size());
  if (!config.report_peer_adds) return;
  // Bounded: the driver takes these after every call, and one call adds at
  // most one message's keys.
  PeerAdds adds;
  adds.filter = state.entry.config.name;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!full[j]) adds.keys.emplace_back(keys[j]);
  }
  // Empty when every key was refused (nothing to log) or for a repeated
  // answer (nothing new to log, but its frame waits like the first one's).
  if (!adds.keys.empty() || keys.empty()) peer_adds.push_back(std::move(adds));
}

bool Node::IsRouted(std::string_view filter) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  return state != nullptr && state->entry.config.routed;
}

absl::StatusOr<bool> Node::AnswerIfAllPresent(std::string_view filter, std::span<const std::string_view> keys) {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  if (absl::Status s = impl_->CheckWritable(*state); !s.ok()) return s;
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  state->set->MightContainMany(keys, std::span<bool>(found.get(), keys.size()));
  if (!std::all_of(found.get(), found.get() + keys.size(), [](bool b) { return b; })) return false;
  impl_->adds.fetch_add(keys.size(), std::memory_order_relaxed);
  impl_->Stats([&](NodeCounters& s) { s.routed_present += keys.size(); });
  return true;
}

void Node::Impl::RefreshRendezvous() {
  if (rendezvous_view == membership->view_version() && rendezvous_left == membership->left()) return;
  std::vector<std::string> names;
  names.reserve(membership->live_peer_count() + 1);
  if (!membership->left()) names.push_back(config.name);
  for (size_t i = 0; i < membership->live_peer_count(); ++i) names.push_back(membership->LivePeerName(i));
  rendezvous.Reset(names);
  rendezvous_view = membership->view_version();
  rendezvous_left = membership->left();
}

void Node::Impl::SendRoute(RouteRequest& req) {
  std::shared_ptr<const FilterState> state = DriverLookup(req.filter);
  const Address* to = req.owner == config.name ? nullptr : membership->LiveAddressOf(req.owner);
  if (state == nullptr || to == nullptr) {
    // The owner left the view (or is this node, as a second choice): the
    // answer is this node's, as every node whose view agrees would decide.
    DecideLocally(req, true);
    return;
  }
  wire::Envelope env;
  wire::RouteAdd* msg = env.mutable_route_add();
  msg->set_id(req.id);
  ToWire(state->entry.params, msg->mutable_filter());
  for (const std::string& key : req.keys) msg->add_keys(key);
  msg->set_stand_in(req.attempt > kRouteOwnerAttempts);
  Send(*to, env, false);
  if (std::find(req.asked.begin(), req.asked.end(), req.owner) == req.asked.end()) req.asked.push_back(req.owner);
  req.deadline = now + config.route_timeout;
  route_deadlines.emplace_back(req.deadline, req.id);
}

void Node::Impl::DecideLocally(RouteRequest& req, bool fallback) {
  std::shared_ptr<const FilterState> state = DriverLookup(req.filter);
  std::vector<bool> added(req.keys.size(), false), full(req.keys.size(), false);
  if (state != nullptr) {
    if (req.attempt > kRouteOwnerAttempts && req.owner == config.name) {
      added = StandInAdd(*state, Views(req.keys), &full);  // this node is the next-ranked member
    } else {
      added = AddLocal(*state, Views(req.keys), &full);
      // The owner was asked and never answered: it may have said "new" into
      // the void. Absent here at BeginAdd, the key answers new.
      if (fallback && !req.asked.empty()) {
        for (size_t j = 0; j < added.size(); ++j) added[j] = !full[j];
      }
    }
  }
  auto it = route_tickets.find(req.ticket);
  assert(it != route_tickets.end());
  if (state == nullptr) it->second.filter_gone = true;
  if (fallback) {
    it->second.fallback_keys += static_cast<uint32_t>(req.keys.size());
    Stats([&](NodeCounters& s) { s.routed_fallbacks += req.keys.size(); });
  } else {
    Stats([&](NodeCounters& s) { s.routed_owned += req.keys.size(); });
  }
  CompleteRequest(req, added, full);
}

void Node::Impl::CompleteRequest(const RouteRequest& req, const std::vector<bool>& added, const std::vector<bool>& full) {
  assert(added.size() == req.keys.size() && full.size() == req.keys.size());
  auto it = route_tickets.find(req.ticket);
  assert(it != route_tickets.end());
  RouteTicket& ticket = it->second;
  for (size_t j = 0; j < req.indices.size(); ++j) {
    assert(req.indices[j] < ticket.added.size());
    ticket.added[req.indices[j]] = added[j];
    ticket.full[req.indices[j]] = full[j];
  }
  const uint64_t ticket_id = req.ticket;
  const uint64_t id = req.id;
  if (id != 0) route_requests.erase(id);  // `req` is gone from here on
  assert(ticket.requests_left > 0);
  if (--ticket.requests_left == 0) FinishTicket(ticket_id);
}

void Node::Impl::FinishTicket(uint64_t ticket_id) {
  auto it = route_tickets.find(ticket_id);
  assert(it != route_tickets.end() && it->second.requests_left == 0);
  RouteTicket& t = it->second;
  RoutedAddResult result;
  result.ticket = ticket_id;
  if (t.filter_gone) {
    result.status = absl::NotFoundError("ERR not found");  // the caller may make the filter and add again
  } else {
    adds.fetch_add(t.added.size(), std::memory_order_relaxed);  // counted once, when taken
  }
  result.fallback_keys = t.fallback_keys;
  result.added = std::move(t.added);
  result.full = std::move(t.full);
  result.remote_keys = t.remote_keys;
  result.latency = now - t.began;
  routed_done.push_back(std::move(result));
  route_tickets.erase(it);
}

std::vector<bool> Node::Impl::StandInAdd(const FilterState& state, std::span<const std::string_view> keys,
                                         std::vector<bool>* full) {
  std::vector<bool> added = AddLocal(state, keys, full);
  for (size_t j = 0; j < keys.size(); ++j) {
    if (stand_ins.FirstTime(rendezvous.KeyHash(keys[j]), now) && !(*full)[j]) added[j] = true;
  }
  return added;
}

void Node::Impl::ExpireRoutes() {
  // Bounded: each pass pops one deadline; every resend pushes one later than now.
  while (!route_deadlines.empty() && route_deadlines.front().first <= now) {
    const auto [deadline, id] = route_deadlines.front();
    route_deadlines.pop_front();
    auto it = route_requests.find(id);
    if (it == route_requests.end() || it->second.deadline != deadline) continue;  // answered, or sent again since
    RouteRequest& req = it->second;
    if (req.attempt < kRouteOwnerAttempts) {
      ++req.attempt;
      SendRoute(req);
    } else if (req.attempt == kRouteOwnerAttempts && !req.second.empty()) {
      ++req.attempt;
      req.owner = req.second;
      SendRoute(req);
    } else {
      DecideLocally(req, true);
    }
  }
}

void Node::Impl::HandleRouteAdd(const Address& from, const std::string& sender, const wire::RouteAdd& msg) {
  // Validate everything before any state changes.
  if (sender.empty() || sender.size() > Membership::kMaxNameBytes) {
    Reject(from, "malformed");
    return;
  }
  std::optional<crdt::FilterParams> params = ValidKeyRequest(from, msg);
  if (!params) return;
  wire::Envelope env;
  wire::RouteReply* reply = env.mutable_route_reply();
  reply->set_id(msg.id());
  std::shared_ptr<const FilterState> state = DriverLookup(params->name);
  if (state == nullptr || !(state->entry.params == *params) || !state->entry.config.routed) {
    reply->set_refused(true);
  } else {
    const AnswerMemory::Answer* answer = route_answers.Find(sender, msg.id());
    AnswerMemory::Answer fresh;
    if (answer == nullptr || answer->added.size() != static_cast<size_t>(msg.keys_size())) {
      std::vector<std::string_view> keys(msg.keys().begin(), msg.keys().end());
      fresh.added = msg.stand_in() ? StandInAdd(*state, keys, &fresh.full) : AddLocal(*state, keys, &fresh.full);
      NotePeerAdds(*state, keys, fresh.full);
      Stats([&](NodeCounters& s) { s.routed_served += keys.size(); });
      if (answer == nullptr) route_answers.Remember(sender, msg.id(), fresh, now);
      answer = &fresh;
    } else {
      // A resend answered from memory: the keys were reported with the first
      // request; an empty report still makes the driver hold this answer
      // until they are durable (the first answer may not have left yet).
      NotePeerAdds(*state, {}, {});
    }
    reply->set_added(PackBits(answer->added));
    reply->set_full(PackBits(answer->full));
  }
  Send(from, env, false);
}

void Node::Impl::HandleRouteReply(const Address& from, const std::string& sender, const wire::RouteReply& msg) {
  auto it = route_requests.find(msg.id());
  if (it == route_requests.end()) return;  // late or repeated: already answered or decided
  RouteRequest& req = it->second;
  // Any member asked for this id may answer (the owner's late reply after
  // the request moved to the second-ranked member is still the owner's).
  if (std::find(req.asked.begin(), req.asked.end(), sender) == req.asked.end()) return;
  if (msg.refused()) {
    DecideLocally(req, true);
    return;
  }
  std::vector<bool> added, full;
  if (!UnpackBits(msg.added(), req.keys.size(), &added) || !UnpackBits(msg.full(), req.keys.size(), &full)) {
    Reject(from, "malformed");
    return;
  }
  // Read-your-writes here: the keys' bits are set on this node before the
  // client hears the answer (the owner's bits arrive later by gossip).
  auto ticket = route_tickets.find(req.ticket);
  assert(ticket != route_tickets.end());
  if (std::shared_ptr<const FilterState> state = DriverLookup(req.filter); state != nullptr) {
    std::vector<bool> ignored_full;
    AddLocal(*state, Views(req.keys), &ignored_full);
  } else {
    ticket->second.filter_gone = true;
  }
  // The owner's answer, or (sender is not the first member asked) the
  // second-ranked member's: a stand-in, counted as a fallback.
  const bool from_owner = sender == req.asked.front();
  const uint32_t n = static_cast<uint32_t>(req.keys.size());
  ticket->second.remote_keys += n;
  if (!from_owner) ticket->second.fallback_keys += n;
  Stats([&](NodeCounters& s) { (from_owner ? s.routed_remote : s.routed_fallbacks) += n; });
  CompleteRequest(req, added, full);
}

}  // namespace pollen::node
