// Fuzzes Node::HandleDatagram / HandleStreamFrame with arbitrary frames.
// The first input byte picks a mode:
//   0: raw bytes as a datagram          1: raw bytes as a stream frame
//   2: bytes sealed validly (garbage plaintext reaches the Envelope parser)
//   3+: a valid envelope of some type with the input overlaid on its encoding,
//       sealed validly, so the per-message validation is reached.
// Checks: no crash or sanitizer report, epochs never go back, and a frame the
// node counted as rejected changed no digest.
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
  }
  {
    wire::Envelope env;
    node::ToWire(*entry, 2, env.mutable_catalog()->add_entries());
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
  return out;
}

struct State {
  std::unique_ptr<node::Node> node;
  protocol::Keyring ring{protocol::DeriveGossipKey(Secret())};
  uint64_t counter = 0;
  std::vector<std::string> templates = Templates();
  uint64_t max_epoch = 0;
};

State& Get() {
  static State* state = [] {
    auto s = new State;
    node::NodeConfig c;
    c.name = "target";
    c.advertise = "addr-target";
    c.secret = Secret();
    c.cluster_label = "fuzz";
    c.filters = {Filter()};
    auto n = node::Node::Create(c);
    if (!n.ok()) std::abort();
    s->node = *std::move(n);
    s->node->Start(node::Time(0));
    return s;
  }();
  return *state;
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State& s = Get();
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string frame;
  bool stream = true;
  if (mode == 0 || mode == 1) {
    frame = input;
    stream = mode == 1;
  } else if (mode == 2) {
    frame = protocol::Seal(s.ring, "fuzz", 77, ++s.counter, input);
  } else {
    std::string plain = s.templates[mode % s.templates.size()];
    // Overlay: the input's first byte picks an offset, the rest overwrite.
    if (!input.empty() && !plain.empty()) {
      size_t at = static_cast<uint8_t>(input[0]) % plain.size();
      for (size_t i = 1; i < input.size(); ++i, ++at) {
        if (at < plain.size()) {
          plain[at] = input[i];
        } else {
          plain.push_back(input[i]);
        }
      }
    }
    frame = protocol::Seal(s.ring, "fuzz", 77, ++s.counter, plain);
  }
  const std::vector<uint64_t> before = Digests(*s.node);
  const uint64_t rejected = Rejected(s.node->Counters());
  if (stream) {
    s.node->HandleStreamFrame("addr-fuzz", frame, node::Time(0));
  } else {
    s.node->HandleDatagram("addr-fuzz", frame, node::Time(0));
  }
  if (Rejected(s.node->Counters()) != rejected && Digests(*s.node) != before) std::abort();  // rejected yet changed
  auto info = s.node->Info("f");
  if (info.ok()) {
    if (info->epoch < s.max_epoch) std::abort();  // epochs never go back
    s.max_epoch = info->epoch;
  }
  (void)s.node->TakeOutgoing();
  (void)s.node->TakeEvents();
  return 0;
}
