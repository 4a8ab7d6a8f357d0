// Uses an installed Pollen the way an embedding service would: a bare
// generation set from crdt/, and an in-process node from node/core. Exits 0
// only if every added key reads present and a key never added reads absent
// in both.
#include <cstdio>
#include <string>

#include "crdt/generations.h"
#include "node/core/node.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "pollen_consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  pollen::crdt::ClusterSecret secret;
  secret.bytes.fill(42);

  auto params = pollen::crdt::MakeParams("consumer:test", 10000, 0.01, 2, secret);
  if (!params.ok()) return Fail("MakeParams failed");
  auto set = pollen::crdt::GenerationSet::Create(*params, secret, 0);
  if (!set.ok()) return Fail("GenerationSet::Create failed");
  for (int i = 0; i < 1000; ++i) (*set)->Add("key-" + std::to_string(i));
  for (int i = 0; i < 1000; ++i) {
    if (!(*set)->MightContain("key-" + std::to_string(i))) return Fail("false negative in the generation set");
  }
  if ((*set)->MightContain("never-added")) return Fail("unexpected hit in the generation set");

  pollen::node::NodeConfig config;
  config.name = "embedded";
  config.advertise = "embedded";
  config.secret = secret;
  auto node = pollen::node::Node::Create(config);
  if (!node.ok()) return Fail("Node::Create failed");
  pollen::node::FilterConfig filter;
  filter.name = "consumer:seen";
  filter.capacity = 10000;
  if (!(*node)->Reserve(filter, pollen::node::Time(0)).ok()) return Fail("Reserve failed");
  auto added = (*node)->Add("consumer:seen", "https://example.com/");
  if (!added.ok() || !*added) return Fail("Add failed");
  auto present = (*node)->Exists("consumer:seen", "https://example.com/");
  if (!present.ok() || !*present) return Fail("added key reads absent");
  auto absent = (*node)->Exists("consumer:seen", "https://example.com/never");
  if (!absent.ok() || *absent) return Fail("key never added reads present");
  std::printf("pollen_consumer: ok\n");
  return 0;
}
