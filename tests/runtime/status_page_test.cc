// The status page (GET /) of a real 3-node cluster, loaded in headless
// Chromium (Debian's `chromium`, installed by .ci/deps.sh): the rendered
// document shows the node, all three members alive with probe round trips,
// the filters with their fill, and rates from the second load on. The
// screenshot is left in the working directory (status_page.png).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/runtime/cluster_fixture.h"

namespace pollen::testing {
namespace {

// Runs `command` (a shell line) and returns its standard output.
std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string Chromium(const std::string& profile, const std::string& what, uint16_t port) {
  return "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync --user-data-dir=" +
         profile + " " + what + " http://127.0.0.1:" + std::to_string(port) + "/ 2>/dev/null";
}

class StatusPageTest : public ClusterTest {};

TEST_F(StatusPageTest, HeadlessChromiumRendersMembersFiltersAndRates) {
  ASSERT_FALSE(Shell("command -v chromium").empty()) << "chromium is not installed: run .ci/deps.sh";
  ASSERT_NO_FATAL_FAILURE(StartThree());
  Pollend& n1 = *nodes_[0];
  for (auto& n : nodes_) {
    ASSERT_TRUE(WaitAlive(*n, 3));
  }
  // Probes answered both ways: every peer has a round trip at n1.
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string m = n1.Metrics();
        return MetricValue(m, "pollen_probe_rtt_seconds", "peer=\"n2\"") &&
               MetricValue(m, "pollen_probe_rtt_seconds", "peer=\"n3\"");
      },
      kConvergeTimeout));
  const auto keys = Keys("page", 300);
  {
    RespClient c = n1.Client();
    ASSERT_TRUE(c.connected());
    ASSERT_EQ(c.Command({"BF.RESERVE", "urls<&>", "0.001", "1000"}).str, "OK");
  }
  AddAll(n1, "urls<&>", keys);
  ASSERT_TRUE(WaitFor([&] { return AllPresent(*nodes_[2], "urls<&>", keys); }, kConvergeTimeout));

  const std::string profile = dir_ + "/chromium";
  const uint16_t port = n1.ports().http;
  // The first load starts the rates' window; the second, a second later, has rates.
  ASSERT_NE(Shell(Chromium(profile, "--dump-dom", port)).find("Pollen node n1"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const std::string dom = Shell(Chromium(profile, "--dump-dom", port));
  EXPECT_NE(dom.find("<h1>Pollen node n1</h1>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("ready"), std::string::npos);
  EXPECT_NE(dom.find("alive 3"), std::string::npos) << dom;
  for (const char* peer : {"n2", "n3"}) {
    // Its row: name, address, state, incarnation, a round trip in ms, data seen.
    const size_t row = dom.find(std::string("<tr><td>") + peer + "</td>");
    ASSERT_NE(row, std::string::npos) << peer << "\n" << dom;
    const std::string line = dom.substr(row, dom.find("</tr>", row) - row);
    EXPECT_NE(line.find("class=\"alive\""), std::string::npos) << line;
    EXPECT_NE(line.find(" ms</td>"), std::string::npos) << line;
  }
  // The filter, its name escaped, 300 keys estimated, a design FPR of 0.1%.
  const size_t filter = dom.find("urls&lt;&amp;&gt;");
  ASSERT_NE(filter, std::string::npos) << dom;
  const std::string row = dom.substr(filter, dom.find("</tr>", filter) - filter);
  EXPECT_NE(row.find("<td>1000</td>"), std::string::npos) << row;
  EXPECT_NE(row.find("0.1000%"), std::string::npos) << row;
  EXPECT_NE(dom.find("crawl:seen"), std::string::npos);
  EXPECT_EQ(dom.find("measuring"), std::string::npos) << "no rates on the second load";
  EXPECT_NE(dom.find("adds/s"), std::string::npos);
  EXPECT_EQ(dom.find("<script"), std::string::npos) << "readable without JavaScript";

  const std::string shot = "status_page.png";
  std::remove(shot.c_str());
  Shell(Chromium(profile, "--window-size=1280,1000 --screenshot=" + shot, port));
  std::ifstream png(shot, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(png)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 10'000u) << "no screenshot at " << shot;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace pollen::testing
