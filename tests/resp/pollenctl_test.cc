// pollenctl against an in-process RespServer with a real Node: output, --json
// (validated by python's json module) and exit codes.
#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "tests/resp/server_test_util.h"

namespace pollen::resp {
namespace {

using testing::RunCommand;
using testing::ServerFixture;

testing::ProcessResult Ctl(const ServerFixture& s, const std::string& args, const std::string& env = "") {
  return RunCommand(env + " " POLLENCTL_PATH " --port " + std::to_string(s.port()) + " " + args, 60);
}

bool ValidJson(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/pollenctl_json.txt";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return RunCommand("/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' " + path).exit_code == 0;
}

TEST(Pollenctl, AddExistsAndExitCodes) {
  ServerFixture s;
  auto r = Ctl(s, "add crawl a b");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "added    a\nadded    b\n");
  r = Ctl(s, "add crawl a");
  EXPECT_EQ(r.output, "present  a\n");
  r = Ctl(s, "exists crawl a b");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "yes  a\nyes  b\n");
  r = Ctl(s, "exists crawl a never");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "yes  a\nno   never\n");
  EXPECT_EQ(Ctl(s, "exists nofilter x").exit_code, 1);
  r = Ctl(s, "--json exists crawl a never");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(ValidJson(r.output)) << r.output;
  EXPECT_NE(r.output.find("{\"key\":\"never\",\"exists\":false}"), std::string::npos) << r.output;
  r = Ctl(s, "-- add crawl --dashed");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "added    --dashed\n");
}

TEST(Pollenctl, StatusMembersFiltersRotate) {
  ServerFixture s;
  ASSERT_EQ(Ctl(s, "add f x").exit_code, 0);
  auto r = Ctl(s, "status");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("node: node-a\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("filters: 1\n"), std::string::npos) << r.output;
  for (const char* cmd : {"--json status", "--json members", "--json filters"}) {
    r = Ctl(s, cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_TRUE(ValidJson(r.output)) << cmd << ": " << r.output;
  }
  EXPECT_NE(Ctl(s, "--json filters").output.find("\"name\":\"f\""), std::string::npos);
  r = Ctl(s, "members");
  EXPECT_EQ(r.output.rfind("NAME", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("node-a"), std::string::npos);
  EXPECT_NE(r.output.find("alive"), std::string::npos);
  r = Ctl(s, "filters");
  EXPECT_NE(r.output.find("f  "), std::string::npos) << r.output;
  EXPECT_EQ(Ctl(s, "rotate f").exit_code, 0);
  EXPECT_NE(Ctl(s, "--json filters").output.find("\"epoch\":1"), std::string::npos);
  r = Ctl(s, "rotate nope");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not found"), std::string::npos);
  EXPECT_EQ(Ctl(s, "whohas '*' x").exit_code, 1);  // no digest filters
  r = Ctl(s, "falsepositive f 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "f: 2 false positives reported on this node\n");
  r = Ctl(s, "--json falsepositive f");
  EXPECT_EQ(r.output, "{\"filter\":\"f\",\"false_positives\":3}\n");
  EXPECT_NE(Ctl(s, "--json filters").output.find("\"false_positives\":3"), std::string::npos);
  EXPECT_EQ(Ctl(s, "falsepositive nope").exit_code, 1);
  EXPECT_EQ(Ctl(s, "falsepositive").exit_code, 2);
}

TEST(Pollenctl, KeyringAndSnapshot) {
  ServerFixture s([](ServerContext& ctx) {
    ctx.snapshot = [](ServerContext::SnapshotDone done) { done("snapshot written"); };
  });
  auto r = Ctl(s, "keyring list");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("(primary)"), std::string::npos);
  std::string b64;
  absl::Base64Escape(std::string(32, 'z'), &b64);
  r = RunCommand("sh -c \"echo " + b64 + " | " POLLENCTL_PATH " --port " + std::to_string(s.port()) +
                 " keyring install\"");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = Ctl(s, "--json keyring list");
  EXPECT_TRUE(ValidJson(r.output)) << r.output;
  EXPECT_NE(r.output.find("\"primary\":false"), std::string::npos) << r.output;
  r = Ctl(s, "keyring install bm90MzI=");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("32 bytes"), std::string::npos);
  r = Ctl(s, "snapshot");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "snapshot written\n");
}

TEST(Pollenctl, SnapshotUnavailableIsReported) {
  ServerFixture s;
  const auto r = Ctl(s, "snapshot");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("snapshot not available"), std::string::npos) << r.output;
}

TEST(Pollenctl, PasswordAndUsage) {
  ServerFixture s([](ServerContext& ctx) { ctx.password = "pw1"; });
  auto r = Ctl(s, "status");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("NOAUTH"), std::string::npos) << r.output;
  r = Ctl(s, "--password bad status");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("authentication failed"), std::string::npos) << r.output;
  EXPECT_EQ(Ctl(s, "--password pw1 status").exit_code, 0);
  EXPECT_EQ(Ctl(s, "status", "env POLLEN_PASSWORD=pw1").exit_code, 0);
  EXPECT_EQ(Ctl(s, "").exit_code, 2);
  EXPECT_EQ(Ctl(s, "add onlyfilter").exit_code, 2);
  EXPECT_EQ(Ctl(s, "--port 0 status").exit_code, 2);
  EXPECT_EQ(Ctl(s, "--bogus status").exit_code, 2);
  EXPECT_EQ(RunCommand(POLLENCTL_PATH " --help").exit_code, 0);
  EXPECT_EQ(RunCommand(POLLENCTL_PATH " --port 1 status").exit_code, 3);
}

}  // namespace
}  // namespace pollen::resp
