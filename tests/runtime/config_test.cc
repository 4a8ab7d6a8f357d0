// Config parser: every layer, precedence, and an error naming the option for
// every bad value.
#include "node/runtime/config.h"

#include "crdt/generations.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pollen::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::map<std::string, std::string>* g_env = nullptr;
const char* FakeEnv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { g_env = &env_; }
  void TearDown() override { g_env = nullptr; }
  absl::StatusOr<CommandLine> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "pollend");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return ParseCommandLine(static_cast<int>(argv.size()), argv.data(), &FakeEnv);
  }
  std::string WriteFile(const std::string& text) {
    const std::string path = ::testing::TempDir() + "/pollen_config_test_" + std::to_string(counter_++) + ".conf";
    std::ofstream(path) << text;
    return path;
  }
  std::map<std::string, std::string> env_;
  int counter_ = 0;
};

TEST_F(ConfigTest, DefaultsComeFromTheEmbeddedConfig) {
  auto cl = Parse({});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.gossip_bind, "127.0.0.1:7946");
  EXPECT_EQ(cl->config.resp_bind, "127.0.0.1:6380");
  EXPECT_EQ(cl->config.http_bind, "127.0.0.1:9464");
  EXPECT_EQ(cl->config.appendfsync, AppendFsync::kEverySec);
  EXPECT_EQ(cl->config.gossip_interval, std::chrono::milliseconds(200));
  ASSERT_EQ(cl->config.filters.size(), 1u);
  EXPECT_EQ(cl->config.filters[0].name, "crawl:seen");
  EXPECT_EQ(cl->config.filters[0].capacity, 1000000u);
  EXPECT_EQ(cl->config.filters[0].hash_scheme, crdt::kHashSchemeSipSplit3);  // layout = split
}

TEST_F(ConfigTest, FlagsOverrideEnvironmentOverrideFile) {
  const std::string path = WriteFile("fanout = 4\nprobe-interval = 2s\nnode-name = from-file\n");
  env_["POLLEN_FANOUT"] = "5";
  env_["POLLEN_NODE_NAME"] = "from-env";
  auto cl = Parse({"--config", path, "--fanout=6"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.fanout, 6u);                                  // flag wins
  EXPECT_EQ(cl->config.node_name, "from-env");                        // env beats file
  EXPECT_EQ(cl->config.probe_interval, std::chrono::seconds(2));      // file beats default
  EXPECT_TRUE(cl->config.filters.empty());  // a config file replaces the embedded filters
}

TEST_F(ConfigTest, ConfigPathFromEnvironment) {
  env_["POLLEN_CONFIG"] = WriteFile("fanout = 7\n");
  auto cl = Parse({});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.fanout, 7u);
}

TEST_F(ConfigTest, FilterSections) {
  const std::string path = WriteFile(
      "# comment\n\n[filter crawl:seen]\ncapacity = 5000\nfpr = 0.001\ngenerations = 3\n"
      "rotate-fill = 0.5\nrotate-interval = 1h\n[filter digest:n1]\nscope = digest\nowner = n1\n");
  auto cl = Parse({"--config", path});
  ASSERT_TRUE(cl.ok()) << cl.status();
  ASSERT_EQ(cl->config.filters.size(), 2u);
  const auto& a = cl->config.filters[0];
  EXPECT_EQ(a.name, "crawl:seen");
  EXPECT_EQ(a.capacity, 5000u);
  EXPECT_DOUBLE_EQ(a.fpr, 0.001);
  EXPECT_EQ(a.generations, 3u);
  EXPECT_DOUBLE_EQ(a.rotate_fill, 0.5);
  EXPECT_EQ(a.rotate_interval, std::chrono::hours(1));
  EXPECT_EQ(cl->config.filters[1].scope, node::Scope::kDigest);
  EXPECT_EQ(cl->config.filters[1].owner, "n1");
  // A declared filter keeps the one-block layout unless its section asks
  // for the split one (a node upgraded in place reads what it holds).
  EXPECT_EQ(a.hash_scheme, crdt::kHashSchemeSipBlocked2);
}

TEST_F(ConfigTest, FilterLayoutIsChosenPerSection) {
  auto cl = Parse({"--config", WriteFile("[filter a]\nlayout = split\n[filter b]\nlayout = one-block\n[filter c]\n")});
  ASSERT_TRUE(cl.ok()) << cl.status();
  ASSERT_EQ(cl->config.filters.size(), 3u);
  EXPECT_EQ(cl->config.filters[0].hash_scheme, crdt::kHashSchemeSipSplit3);
  EXPECT_EQ(cl->config.filters[1].hash_scheme, crdt::kHashSchemeSipBlocked2);
  EXPECT_EQ(cl->config.filters[2].hash_scheme, crdt::kHashSchemeSipBlocked2);
  DaemonConfig again;
  ASSERT_TRUE(ApplyConfigText(RenderConfig(cl->config), "rendered", &again).ok());
  ASSERT_EQ(again.filters.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again.filters[i].hash_scheme, cl->config.filters[i].hash_scheme) << i;
  auto bad = Parse({"--config", WriteFile("[filter a]\nlayout = sideways\n")});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("layout"));
}

TEST_F(ConfigTest, RespLatencyTrackingDefaultsOnAndTurnsOff) {
  auto on = Parse({});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->config.resp_latency_tracking);
  auto off = Parse({"--resp-latency-tracking", "false"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->config.resp_latency_tracking);
  EXPECT_FALSE(Parse({"--resp-latency-tracking", "sometimes"}).ok());
}

TEST_F(ConfigTest, HugePagesDefaultOnTurnsOffAndRendersBack) {
  auto on = Parse({});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->config.huge_pages);
  auto off = Parse({"--huge-pages", "false"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->config.huge_pages);
  DaemonConfig again = on->config;
  ASSERT_TRUE(ApplyConfigText(RenderConfig(off->config), "rendered", &again).ok());
  EXPECT_FALSE(again.huge_pages);
  auto bad = Parse({"--huge-pages", "2mb"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("huge-pages"));
}

TEST_F(ConfigTest, TcpOnlyFlagWithoutValue) {
  auto cl = Parse({"--tcp-only"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_TRUE(cl->config.tcp_only);
}

TEST_F(ConfigTest, SeedsAndIpv6) {
  auto cl = Parse({"--seeds", "127.0.0.1:7001, [::1]:7002", "--gossip-bind", "[::1]:7003"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.seeds, (std::vector<std::string>{"127.0.0.1:7001", "[::1]:7002"}));
  EXPECT_EQ(cl->config.gossip_bind, "[::1]:7003");
}

// Every option with a bad value: the error names the option.
TEST_F(ConfigTest, EveryBadFlagValueNamesTheOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"node-name", ""},           {"node-name", "a b"},         {"gossip-bind", "nohost"},
      {"gossip-bind", "1.2.3.4:99999"}, {"advertise", "x:y"},    {"seeds", "a:1,b"},
      {"tcp-only", "maybe"},       {"cluster-label", std::string(65, 'x')},
      {"resp-bind", "localhost"},  {"resp-threads", "0"},        {"resp-threads", "abc"},
      {"resp-busy-poll-us", "-1"}, {"resp-busy-poll-us", "10001"},
      {"resp-max-clients", "-1"},  {"resp-idle-timeout", "5 parsecs"}, {"http-bind", "[::1]"},
      {"appendfsync", "sometimes"}, {"snapshot-interval", "0"},  {"gossip-interval", "1ms"},
      {"fanout", "100"},           {"probe-interval", "1"},      {"probe-timeout", "9999h"},
      {"indirect-probes", "17"},   {"suspicion-multiplier", "0.5"}, {"suspicion-multiplier", "nan"},
      {"anti-entropy-interval", "1ms"}, {"dead-reconnect-interval", "x"}, {"max-datagram-bytes", "100"},
      {"join-timeout", "-1s"},     {"stream-queue-bytes", "10"}, {"log-level", "loud"},
  };
  for (const auto& [opt, value] : bad) {
    auto cl = Parse({"--" + opt + "=" + value});
    ASSERT_FALSE(cl.ok()) << opt << "=" << value;
    EXPECT_THAT(std::string(cl.status().message()), HasSubstr(opt)) << value;
  }
}

TEST_F(ConfigTest, BadEnvironmentValueNamesTheVariableAndOption) {
  env_["POLLEN_FANOUT"] = "zero";
  auto cl = Parse({});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(std::string(cl.status().message()), HasSubstr("POLLEN_FANOUT"));
  EXPECT_THAT(std::string(cl.status().message()), HasSubstr("'fanout'"));
}

TEST_F(ConfigTest, BadFileValuesNameTheLineAndOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"fanout = x\n", "'fanout'"},
      {"\n\nunknown-thing = 1\n", ":3: unknown option 'unknown-thing'"},
      {"no equals sign\n", ":1: expected 'option = value'"},
      {"[filter]\n", ":1: expected a section like [filter NAME]"},
      {"[filter a b]\n", "filter name"},
      {"[filter x\n", "without ']'"},
      {"[filter f]\ncapacity = 0\n", ":2: filter 'f' option 'capacity'"},
      {"[filter f]\nfpr = 1.5\n", "option 'fpr'"},
      {"[filter f]\nfpr = 0\n", "option 'fpr'"},
      {"[filter f]\ngenerations = 99\n", "option 'generations'"},
      {"[filter f]\nscope = global\n", "option 'scope'"},
      {"[filter f]\nrotate-fill = 2\n", "option 'rotate-fill'"},
      {"[filter f]\nrotate-interval = soon\n", "option 'rotate-interval'"},
      {"[filter f]\ncolour = red\n", "option 'colour'"},
      {"[filter f]\n[filter f]\n", "declared twice"},
      {"[filter f]\nscope = digest\n", "digest needs an owner"},
      {"config = other.conf\n", "not allowed in a config file"},
  };
  for (const auto& [text, want] : bad) {
    auto cl = Parse({"--config", WriteFile(text)});
    ASSERT_FALSE(cl.ok()) << text;
    EXPECT_THAT(std::string(cl.status().message()), HasSubstr(want)) << text;
  }
}

TEST_F(ConfigTest, SecretsNeverFromFlags) {
  auto a = Parse({"--secret", "00"});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("never taken from a flag"));
  auto b = Parse({"--resp-password", "hunter2"});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("resp-password"));
  EXPECT_THAT(std::string(b.status().message()), Not(HasSubstr("hunter2")));
  env_["POLLEN_RESP_PASSWORD"] = "hunter2";
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.resp_password, "hunter2");
  EXPECT_THAT(RenderConfig(c->config), Not(HasSubstr("hunter2")));
}

TEST_F(ConfigTest, UnknownFlagAndMissingValue) {
  auto a = Parse({"--frobnicate", "1"});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("--frobnicate"));
  auto b = Parse({"--fanout"});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("--fanout: missing value"));
  auto c = Parse({"positional"});
  ASSERT_FALSE(c.ok());
  auto d = Parse({"--config", "/nonexistent/pollen.conf"});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("option 'config'"));
}

TEST_F(ConfigTest, CrossOptionChecks) {
  auto a = Parse({"--gossip-bind", "0.0.0.0:7946"});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("'advertise'"));
  auto b = Parse({"--gossip-bind", "0.0.0.0:7946", "--advertise", "10.0.0.5:7946"});
  EXPECT_TRUE(b.ok()) << b.status();
  auto c = Parse({"--probe-interval", "1s", "--probe-timeout", "2s"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("probe-timeout"));
  auto d = Parse({"--advertise", "pollen-0.pollen.default.svc:7946"});
  EXPECT_TRUE(d.ok()) << d.status();  // hostnames may be advertised, not bound
  auto e = Parse({"--gossip-bind", "pollen-0:7946"});
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("gossip-bind"));
}

TEST_F(ConfigTest, HelpListsEveryOptionWithDefault) {
  const std::string help = HelpText();
  for (const char* opt : {"--node-name", "--gossip-bind", "--advertise", "--seeds", "--tcp-only", "--secret-file",
                          "--resp-bind", "--http-bind", "--data-dir", "--appendfsync", "--snapshot-interval",
                          "--gossip-interval", "--fanout", "--join-timeout", "--log-level", "resp-password"}) {
    EXPECT_THAT(help, HasSubstr(opt));
  }
  EXPECT_THAT(help, HasSubstr("[everysec]"));
  EXPECT_THAT(help, HasSubstr("[200ms]"));
}

TEST_F(ConfigTest, RenderedConfigParsesBackToTheSameValues) {
  auto cl = Parse({"--fanout", "9", "--seeds", "127.0.0.1:1,127.0.0.1:2"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  DaemonConfig again = cl->config;
  again.fanout = 1;
  ASSERT_TRUE(ApplyConfigText(RenderConfig(cl->config), "rendered", &again).ok());
  EXPECT_EQ(again.fanout, 9u);
  EXPECT_EQ(again.seeds, cl->config.seeds);
  ASSERT_EQ(again.filters.size(), 1u);
  EXPECT_EQ(again.filters[0].name, "crawl:seen");
}

TEST_F(ConfigTest, ShippedExampleConfigParses) {
  auto cl = Parse({"--config", std::string(POLLEN_SOURCE_DIR) + "/ops/pollend.example.conf"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.filters.size(), 2u);
  EXPECT_EQ(cl->config.seeds.size(), 3u);
}

TEST_F(ConfigTest, ProtoMaxBulkLenTakesRedisSizes) {
  auto def = Parse({});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->config.proto_max_bulk_len, uint64_t{32} << 20);
  auto set = Parse({"--proto-max-bulk-len", "64mb"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->config.proto_max_bulk_len, uint64_t{64} << 20);
  EXPECT_NE(RenderConfig(set->config).find("proto-max-bulk-len = 64mb"), std::string::npos);
  for (const char* bad : {"512kb", "513mb", "1tb", "x", ""}) {
    auto cl = Parse({std::string("--proto-max-bulk-len=") + bad});
    ASSERT_FALSE(cl.ok()) << bad;
    EXPECT_NE(std::string(cl.status().message()).find("proto-max-bulk-len"), std::string::npos) << cl.status();
  }
}

TEST(ByteSizeTest, ParseAndFormatAsRedis) {
  EXPECT_EQ(*ParseByteSize("1000"), 1000u);
  EXPECT_EQ(*ParseByteSize("1k"), 1000u);
  EXPECT_EQ(*ParseByteSize("1KB"), 1024u);
  EXPECT_EQ(*ParseByteSize("3m"), 3000000u);
  EXPECT_EQ(*ParseByteSize("512mb"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2g"), 2000000000u);
  EXPECT_EQ(*ParseByteSize("4Gb"), uint64_t{4} << 30);
  for (const char* bad : {"", "mb", "1.5gb", "-1", "1 tb", "10xb", "99999999999999999999", "17179869184gb"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{1000}, uint64_t{1} << 10, uint64_t{3} << 20, uint64_t{5} << 30,
                     (uint64_t{1} << 20) + 1}) {
    EXPECT_EQ(*ParseByteSize(FormatByteSize(v)), v) << FormatByteSize(v);
  }
  EXPECT_EQ(FormatByteSize(uint64_t{32} << 20), "32mb");
}

TEST(DurationTest, ParseAndFormat) {
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("10s"), std::chrono::seconds(10));
  EXPECT_EQ(*ParseDuration("5m"), std::chrono::minutes(5));
  EXPECT_EQ(*ParseDuration("0"), node::Duration(0));
  for (const char* bad : {"", "s", "10", "1.5s", "-1s", "10 s", "10sec", "99999999999999h",
                          "50000000000s", "999999999999h", "876001h"}) {  // over ~100 years: would overflow
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  EXPECT_EQ(*ParseDuration("876000h"), std::chrono::hours(876000));  // 100 years of 365 days
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(std::chrono::minutes(2)), "2m");
}

}  // namespace
}  // namespace pollen::runtime
