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
  MaintainOverlay();
  RecomputeTree();
  if (beacon_changed || now >= next_beacon) {
    if (now >= next_beacon) LinkTowardsTheRoot();
    beacon_changed = false;
    next_beacon = now + config.tree_beacon_interval;
    std::vector<Address> peers;
    for (const std::string& name : tree->Neighbours()) {
      if (const Address* a = membership->LiveAddressOf(name); a != nullptr) peers.push_back(*a);
    }
    wire::Tree beacon;
    *beacon.mutable_beacon() = BeaconToWire();
    SendTree(peers, beacon);
  }
  TreePush();
}

void Node::Impl::LinkTowardsTheRoot() {
  const std::string* smallest = membership->SmallestLivePeer();
  if (smallest == nullptr || !tree->beacon().parent.empty() || *smallest > config.name) return;
  // A root, while a smaller member is live: this side of the overlay has no
  // path to it. Ask it (or, after a refusal, a random member) to be a
  // neighbour; the max_degree slack above `degree` makes room.
  std::string target = *smallest;
  if (root_link_refused || tree->IsNeighbour(target)) {
    const size_t live = membership->live_peer_count();
    target = membership->LivePeerName(static_cast<size_t>(rng.Below(live)));
    root_link_refused = false;
  }
  if (!tree->IsNeighbour(target) && !tree->AddNeighbour(target)) return;
  wire::Tree hello;
  hello.set_link(1);
  *hello.mutable_beacon() = BeaconToWire();
  SendTree({membership->LiveAddressOf(target), 1}, hello);
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
    if (tree->IsNeighbour(name) || !tree->AddNeighbour(name)) continue;
    wire::Tree hello;
    hello.set_link(1);
    *hello.mutable_beacon() = BeaconToWire();
    SendTree({&membership->LivePeerAddress(pick), 1}, hello);
  }
}

void Node::Impl::RecomputeTree() {
  const std::string parent = tree->beacon().parent;
  const bool changed = tree->Recompute([this](const std::string& root) {
    return root == config.name || membership->LiveAddressOf(root) != nullptr;
  });
  if (!changed) return;
  beacon_changed = true;
  if (tree->beacon().parent != parent) Stats([](NodeCounters& s) { ++s.tree_parent_changes; });
}

wire::TreeBeacon Node::Impl::BeaconToWire() const {
  wire::TreeBeacon w;
  w.set_root(tree->beacon().root);
  w.set_distance(tree->beacon().distance);
  w.set_parent(tree->beacon().parent);
  return w;
}

void Node::Impl::TreePush() {
  next_push = Time::max();
  // This node's own new bits: client adds, anti-entropy repairs, and bits
  // from frames that were not tree pushes.
  TreeEntry own;
  own.bits = deltas.Take();
  for (const auto& [key, bits] : own.bits) own.words += bits.words.size();
  if (own.words > 0) {
    tree_pending_words += own.words;
    tree_pending.push_back(std::move(own));
  }
  if (tree_pending.empty()) return;
  // Tree links that sent none of the pending entries all get the same
  // frames, sealed once; each of the others gets its own.
  std::vector<Address> common;
  for (const std::string& name : tree->TreeLinks()) {
    const Address* address = membership->LiveAddressOf(name);
    if (address == nullptr) continue;
    const bool sent_some = std::any_of(tree_pending.begin(), tree_pending.end(),
                                       [&](const TreeEntry& e) { return e.from == name; });
    if (sent_some) {
      PushEntries(&name, {address, 1});
    } else {
      common.push_back(*address);
    }
  }
  PushEntries(nullptr, common);
  tree_pending.clear();
  tree_pending_words = 0;
}

void Node::Impl::PushEntries(const std::string* exclude, std::span<const Address> peers) {
  if (peers.empty()) return;
  std::map<DeltaBuffer::Key, DeltaBuffer::Bits> unions;
  std::vector<crdt::WordBits> scratch;
  for (const TreeEntry& e : tree_pending) {
    if (exclude != nullptr && e.from == *exclude) continue;
    for (const auto& [key, bits] : e.bits) {
      // Only the current incarnation's bits: a filter replaced since the
      // entry was buffered must not get its predecessor's bits.
      std::shared_ptr<const FilterState> state = DriverLookup(key.first);
      if (state == nullptr || state->uid != bits.filter_uid) continue;
      DeltaBuffer::Bits& u = unions[key];
      u.filter_uid = bits.filter_uid;
      UnionCanonical(u.words, bits.words, scratch);
    }
  }
  GossipPacker packer(GossipBudget() - kTreeWrapperBytes);
  uint64_t bits = 0;
  for (const auto& [key, u] : unions) bits += PackWords(key, u.filter_uid, u.words, packer);
  for (wire::Gossip& body : packer.Take()) {
    wire::Tree push;
    *push.mutable_data() = std::move(body);
    SendTree(peers, push);
  }
  Stats([&](NodeCounters& s) { s.delta_bits_sent += bits * peers.size(); });
}

void Node::Impl::SendTree(std::span<const Address> peers, const wire::Tree& msg) {
  const std::string plain = SerializeBody(wire::Envelope::kTreeFieldNumber, msg);
  SendPlainToAll(peers, plain, BodyIndex(wire::Envelope::kTree), false);
}

void Node::Impl::HandleTree(const Address& from, const std::string& sender, const wire::Tree& msg) {
  DecodedGossip data;
  const wire::TreeBeacon& b = msg.beacon();
  const bool ok = msg.link() <= 2 && b.distance() <= BroadcastTree::kMaxDistance &&
                  b.root().size() <= Membership::kMaxNameBytes &&
                  b.parent().size() <= Membership::kMaxNameBytes && DecodeGossip(msg.data(), &data);
  if (!ok) {
    Reject(from, "malformed");
    return;
  }
  // Bits from anyone who holds the key count (the frame is authenticated);
  // the tree changes only for live members, in tree mode.
  const bool linked = tree != nullptr && started && !membership->left() && sender != config.name &&
                      membership->LiveAddressOf(sender) != nullptr;
  if (!linked) {
    ApplyGossip(data);  // new bits go to `deltas`: pushed as this node's own
    return;
  }
  if (msg.link() == 2) {
    if (membership->SmallestLivePeer() != nullptr && *membership->SmallestLivePeer() == sender) root_link_refused = true;
    tree->RemoveNeighbour(sender);
    RecomputeTree();
  } else if ((msg.link() == 1 || msg.has_beacon()) && !tree->IsNeighbour(sender) && !tree->AddNeighbour(sender)) {
    wire::Tree refuse;  // full: the sender drops this link and picks another
    refuse.set_link(2);
    SendTree({&from, 1}, refuse);
  }
  if (msg.link() == 1 && tree->IsNeighbour(sender)) beacon_changed = true;  // a newcomer needs ours
  if (msg.has_beacon() && tree->IsNeighbour(sender)) {
    tree->OnBeacon(sender, BroadcastTree::Beacon{b.root(), b.distance(), b.parent()});
    RecomputeTree();
  }
  if (!msg.has_data()) return;
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
  SchedulePush();
}

}  // namespace pollen::node
