// Fuzzes Node::HandleDatagram / HandleStreamFrame / Tick with sequences of
// frames from an authenticated peer (the harness holds the cluster key).
//
// Stateless per input, so every crash replays from the input libFuzzer writes:
// each input builds a fresh node and feeds it up to kMaxSteps steps, each
//   [mode: 1 byte][length: 1 byte; 255 = the rest of the input][payload]
// where the mode picks what the payload becomes:
//   0: raw bytes as a datagram          1: raw bytes as a stream frame
//   2: bytes sealed validly (garbage plaintext reaches the Envelope parser)
//   3..254: a valid envelope of some type with the payload overlaid on its
//       encoding (first payload byte: the offset), sealed validly, so the
//       per-message validation is reached
//   255: advance the clock by payload[0] * 100 ms and Tick (gossip, probes,
//       anti-entropy, rotation timers).
// Checks after every step: no crash or sanitizer report; a frame the node
// counted as rejected changed no digest; and invariant 5 as docs/design.md
// words it: within one incarnation of a filter its epoch never goes down, and
// a new incarnation comes only with a kFilterDiscarded event and a
// filters_replaced count; and invariant 6: the filter disappears only with a
// kFilterDeleted event and a tombstone, and no live entry is one a tombstone
// covers.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "node/core/anti_entropy.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "node/core/node.h"
#include "protocol/seal.h"
#include "protocol/wire.pb.h"

namespace {

using namespace pollen;

crdt::ClusterSecret Secret() {
  crdt::ClusterSecret s;
  for (int i = 0; i < 32; ++i) s.bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  return s;
}

node::FilterConfig Filter() {
  node::FilterConfig f;
  f.name = "f";
  f.capacity = 2000;
  f.fpr = 0.01;
  return f;
}

std::vector<std::string> Templates() {
  auto entry = node::MakeCatalogEntry(Filter(), Secret(), 0, "");
  if (!entry.ok()) std::abort();
  const crdt::FilterParams& p = entry->params;
  std::vector<std::string> out;
  auto finish = [&](wire::Envelope env) {
    env.set_version(1);
    env.set_sender_name("fuzzer");
    env.set_sender_address("addr-fuzz");
    out.push_back(env.SerializeAsString());
  };
  {
    wire::Envelope env;
    node::ToWire(p, env.mutable_delta()->mutable_filter());
    env.mutable_delta()->set_epoch(1);
    std::vector<crdt::WordBits> words = {{3, 0x11}, {90, 0x8000}};
    env.mutable_delta()->set_positions(node::EncodeWords(words, 0, p.shape.bits()));
    finish(env);
  }
  {
    wire::Envelope env;
    wire::FilterRanges* fr = env.mutable_sync_ranges()->add_filters();
    env.mutable_sync_ranges()->set_reply(true);
    node::ToWire(p, fr->mutable_filter());
    wire::GenerationRanges* g = fr->add_generations();
    g->set_blocks_per_range(node::BlocksPerRange(p.shape.blocks));
    g->add_wanted(0);
    std::vector<crdt::WordBits> words = {{1, 0xf0}};
    g->add_data()->set_positions(node::EncodeWords(words, 0, node::BlocksPerRange(p.shape.blocks) * 512));
    finish(env);
  }
  {
    wire::Envelope env;
    wire::FilterSummary* fs = env.mutable_sync_request()->add_filters();
    node::ToWire(p, fs->mutable_filter());
    wire::GenerationSummary* g = fs->add_generations();
    g->set_blocks_per_range(node::BlocksPerRange(p.shape.blocks));
    const uint64_t bpr = node::BlocksPerRange(p.shape.blocks);
    for (uint64_t r = 0; r < (p.shape.blocks + bpr - 1) / bpr; ++r) g->add_summaries(r);
    env.mutable_sync_request()->set_complete(true);
    finish(env);
    // ... a digest (the first leg), then a descent leg listing two groups
    g->clear_summaries();
    g->set_level(node::kDigestLevel);
    g->add_summaries(0x1234);
    finish(env);
    g->clear_summaries();
    g->set_level(1);
    g->add_items(0);
    g->add_items(1);
    g->add_summaries(5);
    g->add_summaries(6);
    env.mutable_sync_request()->set_partial(true);
    env.mutable_sync_request()->set_complete(false);
    finish(env);
    // ... a block-hash leg: every block of ranges 0 and 1, cut by the budget
    g->clear_summaries();
    g->clear_items();
    g->set_level(0);
    g->set_blocks(true);
    g->set_salt(99);
    for (uint64_t r : {0, 1}) {
      g->add_items(r);
      for (uint64_t b = 0; b < node::BlocksInRange(p.shape.blocks, r); ++b) g->add_block_hashes(static_cast<uint32_t>(b));
    }
    env.mutable_sync_request()->set_more(true);
    finish(env);
  }
  {  // contents of some blocks of a range (the answer to block hashes)
    wire::Envelope env;
    wire::FilterRanges* fr = env.mutable_sync_ranges()->add_filters();
    env.mutable_sync_ranges()->set_reply(true);
    env.mutable_sync_ranges()->set_more(true);
    node::ToWire(p, fr->mutable_filter());
    wire::GenerationRanges* g = fr->add_generations();
    g->set_blocks_per_range(node::BlocksPerRange(p.shape.blocks));
    g->add_wanted(2);
    wire::RangeData* data = g->add_data();
    data->set_range(2);
    const uint64_t bpr = node::BlocksPerRange(p.shape.blocks);
    std::vector<crdt::WordBits> words = {{2 * bpr * 8 + 1, 0xf0}};
    data->set_positions(node::EncodeWords(words, 2 * bpr * 512, bpr * 512));
    data->set_blocks(std::string(1, '\x01'));
    finish(env);
    // ... and a leg whose sender kept the rest for a resume
    env.mutable_sync_ranges()->set_resumable(true);
    finish(env);
  }
  {  // a resume: go on with the content leg cut last (kept or not)
    wire::Envelope env;
    env.mutable_sync_request()->set_resume(true);
    finish(env);
  }
  {
    wire::Envelope env;
    node::ToWire(*entry, 2, env.mutable_catalog()->add_entries());
    finish(env);
  }
  {  // a deletion of f, then an entry of f created after it (stamp 1000)
    wire::Envelope env;
    wire::Tombstone* t = env.mutable_catalog()->add_tombstones();
    t->set_name("f");
    t->set_deleted_through(0);
    auto later = node::MakeCatalogEntry(Filter(), Secret(), 1000, "fuzzer");
    if (!later.ok()) std::abort();
    node::ToWire(*later, 1, env.mutable_catalog()->add_entries());
    finish(env);
  }
  {
    wire::Envelope env;
    wire::FilterEpoch* fe = env.mutable_epochs()->add_epochs();
    node::ToWire(p, fe->mutable_filter());
    fe->set_epoch(3);
    finish(env);
  }
  {  // a packed gossip round: catalog, epoch and two deltas in one frame
    wire::Envelope env;
    wire::Gossip* g = env.mutable_gossip();
    node::ToWire(*entry, 1, g->add_catalog());
    wire::FilterEpoch* fe = g->add_epochs();
    node::ToWire(p, fe->mutable_filter());
    fe->set_epoch(2);
    for (uint64_t epoch : {1, 2}) {
      wire::Delta* d = g->add_deltas();
      node::ToWire(p, d->mutable_filter());
      d->set_epoch(epoch);
      std::vector<crdt::WordBits> words = {{5, 0x3}, {40, 0x100}};
      d->set_positions(node::EncodeWords(words, 0, p.shape.bits()));
    }
    finish(env);
  }
  {  // a tree push with a beacon and a neighbour request (tree dissemination)
    wire::Envelope env;
    wire::Tree* t = env.mutable_tree();
    t->set_link(1);
    t->mutable_beacon()->set_root("a-root");
    t->mutable_beacon()->set_distance(2);
    t->mutable_beacon()->set_parent("a-parent");
    wire::Delta* d = t->mutable_data()->add_deltas();
    node::ToWire(p, d->mutable_filter());
    std::vector<crdt::WordBits> words = {{7, 0x5}};
    d->set_positions(node::EncodeWords(words, 0, p.shape.bits()));
    finish(env);
    // ... numbered, asking for an ack, with feedback on the receiver's stream
    t->set_stream(77);
    t->set_seq(3);
    t->set_probe(3);
    t->set_ack_stream(91);
    t->set_ack(5);
    t->add_nack(7);
    finish(env);
    // ... naming the filter by a compact reference that defines an alias
    // (filter_aliases.h), then by the alias alone
    node::CompactRef(d->mutable_filter());
    d->mutable_filter()->set_alias(1);
    finish(env);
    d->mutable_filter()->Clear();
    d->mutable_filter()->set_alias(1);
    t->set_seq(4);
    finish(env);
  }
  {  // owner routing: a request to decide keys, and a reply to one
    wire::Envelope env;
    wire::RouteAdd* r = env.mutable_route_add();
    r->set_id(11);
    node::ToWire(p, r->mutable_filter());
    r->add_keys("url-1");
    r->add_keys("url-2");
    finish(env);
    r->set_stand_in(true);
    finish(env);
    wire::Envelope reply;
    reply.mutable_route_reply()->set_id(11);
    reply.mutable_route_reply()->set_added(std::string(1, '\x01'));
    reply.mutable_route_reply()->set_full(std::string(1, '\x00'));
    finish(reply);
  }
  {  // WAIT's push and the quorum EXISTS's question, and a reply
    wire::Envelope env;
    wire::KeyCheck* k = env.mutable_key_check();
    k->set_id(12);
    node::ToWire(p, k->mutable_filter());
    k->add_keys("url-1");
    k->set_add(true);
    finish(env);
    k->set_add(false);
    finish(env);
    wire::Envelope reply;
    reply.mutable_key_check_reply()->set_id(12);
    reply.mutable_key_check_reply()->set_held(std::string(1, '\x01'));
    finish(reply);
  }
  return out;
}

constexpr size_t kMaxSteps = 16;

// `tree`: tree dissemination (the fuzzer is no member, so its tree frames
// reach validation and the merge, not the overlay; tests/node covers that).
std::unique_ptr<node::Node> FreshNode(bool tree) {
  node::NodeConfig c;
  if (tree) c.dissemination = node::NodeConfig::Dissemination::kTree;
  c.name = "target";
  c.advertise = "addr-target";
  c.secret = Secret();
  c.cluster_label = "fuzz";
  c.filters = {Filter()};
  auto n = node::Node::Create(c);
  if (!n.ok()) std::abort();
  (*n)->Start(node::Time(0));
  return *std::move(n);
}

// One step's frame from its mode and payload (mode 255 is handled by the caller).
std::string MakeFrame(const protocol::Keyring& ring, uint64_t& counter, uint8_t mode, std::string_view payload) {
  static const std::vector<std::string> templates = Templates();
  if (mode == 0 || mode == 1) return std::string(payload);
  if (mode == 2) return protocol::Seal(ring, "fuzz", 77, ++counter, payload);
  std::string plain = templates[mode % templates.size()];
  // Overlay: the payload's first byte picks an offset, the rest overwrite.
  if (!payload.empty()) {
    size_t at = static_cast<uint8_t>(payload[0]) % plain.size();
    for (size_t i = 1; i < payload.size(); ++i, ++at) {
      if (at < plain.size()) {
        plain[at] = payload[i];
      } else {
        plain.push_back(payload[i]);
      }
    }
  }
  return protocol::Seal(ring, "fuzz", 77, ++counter, plain);
}

uint64_t Rejected(const node::NodeCounters& c) {
  uint64_t n = 0;
  for (const auto& [reason, count] : c.rejected_by_reason) {
    if (reason != "params") n += count;  // "params" refusals are per item, not per frame
  }
  return n;
}

std::vector<uint64_t> Digests(node::Node& n) {
  std::vector<uint64_t> out;
  for (const node::FilterInfo& f : n.Filters()) {
    out.push_back(f.epoch);
    for (const node::GenerationInfo& g : f.generations) out.push_back(g.digest);
  }
  return out;
}

uint64_t CountOf(const std::vector<node::Event>& events, node::Event::Kind kind) {
  uint64_t n = 0;
  for (const node::Event& e : events) n += e.kind == kind && e.subject == "f";
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<node::Node> target = FreshNode(size % 2 == 1);
  const protocol::Keyring ring(protocol::DeriveGossipKey(Secret()));
  uint64_t counter = 0;
  node::Time now(0);
  auto info = target->Info("f");
  if (!info.ok()) std::abort();
  uint64_t incarnation = info->incarnation, max_epoch = info->epoch;
  bool present = true;
  size_t at = 0;
  for (size_t step = 0; step < kMaxSteps && at + 2 <= size; ++step) {
    const uint8_t mode = data[at];
    const size_t length = data[at + 1] == 255 ? size - at - 2 : std::min<size_t>(data[at + 1], size - at - 2);
    const std::string_view payload(reinterpret_cast<const char*>(data + at + 2), length);
    at += 2 + length;

    const std::vector<uint64_t> before = Digests(*target);
    const uint64_t rejected = Rejected(target->Counters());
    const uint64_t replaced = target->Counters().filters_replaced;
    if (mode == 255) {
      now += std::chrono::milliseconds(100) * (payload.empty() ? 1 : static_cast<uint8_t>(payload[0]));
      target->Tick(now);
    } else if (mode == 1) {
      target->HandleStreamFrame("addr-fuzz", MakeFrame(ring, counter, mode, payload), now);
    } else {
      target->HandleDatagram("addr-fuzz", MakeFrame(ring, counter, mode, payload), now);
    }
    if (Rejected(target->Counters()) != rejected && Digests(*target) != before) std::abort();  // rejected yet changed
    const std::vector<node::Event> events = target->TakeEvents();
    const uint64_t discarded = CountOf(events, node::Event::Kind::kFilterDiscarded);
    const uint64_t deleted = CountOf(events, node::Event::Kind::kFilterDeleted);
    (void)target->TakeOutgoing();
    const auto tombstones = target->Tombstones();
    info = target->Info("f", node::InfoParts::kEpochsOnly);
    if (!info.ok()) {
      // Only a tombstone removes a filter, and says so (invariant 6).
      if (present && (deleted == 0 || tombstones.count("f") == 0)) std::abort();
      present = false;
      continue;
    }
    if (tombstones.count("f") > 0 && info->stamp <= tombstones.at("f")) std::abort();  // a deleted entry is live
    if (!present || deleted > 0) {  // created again after a deletion: a new filter, tracked afresh
      if (info->incarnation == incarnation) std::abort();  // a deletion leaves no incarnation behind
      present = true;
      incarnation = info->incarnation;
      max_epoch = info->epoch;
      continue;
    }
    if (info->incarnation == incarnation) {
      if (info->epoch < max_epoch) std::abort();  // within an incarnation, epochs never go back
    } else if (discarded == 0 || target->Counters().filters_replaced == replaced) {
      std::abort();  // a replacement is always reported and counted
    }
    incarnation = info->incarnation;
    max_epoch = info->epoch;
  }
  return 0;
}
