// RenderStatusPage escapes what it shows and shows what it is given;
// RecentRates answers only over a real span and forgets what left its window.
#include "node/runtime/status_page.h"

#include <gtest/gtest.h>

namespace pollen::runtime {
namespace {

using std::chrono::seconds;

TEST(EscapeHtml, ReplacesEveryMarkupCharacter) {
  EXPECT_EQ(EscapeHtml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(EscapeHtml("plain"), "plain");
}

Driver::Collected TwoMembersOneFilter() {
  Driver::Collected n;
  n.members.push_back({"me", "127.0.0.1:1", node::MemberState::kAlive, 3, node::Time{0}, std::nullopt});
  n.members.push_back({"<peer>", "127.0.0.1:2", node::MemberState::kSuspect, 1, node::Time{0}, std::nullopt});
  node::PeerStats p;
  p.name = "<peer>";
  p.state = node::MemberState::kSuspect;
  p.probe_rtt = std::chrono::microseconds(1500);
  n.peers.push_back(p);
  node::FilterInfo f;
  f.config.name = std::string("bad\x01<script>", 12);
  f.config.fpr = 0.01;
  f.epoch = 4;
  node::GenerationInfo g;
  g.epoch = 4;
  g.capacity = 1000;
  g.fill_ratio = 0.25;
  g.estimated_items = 321;
  g.estimated_fpr = 0.002;
  f.generations = {g};
  f.queries = 10;
  n.filters.push_back(f);
  n.counters.adds = 77;
  return n;
}

TEST(StatusPage, ShowsMembersAndFiltersEscaped) {
  const Driver::Collected n = TwoMembersOneFilter();
  StatusInput in;
  in.node = &n;
  in.node_name = "me&you";
  in.version = "1.2.3";
  in.ready = false;
  const std::string page = RenderStatusPage(in);
  EXPECT_NE(page.find("<meta http-equiv=\"refresh\" content=\"5\">"), std::string::npos);
  EXPECT_NE(page.find("Pollen node me&amp;you"), std::string::npos);
  EXPECT_NE(page.find("not ready"), std::string::npos);
  EXPECT_NE(page.find("alive 1 &middot; suspect 1"), std::string::npos);
  EXPECT_NE(page.find("<td>&lt;peer&gt;</td>"), std::string::npos);
  EXPECT_NE(page.find("1.50 ms"), std::string::npos);
  EXPECT_NE(page.find("never"), std::string::npos);  // no data from the peer yet
  // The name is made printable, then escaped: no markup gets through.
  EXPECT_NE(page.find("bad\\x01&lt;script&gt;"), std::string::npos) << page;
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("<td>25.00%</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>321</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>0.2000%</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>77</td>"), std::string::npos);
  EXPECT_EQ(page.find("Recent rates"), std::string::npos);  // no rates given
}

TEST(RecentRates, NoneUntilTwoSamplesASecondApart) {
  RecentRates r;
  EXPECT_FALSE(r.Over());
  r.Sample(node::Time{seconds(10)}, {100, 0, 0, 0, 0});
  EXPECT_FALSE(r.Over());
  r.Sample(node::Time{seconds(10) + std::chrono::milliseconds(500)}, {150, 0, 0, 0, 0});
  EXPECT_FALSE(r.Over());
  r.Sample(node::Time{seconds(12)}, {300, 40, 10, 2000, 4000});
  auto rates = r.Over();
  ASSERT_TRUE(rates);
  EXPECT_DOUBLE_EQ(rates->seconds, 2.0);
  EXPECT_DOUBLE_EQ(rates->adds, 100.0);
  EXPECT_DOUBLE_EQ(rates->queries, 20.0);
  EXPECT_DOUBLE_EQ(rates->hits, 5.0);
  EXPECT_DOUBLE_EQ(rates->bytes_out, 2000.0);
}

TEST(RecentRates, CoversAboutTheLastMinuteAndNeverGoesNegative) {
  RecentRates r;
  for (int t = 0; t <= 120; t += 5) r.Sample(node::Time{seconds(t)}, {static_cast<uint64_t>(t) * 10, 0, 0, 0, 0});
  auto rates = r.Over();
  ASSERT_TRUE(rates);
  EXPECT_DOUBLE_EQ(rates->seconds, 60.0);  // from the last sample at or before 120 - 60
  EXPECT_DOUBLE_EQ(rates->adds, 10.0);
  r.Sample(node::Time{seconds(125)}, {0, 0, 0, 0, 0});  // a counter that went down
  EXPECT_DOUBLE_EQ(r.Over()->adds, 0.0);
}

}  // namespace
}  // namespace pollen::runtime
