// pollenctl against an in-process RespServer with a real Node: output, --json
// (validated by python's json module) and exit codes.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
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

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

// import from a file: a missing filter, then a run resumed from a state file
// (the keys before its position are skipped, the rest added), then a state
// file of another import refused. The SET source is tested against a real
// redis-server (clients/python/tests/test_scrapy_redis_crawl.py).
TEST(Pollenctl, ImportFromAFileResumesFromItsStateFile) {
  ServerFixture s;
  const std::string keys = ::testing::TempDir() + "/import_keys.txt";
  const std::string state = ::testing::TempDir() + "/import_keys.state";
  std::remove(state.c_str());
  std::string text, first_thousand;
  for (int i = 0; i < 2500; ++i) {
    text += absl::StrCat("k", i, i == 1500 ? "\r\n" : "\n", i == 2000 ? "\n" : "");  // a CRLF, a blank line
    if (i == 999) first_thousand = text;
  }
  WriteFile(keys, text);
  const std::string source = " --from-file " + keys + " --state " + state;
  auto r = Ctl(s, "import f" + source);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("filter 'f' does not exist"), std::string::npos) << r.output;

  WriteFile(state, absl::StrCat("pollenctl-import 1\nsource file ", keys, "\nposition ", first_thousand.size(),
                                "\nkeys 1000\n"));
  r = Ctl(s, "import f" + source + " --batch 300 --capacity 100000 --error-rate 0.001");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from " + state + " after 1000 keys"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("imported 1500 keys (1500 new to the filter) from file " + keys + " into f"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(FileExists(state));  // done: nothing to resume
  EXPECT_EQ(Ctl(s, "exists f k1000 k1500 k2000 k2499").exit_code, 0);  // k1500 without its \r
  EXPECT_EQ(Ctl(s, "exists f k0").exit_code, 1);  // before the saved position: skipped
  EXPECT_EQ(Ctl(s, "exists f k999").exit_code, 1);

  WriteFile(state, "pollenctl-import 1\nsource file /elsewhere\nposition 3\nkeys 1\n");
  r = Ctl(s, "import f" + source);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("belongs to another import (file /elsewhere)"), std::string::npos) << r.output;
  WriteFile(state, "pollenctl-import 1\nsource file " + keys + "\nposition x\n");
  r = Ctl(s, "import f" + source);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("is damaged"), std::string::npos) << r.output;
  std::remove(state.c_str());

  r = Ctl(s, "--json import f" + source);  // again from the start: every key is there already
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(ValidJson(r.output)) << r.output;
  EXPECT_NE(r.output.find("\"keys\":2500,\"new\":1000"), std::string::npos) << r.output;
  r = RunCommand("sh -c \"printf 'x1\\nx2\\n' | " POLLENCTL_PATH " --port " + std::to_string(s.port()) +
                 " import f --from-file -\"");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("imported 2 keys (2 new to the filter) from stdin into f"), std::string::npos) << r.output;
}

TEST(Pollenctl, ImportUsage) {
  ServerFixture s;
  for (const char* bad : {"import f", "import f --from-redis redis://h:1 --from-file x", "import f --from-redis redis://h:1",
                          "import f --from-file x --set k", "import f --from-file x --batch 0",
                          "import f --from-file x --capacity 10", "add f x --batch 5", "import --from-file x"}) {
    EXPECT_EQ(Ctl(s, bad).exit_code, 2) << bad;
  }
  ASSERT_EQ(Ctl(s, "add f x").exit_code, 0);
  auto r = Ctl(s, "import f --from-redis rediss://h:1 --set k");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("TLS sources"), std::string::npos) << r.output;
  r = Ctl(s, "import f --from-redis redis://127.0.0.1:1 --set k");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("source:"), std::string::npos) << r.output;
  r = Ctl(s, "import f --from-file /nonexistent/keys");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("cannot open /nonexistent/keys"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pollen::resp
