// IoPool and EventLoop: one thread per loop, posted work runs on the loop's
// own thread in order, Stop() lets pending work finish and joins, descriptors
// are reported level-triggered and retired handlers are deleted.
#include "node/runtime/resp/io_pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pollen::resp {
namespace {

TEST(IoPool, EachLoopRunsOnItsOwnSingleThread) {
  IoPool pool(3);
  ASSERT_EQ(pool.size(), 3u);
  std::vector<EventLoop*> loops = pool.loops();
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(std::set<EventLoop*>(loops.begin(), loops.end()).size(), 3u);
  pool.Start();
  std::vector<std::set<std::thread::id>> seen(3);
  for (size_t i = 0; i < loops.size(); ++i) {
    for (int k = 0; k < 20; ++k) {
      std::promise<std::thread::id> where;
      auto f = where.get_future();
      loops[i]->Post([&where] { where.set_value(std::this_thread::get_id()); });
      ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
      seen[i].insert(f.get());
    }
  }
  std::set<std::thread::id> all;
  for (const auto& s : seen) {
    EXPECT_EQ(s.size(), 1u);  // one thread per loop
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
    for (auto* loop : pool.loops()) loop->Post([&ran] { ran.fetch_add(1); });
    pool.Stop(std::chrono::seconds(60));  // returns as soon as both queues are empty
  }
  EXPECT_EQ(ran.load(), 2);
  IoPool never_started(1);  // destructor must not hang or crash
}

TEST(EventLoop, TasksRunInOrderIncludingTasksPostedByTasks) {
  IoPool pool(1);
  EventLoop* loop = pool.loops()[0];
  std::vector<int> order;  // touched only on the loop thread, read after Stop
  for (int i = 0; i < 5; ++i) {
    loop->Post([&order, loop, i] {
      order.push_back(i);
      if (i == 4) loop->Post([&order] { order.push_back(5); });
    });
  }
  pool.Start();
  pool.Stop(std::chrono::seconds(60));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

// Counts readable events on one end of a socket pair; reads one byte per event
// and retires itself after `limit` bytes.
class ByteReader final : public IoHandler {
 public:
  ByteReader(EventLoop* loop, int fd, size_t limit, std::atomic<size_t>* got, std::atomic<bool>* deleted)
      : loop_(loop), fd_(fd), limit_(limit), got_(got), deleted_(deleted) {}
  ~ByteReader() override {
    deleted_->store(true);
    ::close(fd_);
  }
  void OnEvents(uint32_t events) override {
    ASSERT_NE(events & EPOLLIN, 0u);
    char c;
    ASSERT_EQ(::recv(fd_, &c, 1, 0), 1);
    if (got_->fetch_add(1) + 1 == limit_) {
      loop_->Unwatch(fd_);
      loop_->Retire(this);
    }
  }

 private:
  EventLoop* const loop_;
  const int fd_;
  const size_t limit_;
  std::atomic<size_t>* got_;
  std::atomic<bool>* deleted_;
};

// With and without busy-polling (which only changes how the loop waits).
TEST(EventLoop, ReadinessIsLevelTriggeredAndRetiredHandlersAreDeleted) {
  for (const std::chrono::microseconds busy_poll : {std::chrono::microseconds(0), EventLoop::kDefaultBusyPoll}) {
    SCOPED_TRACE(busy_poll.count());
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    std::atomic<size_t> got{0};
    std::atomic<bool> deleted{false};
    IoPool pool(1, busy_poll);
    EventLoop* loop = pool.loops()[0];
    loop->Post([&] {
      IoHandler* h = loop->Adopt(std::make_unique<ByteReader>(loop, sv[0], 10, &got, &deleted));
      ASSERT_TRUE(loop->Watch(sv[0], EPOLLIN, h).ok());
    });
    pool.Start();
    // Ten bytes in one write: one byte is read per event, so the other nine are
    // only seen because the loop reports the descriptor again.
    ASSERT_EQ(::send(sv[1], "0123456789", 10, 0), 10);
    for (int i = 0; i < 6000 && !deleted.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(got.load(), 10u);
    EXPECT_TRUE(deleted.load());
    pool.Stop(std::chrono::seconds(60));  // no handler left: the loop drains at once
    ::close(sv[1]);
  }
}

}  // namespace
}  // namespace pollen::resp
