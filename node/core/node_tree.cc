// Node::Impl tree dissemination (NodeConfig::Dissemination::kTree): overlay
// links, beacons and pushes around BroadcastTree's bookkeeping.
//
// A node forwards only the bits that were new to it, to every tree link but
// the one they came on. Bits that arrive from anyone are merged (OR is
// idempotent), so a tree that is still forming or repairing costs a few
// extra transmissions or, where it has a gap, a repair by anti-entropy,
// never a wrong answer.
#include "node/core/node_impl.h"

namespace pollen::node {

void Node::Impl::TreeRound() {
  assert(tree != nullptr);
  if (membership->left()) return;
  // The overlay check depends only on membership, the links kept only on
  // the neighbours: each is skipped while its input stands still (as is
  // RecomputeTree). At N=1000 these were a third of pollen-sim's steady-state
  // CPU, nearly all of it cache misses on member lookups that gave the same
  // answers as the round before (perf).
  if (tree->NeedsNeighbours() || membership->view_version() != overlay_seen_view) {
    MaintainOverlay();
    overlay_seen_view = membership->view_version();
  }
  if (tree->version() != retained_shape) {
    const std::vector<std::string> neighbours = tree->Neighbours();
    delivery->Retain(neighbours);
    aliases.Retain(neighbours);  // the same links: a link's aliases live as long as its stream
    const auto gone = [&](const std::string& link) {
      return !std::binary_search(neighbours.begin(), neighbours.end(), link);
    };
    std::erase_if(compact_ref_links, gone);
    std::erase_if(implicit_sender_links, gone);
    std::erase_if(alias_links, gone);
    std::erase_if(bare_links, gone);
    std::erase_if(bare_state, [&](const auto& entry) { return gone(entry.first); });
    std::erase_if(compact_seal_links, gone);
    std::erase_if(seal_senders, [&](const auto& entry) { return !entry.second.collided && gone(entry.second.name); });
    retained_shape = tree->version();
  }
  RecomputeTree();
  if (beacon_changed) {
    // A new beacon goes out in kBeaconRepeats rounds in a row: a parent
    // pushes only to neighbours whose last beacon names it, so one lost
    // beacon cut a child (and its subtree) off until the next periodic one.
    beacon_changed = false;
    beacon_repeats = kBeaconRepeats;
    beacon_backoff = 1;
    steady_beacons = 0;
  }
  // At the base interval whatever the beacon's backoff: a root that knows a
  // smaller live member is one side of a healed partition, to be joined.
  if (now >= next_root_check) {
    LinkTowardsTheRoot();
    next_root_check = now + config.tree_beacon_interval;
  }
  if (beacon_repeats > 0 || now >= next_beacon) {
    if (beacon_repeats > 0) {
      --beacon_repeats;
    } else if (steady_beacons < kSteadyBeacons) {
      ++steady_beacons;
    } else {
      beacon_backoff = std::min(2 * beacon_backoff, kMaxBeaconBackoff);
    }
    next_beacon = now + config.tree_beacon_interval * beacon_backoff;
    std::vector<Address> peers;
    for (const std::string& name : tree->Neighbours()) {
      if (const Address* a = membership->LiveAddressOf(name); a != nullptr) peers.push_back(*a);
    }
    wire::Tree beacon;
    *beacon.mutable_beacon() = BeaconToWire();
    SendTree(peers, beacon);
  }
  // This node's own new bits go now, or when the push gap ends. Taken from
  // `deltas` either way: what is left there after the round is flooded.
  TakeOwnBits();
  if (const Time earliest = pacing->Earliest(now, tree_pending_words); earliest <= now) {
    TreePush();
  } else if (!tree_pending.empty()) {
    next_push = std::min(next_push, earliest);
  }
}

void Node::Impl::LinkTowardsTheRoot() {
  const std::string* smallest = membership->SmallestLivePeer();
  if (smallest == nullptr || !tree->beacon().parent.empty() || *smallest > config.name ||
      !membership->IsAlive(*smallest)) {
    return;
  }
  // A root, while a smaller member is live: this side of the overlay has no
  // path to it. Ask it (or, after a refusal, a random member) to be a
  // neighbour; the max_degree slack above `degree` makes room.
  std::string target = *smallest;
  if (root_link_refused || tree->IsNeighbour(target)) {
    const size_t live = membership->live_peer_count();
    target = membership->LivePeerName(static_cast<size_t>(rng.Below(live)));
    root_link_refused = false;
  }
  if (!membership->IsAlive(target) || (!tree->IsNeighbour(target) && !tree->AddNeighbour(target))) return;
  SendTree({membership->LiveAddressOf(target), 1}, HelloToWire());
}

void Node::Impl::MaintainOverlay() {
  for (const std::string& name : tree->Neighbours()) {
    if (membership->LiveAddressOf(name) == nullptr) tree->RemoveNeighbour(name);
  }
  const size_t live = membership->live_peer_count();
  // Random picks; a few tries per round are enough (a miss is a pick that is
  // already a neighbour, rare unless the cluster is tiny).
  for (size_t tries = 0; live > 0 && tree->NeedsNeighbours() && tries < 2 * config.tree_degree; ++tries) {
    const size_t pick = static_cast<size_t>(rng.Below(live));
    const std::string& name = membership->LivePeerName(pick);
    if (tree->IsNeighbour(name) || !membership->IsAlive(name) || !tree->AddNeighbour(name)) continue;
    SendTree({&membership->LivePeerAddress(pick), 1}, HelloToWire());
  }
}

void Node::Impl::RecomputeTree() {
  // Recompute reads only the neighbours' beacons and membership's answers:
  // with neither changed since the last run, it would change nothing.
  if (membership->view_version() == tree_seen_view && tree->version() == tree_seen_shape) return;
  tree_seen_view = membership->view_version();
  tree_seen_shape = tree->version();
  const std::string parent = tree->beacon().parent;
  // A suspect parent is left for another path to the same root at once, not
  // when it is declared dead: a crashed parent cuts its subtree off for the
  // whole suspicion timeout (scenario churn, N=100, seed 1: the slowest key
  // reached every node after 15.7 s without this, 3.6 s with it). Suspects
  // stay neighbours (a refuting one is the parent again at once) and a
  // suspect root stays the root: under loss, false suspicions must not
  // reshape the tree (scenario loss30: dropping suspects from the overlay
  // instead converged 3.9 s after the faults, this 0.5 s).
  const bool changed = tree->Recompute(
      [this](const std::string& root) { return root == config.name || membership->LiveAddressOf(root) != nullptr; },
      [this](const std::string& name) { return !membership->IsAlive(name); });
  if (!changed) return;
  beacon_changed = true;
  if (tree->beacon().parent == parent) return;
  Stats([](NodeCounters& s) { ++s.tree_parent_changes; });
  // Whatever the old parent's side pushed while the link was failing is
  // lost to this subtree (a crashed parent never NACKs). Sync with the new
  // parent now rather than at the next anti-entropy run: the repaired bits
  // are this node's own new bits, pushed on down the tree. (Scenario churn,
  // N=100: without it a key took up to 12 s to reach every node.)
  if (const Address* a = membership->LiveAddressOf(tree->beacon().parent); a != nullptr) {
    StartAntiEntropy(Address(*a));
  }
}

wire::TreeBeacon Node::Impl::BeaconToWire() const {
  wire::TreeBeacon w;
  w.set_root(tree->beacon().root);
  w.set_distance(tree->beacon().distance);
  w.set_parent(tree->beacon().parent);
  w.set_features((config.tree_compact_refs ? kTreeFeatureCompactRefs : 0) |
                 (config.tree_implicit_sender ? kTreeFeatureImplicitSender : 0) |
                 (config.tree_compact_refs && config.tree_filter_aliases ? kTreeFeatureFilterAliases : 0) |
                 (config.tree_implicit_sender && config.tree_bare_pushes ? kTreeFeatureBarePushes : 0) |
                 (config.tree_compact_seal ? kTreeFeatureCompactSeal : 0));
  return w;
}

wire::Tree Node::Impl::HelloToWire() const {
  wire::Tree hello;
  hello.set_link(1);
  *hello.mutable_beacon() = BeaconToWire();
  return hello;
}

void Node::Impl::TakeOwnBits() {
  TreeEntry own;
  own.bits = deltas.Take();
  for (const auto& [key, bits] : own.bits) own.words += bits.words.size();
  if (own.words > 0) {
    tree_pending_words += own.words;
    tree_pending.push_back(std::move(own));
    pacing->OnArrival(now);
  }
}

void Node::Impl::TreePush() {
  next_push = Time::max();
  TakeOwnBits();
  if (tree_pending.empty()) return;
  pacing->OnPush(now);
  // Tree links that sent none of the pending entries all get the same
  // bodies, packed once; each of the others gets its own.
  std::vector<std::string> common;
  for (const std::string& name : tree->TreeLinks()) {
    if (membership->LiveAddressOf(name) == nullptr) continue;
    const bool sent_some = std::any_of(tree_pending.begin(), tree_pending.end(),
                                       [&](const TreeEntry& e) { return e.from == name; });
    if (sent_some) {
      PushEntries(&name, {&name, 1});
    } else {
      common.push_back(name);
    }
  }
  PushEntries(nullptr, common);
  tree_pending.clear();
  tree_pending_words = 0;
}

void Node::Impl::PushEntries(const std::string* exclude, std::span<const std::string> links) {
  if (links.empty()) return;
  // Per (filter, sub-filter), the union of the entries' bits. Most keys have
  // one entry (a node's own adds of one push): those are packed from the
  // entry itself; only a key with several is copied into `merged`. Copying
  // every one was most of PushEntries' page faults in a bulk load (perf).
  struct Union {
    uint64_t filter_uid = 0;
    std::span<const crdt::WordBits> words;
    std::vector<crdt::WordBits> merged;
  };
  std::map<DeltaBuffer::Key, Union> unions;
  for (const TreeEntry& e : tree_pending) {
    if (exclude != nullptr && e.from == *exclude) continue;
    for (const auto& [key, bits] : e.bits) {
      // Only the current incarnation's bits: a filter replaced since the
      // entry was buffered must not get its predecessor's bits.
      std::shared_ptr<const FilterState> state = DriverLookup(key.first);
      if (state == nullptr || state->uid != bits.filter_uid || bits.words.empty()) continue;
      Union& u = unions[key];
      u.filter_uid = bits.filter_uid;
      if (u.words.empty()) {
        u.words = bits.words;
        continue;
      }
      if (u.merged.empty()) u.merged.assign(u.words.begin(), u.words.end());
      UnionCanonical(u.merged, bits.words, union_scratch);
      u.words = u.merged;
    }
  }
  GossipPacker packer(GossipBudget() > kTreeWrapperBytes ? GossipBudget() - kTreeWrapperBytes : 1);
  // A filter still announcing its catalog entry here is new: the link may
  // not know it yet, so the entry rides ahead of its bits (packed first,
  // applied first) and the bits are merged on arrival rather than held
  // (HeldDeltas) until gossip brings the entry. Scenario fresh-filters, 20
  // nodes, seeds 1-8: a new filter's first key reached every node in
  // 0.45-0.52 s at the median without this, 0.18-0.24 s with it (as fast
  // as keys of older filters: 0.15-0.26 s).
  std::string last_name;
  for (const auto& [key, u] : unions) {
    const bool announcing = announce_catalog.contains(key.first) || catalog_rounds.contains(key.first);
    if (key.first == last_name || !announcing) continue;
    last_name = key.first;
    std::shared_ptr<const FilterState> state = DriverLookup(key.first);
    wire::CatalogEntry entry;
    ToWire(state->entry, state->set->epoch(), &entry);
    packer.AddCatalog(std::move(entry));
  }
  std::vector<uint64_t> bits_per_delta;
  for (const auto& [key, u] : unions) PackWords(key, u.filter_uid, u.words, packer, &bits_per_delta);
  size_t next_delta = 0;  // the packer keeps the order of deltas
  for (wire::Gossip& body : packer.Take()) {
    uint64_t bits = 0;
    for (int d = 0; d < body.deltas_size(); ++d) bits += bits_per_delta.at(next_delta++);
    auto shared = std::make_shared<const wire::Gossip>(std::move(body));
    for (const std::string& link : links) SendPush(link, delivery->Send(link, shared, bits, now), false);
  }
}

namespace {

void ControlToWire(const PushDelivery::Control& c, wire::Tree& msg) {
  if (c.probe != 0) {
    msg.set_stream(c.stream);
    msg.set_probe(c.probe);
  }
  if (c.ack_stream != 0) {
    msg.set_ack_stream(c.ack_stream);
    msg.set_ack(c.ack);
  }
  for (uint64_t seq : c.nacks) msg.add_nack(seq);
}

}  // namespace

void Node::Impl::SendPush(const std::string& link, const PushDelivery::Numbered& push, bool resend) {
  const Address* address = membership->LiveAddressOf(link);
  if (address == nullptr) return;
  wire::Tree msg;
  *msg.mutable_data() = *push.body;
  // Compact references save 19 of a one-key push's ~157 bytes for a
  // fixed-size filter, ~37 for a scaling one (catalog.h). Not for a filter
  // whose catalog entry is still being announced: the link may not hold it
  // yet (the entry rides in this push).
  // Aliases save ~18 more (filter_aliases.h) once the link has acknowledged
  // a push that defined them.
  if (!resend && compact_ref_links.contains(link)) {
    const bool alias = alias_links.contains(link);
    const uint64_t acked = alias ? delivery->acked(link) : 0;
    for (wire::Delta& delta : *msg.mutable_data()->mutable_deltas()) {
      wire::FilterRef& ref = *delta.mutable_filter();
      if (announce_catalog.contains(ref.name()) || catalog_rounds.contains(ref.name())) continue;
      CompactRef(&ref);
      if (!alias) continue;
      const FilterAliases::Form form =
          aliases.ForPush(link, push.stream, FilterAliases::Target{ref.name(), ref.digest()}, push.seq, acked);
      if (form.alias != 0 && !form.define) ref.Clear();
      ref.set_alias(form.alias);
    }
  }
  msg.set_stream(push.stream);
  msg.set_seq(push.seq);
  ControlToWire(delivery->TakeControl(link, now, true), msg);
  SendTree({address, 1}, msg, PushHeader(link, msg), SealFor(link));
  Stats([&](NodeCounters& s) { s.delta_bits_sent += push.bits; });
}

void Node::Impl::ServiceDelivery() {
  if (membership->left()) {  // no more tree work: nothing stays due
    delivery->Retain({});
    return;
  }
  for (const std::string& link : delivery->Due(now)) {
    const PushDelivery::Control control = delivery->TakeControl(link, now, false);
    const Address* address = membership->LiveAddressOf(link);
    if (control.empty() || address == nullptr) continue;
    wire::Tree msg;
    ControlToWire(control, msg);
    SendTree({address, 1}, msg, implicit_sender_links.contains(link) ? Header::kNoAddress : Header::kFull,
             SealFor(link));
  }
}

void Node::Impl::SendTree(std::span<const Address> peers, const wire::Tree& msg, Header header,
                          protocol::SealForm seal) {
  const std::string plain = SerializeBody(wire::Envelope::kTreeFieldNumber, msg, header);
  SendPlainToAll(peers, plain, BodyIndex(wire::Envelope::kTree), false, seal);
}

Node::Impl::Header Node::Impl::PushHeader(const std::string& link, const wire::Tree& msg) {
  if (!implicit_sender_links.contains(link)) return Header::kFull;
  if (!bare_links.contains(link)) return Header::kNoAddress;
  BareLink& state = bare_state[link];
  if (state.stream != delivery->stream(link)) state = BareLink{delivery->stream(link), 0, Time{}};
  // Bare only as a datagram: the neighbour learns this node's datagram id
  // from named datagrams (a stream frame has an id of its own). 5 bytes: the
  // body's tag and length. A probe stays named, so that a neighbour that
  // lost the id learns it from the probe too.
  const bool bare = delivery->acked(link) > state.named_until && msg.probe() == 0 && !config.tcp_only &&
                    msg.ByteSizeLong() + 5 + FrameCodec::kOverhead <= config.max_datagram_bytes &&
                    now < state.last_named + kNamedPushEvery;
  if (!bare) state.last_named = now;
  return bare ? Header::kBare : Header::kNoAddress;
}

void Node::Impl::AskToNameItself(const Address& from) {
  if (tree == nullptr || !started || membership->left()) return;
  if (auto it = name_asks.find(from); it != name_asks.end() && now < it->second + kNameAskEvery) return;
  if (name_asks.size() >= kMaxNameAsks) {
    std::erase_if(name_asks, [&](const auto& entry) { return now >= entry.second + kNameAskEvery; });
    if (name_asks.size() >= kMaxNameAsks) return;
  }
  name_asks[from] = now;
  wire::Tree name_yourself;
  name_yourself.set_link(3);
  SendTree({&from, 1}, name_yourself);
}

void Node::Impl::OnBareRefused(const std::string& link) {
  // Named until the link acknowledges something past what it has now: a push
  // it attributed (the first named one teaches it our id).
  auto it = bare_state.find(link);
  if (it == bare_state.end() || it->second.stream != delivery->stream(link)) return;
  it->second.named_until = delivery->acked(link);
}

void Node::Impl::NoteSealSender(uint64_t seal_sender, Channel channel, const std::string& name) {
  if (!config.tree_bare_pushes || tree == nullptr || !tree->IsNeighbour(name)) return;
  auto it = seal_senders.find(seal_sender);
  if (it != seal_senders.end()) {
    // Ids are random per boot: two names on one id are two nodes drawing the
    // same number (embedded nodes sharing an rng_seed, which also reuses
    // nonces: NodeConfig::rng_seed). The id attributes nobody from then on.
    if (!it->second.collided && (it->second.name != name || it->second.channel != channel)) {
      Stats([](NodeCounters& s) { ++s.rejected_by_reason["seal_sender_collision"]; });
      it->second.collided = true;
    }
    return;
  }
  // Two ids per neighbour and channel, the newest: a restarted neighbour's
  // new id replaces its old one, and a late frame of its previous boot does
  // not push the new id out.
  auto oldest = seal_senders.end();
  size_t held = 0;
  for (auto e = seal_senders.begin(); e != seal_senders.end(); ++e) {
    if (e->second.name != name || e->second.channel != channel) continue;
    ++held;
    if (oldest == seal_senders.end() || e->second.learned < oldest->second.learned) oldest = e;
  }
  if (held >= 2) seal_senders.erase(oldest);
  // Neighbours dropped since the last prune (TreeRound) may still hold
  // entries: the bound is on the table, not on the neighbours of the moment.
  if (seal_senders.size() >= kMaxSealSenders) return;  // this sender's pushes stay unattributed until then
  seal_senders[seal_sender] = SealSender{name, channel, ++seal_senders_learned};
}

void Node::Impl::HandleTree(const Address& from, const std::string& sender, const wire::Tree& msg) {
  DecodedGossip data;
  const wire::TreeBeacon& b = msg.beacon();
  const bool numbered = msg.seq() != 0 || msg.probe() != 0;
  const bool feedback = msg.ack() != 0 || msg.nack_size() > 0;
  bool numbers_ok = msg.seq() < PushDelivery::kMaxSeq && msg.probe() < PushDelivery::kMaxSeq &&
                    msg.ack() < PushDelivery::kMaxSeq;
  for (int i = 0; i < msg.nack_size(); ++i) {  // ascending, nonzero: no push resent twice for one NACK
    numbers_ok = numbers_ok && msg.nack(i) > (i == 0 ? 0 : msg.nack(i - 1)) && msg.nack(i) < PushDelivery::kMaxSeq;
  }
  const bool control_ok = msg.link() <= 3 && b.distance() <= BroadcastTree::kMaxDistance &&
                          b.root().size() <= Membership::kMaxNameBytes &&
                          b.parent().size() <= Membership::kMaxNameBytes && numbers_ok &&
                          (!numbered || msg.stream() != 0) && (!feedback || msg.ack_stream() != 0) &&
                          static_cast<size_t>(msg.nack_size()) <= PushDelivery::kMaxNacks;
  // Filter aliases become compact references before anything is decoded;
  // what the push defines is learned only once it has decoded (below).
  const wire::Gossip* gossip = &msg.data();
  wire::Gossip expanded;
  FilterAliases::Definitions defined;
  using Expansion = FilterAliases::Expansion;
  Expansion aliased = Expansion::kNone;
  if (control_ok && FilterAliases::HasAlias(msg.data())) {
    expanded = msg.data();
    aliased = aliases.Expand(sender, msg.stream(), msg.seq(), &expanded, &defined);
    gossip = &expanded;
  }
  const bool data_ok =
      control_ok && (aliased == Expansion::kNone || aliased == Expansion::kExpanded) && DecodeGossip(*gossip, &data);
  // A push naming a filter by a compact reference this node cannot resolve
  // (it lacks the filter: restarted empty, joined late, or the filter was
  // replaced), or by an alias it does not know (it restarted, or gave up on
  // the push that defined it), is taken as not received: from a tree
  // neighbour it is NACKed at once and comes again with full references;
  // from anyone else its bits are left to anti-entropy. The rest of the
  // frame (beacon, delivery control) is used as usual. Counted, and a sign
  // of trouble for anti-entropy's interval, but not logged: it repairs itself.
  const bool unresolved = control_ok && !data_ok && msg.seq() != 0 &&
                          (aliased == Expansion::kUnknown || data.unresolved_ref);
  if (!data_ok && !unresolved) {
    Reject(from, "malformed");
    return;
  }
  if (unresolved) {
    ++frame_rejects;  // also keeps the frame from counting as data from the sender (HandleFrame)
    Stats([](NodeCounters& s) { ++s.rejected_by_reason["unresolved_ref"]; });
  }
  // Bits from anyone who holds the key count (the frame is authenticated);
  // the tree changes only for live members, in tree mode.
  const bool linked = tree != nullptr && started && !membership->left() && sender != config.name &&
                      membership->LiveAddressOf(sender) != nullptr;
  if (!linked) {
    if (!unresolved) ApplyGossip(data);  // new bits go to `deltas`: pushed as this node's own
    return;
  }
  if (msg.link() == 3) OnBareRefused(sender);
  if (msg.link() == 2) {
    if (membership->SmallestLivePeer() != nullptr && *membership->SmallestLivePeer() == sender) root_link_refused = true;
    tree->RemoveNeighbour(sender);
    RecomputeTree();
  } else if ((msg.link() == 1 || msg.has_beacon() || numbered) && !tree->IsNeighbour(sender) &&
             membership->IsAlive(sender)) {
    // The sender holds a link this node does not: a hello, or a link this
    // node lost (it restarted, or held the sender dead for a while). Taken
    // at its first frame, not at the sender's next periodic beacon, which
    // may be 40 s away (kMaxBeaconBackoff): a parent that has lost its
    // child's link pushes nothing to that subtree.
    if (tree->AddNeighbour(sender)) {
      beacon_changed = true;  // the new neighbour needs ours, which may not change
      if (msg.link() != 1 && !msg.has_beacon()) {
        // And this node needs the sender's, whose last one it lost: a hello
        // brings it (a child whose beacon names this node gets no pushes
        // until then, and its beacon, unchanged, is backed off).
        SendTree({&from, 1}, HelloToWire());
      }
    } else {
      wire::Tree refuse;  // full: the sender drops this link and picks another
      refuse.set_link(2);
      SendTree({&from, 1}, refuse);
    }
  }
  if (msg.link() == 1 && tree->IsNeighbour(sender)) beacon_changed = true;  // a newcomer needs ours
  if (msg.has_beacon() && tree->IsNeighbour(sender)) {
    // Each wire form goes to the neighbours whose beacon advertises every
    // feature it needs, where this node uses it too.
    auto note = [&](std::set<std::string>& links, bool used, uint32_t needed) {
      if (used && (b.features() & needed) == needed) {
        links.insert(sender);
      } else {
        links.erase(sender);
      }
    };
    note(compact_ref_links, config.tree_compact_refs, kTreeFeatureCompactRefs);
    note(implicit_sender_links, config.tree_implicit_sender, kTreeFeatureImplicitSender);
    note(alias_links, config.tree_compact_refs && config.tree_filter_aliases,
         kTreeFeatureCompactRefs | kTreeFeatureFilterAliases);
    note(bare_links, config.tree_implicit_sender && config.tree_bare_pushes,
         kTreeFeatureImplicitSender | kTreeFeatureBarePushes);
    note(compact_seal_links, config.tree_compact_seal, kTreeFeatureCompactSeal);
    const bool was_child = tree->IsChild(sender);
    tree->OnBeacon(sender, BroadcastTree::Beacon{b.root(), b.distance(), b.parent()});
    RecomputeTree();
    // A new child: what this node pushed between the child's switch and this
    // beacon went to its other links only. Sync now (the child synced when
    // it switched; this covers the gap after). A test with lost beacons and
    // anti-entropy otherwise off left subtrees without 70+ of 100 keys.
    if (!was_child && tree->IsChild(sender)) StartAntiEntropy(from);
  }
  if (tree->IsNeighbour(sender)) {
    if (unresolved) {
      delivery->OnRefused(sender, msg.stream(), msg.seq(), now);
    } else if (msg.seq() != 0) {
      delivery->OnPush(sender, msg.stream(), msg.seq(), now);
      // Not from a late frame of a stream the link has replaced: that would
      // wipe the current stream's numbers.
      if (delivery->rx_stream(sender) == msg.stream()) {
        for (const auto& [alias, target] : defined) aliases.Learn(sender, msg.stream(), alias, target);
      }
    }
    if (msg.probe() != 0) delivery->OnProbe(sender, msg.stream(), msg.probe(), now);
    if (msg.ack_stream() != 0) {
      const std::vector<uint64_t> nacks(msg.nack().begin(), msg.nack().end());
      // A NACK may be for a push whose alias the link could not resolve:
      // define every alias again, under new numbers (filter_aliases.h). Not
      // for a NACK of an earlier stream of ours.
      if (!nacks.empty() && msg.ack_stream() == delivery->stream(sender)) aliases.Forget(sender);
      for (const PushDelivery::Numbered& push : delivery->OnFeedback(sender, msg.ack_stream(), msg.ack(), nacks, now)) {
        SendPush(sender, push, true);
        Stats([](NodeCounters& s) { ++s.tree_resends; });
      }
    }
    if (delivery->NextWakeup() <= now) ServiceDelivery();  // a probe is answered at once
  }
  if (!msg.has_data() || unresolved) return;
  DeltaBuffer captured(kMaxBufferedWords);
  capture = &captured;
  ApplyGossip(data);
  capture = nullptr;
  TreeEntry entry;
  entry.from = sender;
  entry.bits = captured.Take();
  for (const auto& [key, bits] : entry.bits) entry.words += bits.words.size();
  if (entry.words == 0) return;  // nothing new here: nothing to forward
  if (tree_pending_words + entry.words > kMaxBufferedWords) {
    Stats([](NodeCounters& s) { ++s.delta_overflows; });  // anti-entropy repairs
    return;
  }
  tree_pending_words += entry.words;
  tree_pending.push_back(std::move(entry));
  pacing->OnArrival(now);
  SchedulePush();
}

}  // namespace pollen::node
