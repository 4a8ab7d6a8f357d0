// IoPool: one thread per io_context, work runs on the context's own thread,
// Stop() lets pending work finish and joins.
#include "node/runtime/resp/io_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>

#include "gtest/gtest.h"

namespace pollen::resp {
namespace {

TEST(IoPool, EachContextRunsOnItsOwnSingleThread) {
  IoPool pool(3);
  ASSERT_EQ(pool.size(), 3u);
  std::vector<boost::asio::io_context*> ios = pool.contexts();
  ASSERT_EQ(ios.size(), 3u);
  EXPECT_EQ(std::set<boost::asio::io_context*>(ios.begin(), ios.end()).size(), 3u);
  pool.Start();
  std::vector<std::set<std::thread::id>> seen(3);
  for (size_t i = 0; i < ios.size(); ++i) {
    for (int k = 0; k < 20; ++k) {
      std::promise<std::thread::id> where;
      auto f = where.get_future();
      boost::asio::post(*ios[i], [&where] { where.set_value(std::this_thread::get_id()); });
      ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
      seen[i].insert(f.get());
    }
  }
  std::set<std::thread::id> all;
  for (const auto& s : seen) {
    EXPECT_EQ(s.size(), 1u);  // one thread per context
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all.size(), 3u);  // and a different one for each
  EXPECT_EQ(all.count(std::this_thread::get_id()), 0u);
  pool.Stop();
  pool.Stop();  // idempotent
}

TEST(IoPool, StopRunsQueuedWorkAndWorksWithoutStart) {
  std::atomic<int> ran{0};
  {
    IoPool pool(2);
    pool.Start();
    for (auto* io : pool.contexts()) boost::asio::post(*io, [&ran] { ran.fetch_add(1); });
    pool.Stop(std::chrono::seconds(60));  // returns as soon as both queues are empty
  }
  EXPECT_EQ(ran.load(), 2);
  IoPool never_started(1);  // destructor must not hang or crash
}

}  // namespace
}  // namespace pollen::resp
