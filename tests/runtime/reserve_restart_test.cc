// Multi-process: filters created at run time survive SIGKILL before any
// snapshot, with their parameters. A filter reserved (BF.RESERVE, non-default
// parameters) at a node with a data dir under appendfsync always, and a filter
// reserved at a peer and only learned by gossip, both come back after a
// SIGKILL with the same BF.INFO / POLLEN.FILTERS parameters and every
// acknowledged key, first isolated from the cluster (so everything comes from
// disk), then in the cluster without a catalog conflict (no node discards a
// filter).
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "tests/runtime/cluster_fixture.h"

namespace pollen::testing {
namespace {

std::string Value(const RespReply& r) {
  return r.type == RespReply::kInteger ? std::to_string(r.integer) : r.str;
}

// POLLEN.FILTERS entry of `filter` as field -> value (empty if absent).
std::map<std::string, std::string> FilterFields(Pollend& n, const std::string& filter) {
  RespClient c = n.Client();
  RespReply r = c.Command({"POLLEN.FILTERS"});
  std::map<std::string, std::string> fields;
  if (r.type != RespReply::kArray) return fields;
  for (const RespReply& f : r.elements) {
    std::map<std::string, std::string> m;
    for (size_t i = 0; i + 1 < f.elements.size(); i += 2) m[f.elements[i].str] = Value(f.elements[i + 1]);
    if (m["name"] == filter) return m;
  }
  return fields;
}

// The parameters that must survive a restart (not the fill or estimates).
std::map<std::string, std::string> Params(Pollend& n, const std::string& filter) {
  std::map<std::string, std::string> all = FilterFields(n, filter), out;
  for (const char* key : {"name", "scope", "capacity", "fpr", "generations", "blocks", "k", "memory_bytes",
                          "rotate_fill"}) {
    if (all.count(key)) out[key] = all[key];
  }
  return out;
}

long long InfoCapacity(Pollend& n, const std::string& filter) {
  RespClient c = n.Client();
  RespReply r = c.Command({"BF.INFO", filter, "CAPACITY"});
  if (r.type != RespReply::kArray || r.elements.size() != 1) return -1;
  return r.elements[0].integer;
}

TEST_F(ClusterTest, ReservedFiltersKeepTheirParametersAcrossSigkill) {
  Pollend& n1 = AddNode(-1);
  StartAndWaitReady(n1);
  const std::string data = MakeTempDir("reserve");
  // A snapshot interval far beyond the test: only the add log survives.
  const std::vector<std::string> persist = {"--data-dir", data, "--appendfsync", "always", "--snapshot-interval",
                                            "1h"};
  std::vector<std::string> flags = {"--seeds", n1.ports().gossip_addr()};
  flags.insert(flags.end(), persist.begin(), persist.end());
  Pollend& n2 = AddNode(-1, flags);
  StartAndWaitReady(n2);

  // "local:f" reserved at n2 itself; "remote:f" reserved at n1 and learned by n2.
  {
    RespClient c2 = n2.Client();
    ASSERT_EQ(c2.Command({"BF.RESERVE", "local:f", "0.001", "5000", "NONSCALING"}).str, "OK");
    RespClient c1 = n1.Client();
    ASSERT_EQ(c1.Command({"BF.RESERVE", "remote:f", "0.02", "3000"}).str, "OK");
  }
  ASSERT_TRUE(WaitFor([&] { return !Params(n2, "remote:f").empty(); }, kConvergeTimeout));
  const auto local_params = Params(n2, "local:f");
  const auto remote_params = Params(n2, "remote:f");
  ASSERT_EQ(local_params.at("capacity"), "5000");
  ASSERT_EQ(remote_params.at("capacity"), "3000");
  ASSERT_EQ(remote_params, Params(n1, "remote:f"));

  const auto local_keys = Keys("local", 150), remote_keys = Keys("remote", 150);
  AddAll(n2, "local:f", local_keys);
  AddAll(n2, "remote:f", remote_keys);
  n2.Kill(SIGKILL);
  EXPECT_EQ(n2.WaitExit(std::chrono::seconds(30)), -1);  // killed by the signal

  // Restart isolated (another cluster label: peers' frames fail to open), so
  // the filters and keys can only come from n2's own log.
  std::vector<std::string> isolated = {"--cluster-label", "isolated"};
  isolated.insert(isolated.end(), persist.begin(), persist.end());
  n2.set_extra(isolated);
  StartAndWaitReady(n2);
  EXPECT_EQ(Params(n2, "local:f"), local_params);
  EXPECT_EQ(Params(n2, "remote:f"), remote_params);
  EXPECT_EQ(InfoCapacity(n2, "local:f"), 5000);
  EXPECT_EQ(InfoCapacity(n2, "remote:f"), 3000);
  EXPECT_TRUE(AllPresent(n2, "local:f", local_keys));
  EXPECT_TRUE(AllPresent(n2, "remote:f", remote_keys));
  n2.Kill(SIGKILL);
  n2.WaitExit(std::chrono::seconds(30));

  // Back in the cluster: the recovered entries are the originals (same stamp
  // and creator), so nothing conflicts and nothing is discarded anywhere.
  n2.set_extra(flags);
  StartAndWaitReady(n2);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, "local:f", local_keys); }, kConvergeTimeout));
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, "remote:f", remote_keys); }, kConvergeTimeout));
  EXPECT_EQ(Params(n1, "local:f"), local_params);
  EXPECT_EQ(Params(n1, "remote:f"), remote_params);
  EXPECT_EQ(Params(n2, "local:f"), local_params);
  EXPECT_EQ(Params(n2, "remote:f"), remote_params);
  for (Pollend* n : {&n1, &n2}) {
    const std::string log = TailFile(n->log_path(), 1 << 20);
    EXPECT_EQ(log.find("filter discarded"), std::string::npos) << n->log_path();
    EXPECT_EQ(log.find("merge refused"), std::string::npos) << n->log_path();
  }
}

}  // namespace
}  // namespace pollen::testing
