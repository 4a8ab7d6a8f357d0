#include "node/runtime/driver.h"

#include "node/core/printable_name.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "node/runtime/net_address.h"
#include "spdlog/spdlog.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace asio = boost::asio;

node::Time MonotonicNow() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<node::Time>(std::chrono::steady_clock::now() - origin);
}

namespace {

asio::ip::address BindIp(const std::string& host_port, uint16_t* port) {
  auto hp = ParseHostPort(host_port);
  assert(hp.ok() && hp->numeric);  // ValidateConfig checked it
  *port = hp->port;
  return asio::ip::make_address(hp->host);
}

}  // namespace

Driver::Driver(node::Node& node, const DaemonConfig& config, Persistence* persistence)
    : node_(node),
      config_(config),
      persistence_(persistence),
      udp_(io_, counters_, resolver_),
      streams_(io_, counters_, resolver_, config.stream_queue_bytes),
      timer_(io_) {
  mailbox_->driver = this;
}

Driver::~Driver() {
  Shutdown(std::chrono::milliseconds(0));
  std::lock_guard lock(mailbox_->mu);
  mailbox_->driver = nullptr;
}

absl::Status Driver::Bind() {
  uint16_t port = 0;
  const asio::ip::address ip = BindIp(config_.gossip_bind, &port);
  if (absl::Status s = udp_.Bind(asio::ip::udp::endpoint(ip, port)); !s.ok()) return s;
  return streams_.Listen(asio::ip::tcp::endpoint(ip, port));
}

void Driver::Start() {
  assert(!started_);
  started_ = true;
  thread_ = std::thread([this] {
    thread_id_.store(std::this_thread::get_id());
    const node::Time now = MonotonicNow();
    start_time_ = now;
    udp_.Start([this](const std::string& from, std::string_view b) { OnDatagram(from, b); });
    streams_.Start([this](const std::string& from, std::string_view f) { OnFrame(from, f); });
    node_.Start(now);
    AfterNodeCall(now);
    CheckReady(now);
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
  if (persistence_ != nullptr) snapshot_thread_ = std::thread([this] { SnapshotLoop(); });
}

void Driver::OnDatagram(const std::string& from, std::string_view bytes) {
  const node::Time now = MonotonicNow();
  node_.HandleDatagram(from, bytes, now);
  AfterNodeCall(now);
}

void Driver::OnFrame(const std::string& from, std::string_view frame) {
  const node::Time now = MonotonicNow();
  node_.HandleStreamFrame(from, frame, now);
  AfterNodeCall(now);
}

void Driver::AfterNodeCall(node::Time now) {
  std::vector<node::Outgoing> outgoing = node_.TakeOutgoing();
  if (LogPeerAdds(node_.TakePeerAdds())) {
    SendWhenDurable(std::move(outgoing));  // they report keys just logged
  } else {
    Send(std::move(outgoing));
  }
  AnswerTickets(node_.TakeRoutedAdds(), routed_callbacks_);
  AnswerTickets(node_.TakePeerChecks(), check_callbacks_);
  for (const node::Event& e : node_.TakeEvents()) {
    LogEvent(e, now);
    // A filter appeared or its entry was replaced: put the entry in the add
    // log (queued here; a reserve's reply waits for it, see daemon.cc).
    if (persistence_ != nullptr &&
        (e.kind == node::Event::Kind::kFilterCreated || e.kind == node::Event::Kind::kFilterDiscarded)) {
      absl::Status s = persistence_->LogCreate(node_, e.subject, false);
      if (!s.ok() && !absl::IsNotFound(s)) spdlog::error("add log: create record for {}: {}", node::PrintableName(e.subject), s.message());
    }
    // A filter deleted by a peer's tombstone (a local DEL logged it already).
    if (persistence_ != nullptr && e.kind == node::Event::Kind::kFilterDeleted) {
      absl::Status s = persistence_->LogDelete(e.subject, e.count, false);
      if (!s.ok()) spdlog::error("add log: delete record for {}: {}", node::PrintableName(e.subject), s.message());
    }
  }
  ArmTimer(now);
}

void Driver::Send(std::vector<node::Outgoing> outgoing) {
  for (node::Outgoing& out : outgoing) {
    if (out.channel == node::Channel::kStream || config_.tcp_only) {
      streams_.Send(out.to, std::move(out.bytes));
    } else {
      udp_.Send(out.to, std::move(out.bytes));
    }
  }
}

bool Driver::LogPeerAdds(std::vector<node::PeerAdds> adds) {
  if (adds.empty() || persistence_ == nullptr) return false;
  // An owner that answered "new" and then restarted must not answer "new"
  // again for the same key: its decisions go in its own log, not only in
  // the asker's. Queued here; SendWhenDurable holds the answers meanwhile.
  absl::Status s;
  for (const node::PeerAdds& a : adds) {
    if (a.keys.empty()) continue;  // a repeated answer: its keys were queued with the first
    if (persistence_->NeedsCreateRecord(a.filter)) {
      s = persistence_->LogCreate(node_, a.filter, false);
      if (absl::IsNotFound(s)) {  // deleted in the same call: nothing to log
        s = absl::OkStatus();
        continue;
      }
      if (!s.ok()) break;
    }
    const std::vector<std::string_view> keys(a.keys.begin(), a.keys.end());
    s = persistence_->QueueAdds(a.filter, keys);
    if (!s.ok()) break;
  }
  // Only `always` has an fsync to wait for (everysec's promise holds as is).
  if (s.ok()) return persistence_->appendfsync() == AppendFsync::kAlways;
  NoteLogFailure(s);
  return false;  // nothing more to wait for: the log's errors are sticky
}

void Driver::NoteLogFailure(const absl::Status& s) {
  // The log's errors are sticky, and clients' adds report them: say it once here.
  if (!peer_add_log_failed_) spdlog::error("add log: keys added for peers: {}", s.message());
  peer_add_log_failed_ = true;
}

void Driver::SendWhenDurable(std::vector<node::Outgoing> outgoing) {
  // Under appendfsync always the answers leave once the log's writer has
  // fsynced the keys they report. The driver does not wait for it: gossip,
  // probes and other peers' requests go on, and the answers of every
  // message handled meanwhile share one fsync. Notices come in order, so
  // the batch at the front of held_ is the one a notice is for (or an older
  // one, when a notice overtook another in flight: each still leaves once).
  held_.push_back(std::move(outgoing));
  persistence_->NotifyDurable([mailbox = mailbox_](absl::Status s) {
    std::lock_guard lock(mailbox->mu);
    if (mailbox->driver == nullptr) return;  // stopped: the answers are dropped with the node
    Driver* d = mailbox->driver;
    asio::post(d->io_, [d, s = std::move(s)] {
      if (!s.ok()) d->NoteLogFailure(s);  // sent anyway: the asker logs the keys too
      assert(!d->held_.empty());
      std::vector<node::Outgoing> out = std::move(d->held_.front());
      d->held_.pop_front();
      d->Send(std::move(out));
    });
  });
}

void Driver::ArmTimer(node::Time now) {
  node::Time wake = std::min(node_.NextWakeup(), now + node::Duration(kMaxTickGap));
  wake = std::max(wake, now + node::Duration(std::chrono::milliseconds(1)));  // never spin
  if (timer_at_.count() >= 0 && timer_at_ <= wake) return;  // an earlier wake is already set
  timer_at_ = wake;
  timer_.expires_after(wake - now);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    OnTimer();
  });
}

void Driver::OnTimer() {
  timer_at_ = node::Time(-1);
  const node::Time now = MonotonicNow();
  node_.Tick(now);
  CheckReady(now);
  AfterNodeCall(now);
}

void Driver::CheckReady(node::Time now) {
  if (ready_.load()) return;
  bool other_seed = false;
  const std::string self = config_.advertise.empty() ? config_.gossip_bind : config_.advertise;
  for (const std::string& s : config_.seeds) other_seed |= s != self;
  std::string why;
  if (!other_seed) {
    why = "no seeds to join";
  } else {
    for (const node::MemberInfo& m : node_.Members()) {
      if (m.name != node_.name() && m.state == node::MemberState::kAlive) {
        why = Cat("joined (first peer ", m.name, ")");
        break;
      }
    }
    if (why.empty() && now - start_time_ >= config_.join_timeout) {
      why = "join timed out; running alone until a seed answers";
    }
  }
  if (!why.empty()) {
    ready_.store(true);
    spdlog::info("ready: {}", why);
  }
}

void Driver::LogEvent(const node::Event& e, node::Time now) {
  using K = node::Event::Kind;
  const std::string subject = node::PrintableName(e.subject);  // filter names are binary-safe
  switch (e.kind) {
    case K::kMemberJoined: spdlog::info("member joined: {} {}", subject, e.detail); break;
    case K::kMemberSuspect: spdlog::warn("member suspect: {} {}", subject, e.detail); break;
    case K::kMemberDead: spdlog::warn("member dead: {} {}", subject, e.detail); break;
    case K::kMemberLeft: spdlog::info("member left: {} {}", subject, e.detail); break;
    case K::kMemberAlive: spdlog::info("member alive: {} {}", subject, e.detail); break;
    case K::kEpochAdvanced: spdlog::info("filter {}: epoch advanced {}", subject, e.detail); break;
    case K::kFilterCreated: spdlog::info("filter created: {} {}", subject, e.detail); break;
    case K::kFilterDiscarded: spdlog::warn("filter discarded: {} {}", subject, e.detail); break;
    case K::kFilterDeleted: spdlog::info("filter deleted: {} {}", subject, e.detail); break;
    case K::kFilterGrew: spdlog::info("filter {}: opened layer {} (scaling)", subject, e.count - 1); break;
    case K::kFilterSaturated:
      spdlog::warn("filter {} is saturated: {}", subject, e.detail);
      break;
    case K::kFilterRelieved: spdlog::info("filter {} is no longer saturated", subject); break;
    case K::kFilterRefused:
      spdlog::warn("filter {} not held on this node (its other members hold it): {}", subject, e.detail);
      break;
    case K::kMergeRefused: spdlog::error("merge refused (parameter mismatch): {} {}", subject, e.detail); break;
    case K::kAntiEntropyRepaired:
      spdlog::info("anti-entropy with {}: {} ranges repaired {}", subject, e.count, e.detail);
      break;
    case K::kFrameRejected: {
      if (now - reject_window_start_ >= std::chrono::seconds(1)) {
        if (reject_suppressed_ > 0) spdlog::warn("{} more rejected frames not logged", reject_suppressed_);
        reject_window_start_ = now;
        reject_lines_ = 0;
        reject_suppressed_ = 0;
      }
      if (++reject_lines_ <= 10) {
        spdlog::warn("frame rejected from {}: {}", e.subject, e.detail);
      } else {
        ++reject_suppressed_;
      }
      break;
    }
  }
}

absl::Status Driver::RunOnDriver(std::function<absl::Status(node::Time)> fn) {
  if (std::this_thread::get_id() == thread_id_.load()) {
    const node::Time now = MonotonicNow();
    absl::Status s = fn(now);
    AfterNodeCall(now);
    return s;
  }
  auto promise = std::make_shared<std::promise<absl::Status>>();
  auto future = promise->get_future();
  uint64_t id = 0;
  {
    // Registered and posted under the lock that Shutdown takes to stop the
    // thread: a call is either refused here, or run, or failed by Shutdown.
    std::lock_guard lock(stop_mu_);
    if (shut_down_ || !started_) return absl::UnavailableError("driver not running");
    id = next_call_++;
    pending_calls_.emplace(id, promise);
    asio::post(io_, [this, id, fn = std::move(fn)] {
      const node::Time now = MonotonicNow();
      absl::Status s = fn(now);
      AfterNodeCall(now);
      if (auto p = TakePendingCall(id)) p->set_value(std::move(s));
    });
  }
  if (future.wait_for(kRunOnDriverTimeout) != std::future_status::ready) {
    if (TakePendingCall(id) != nullptr) return absl::DeadlineExceededError("driver did not answer in time");
    // Answered (or failed by Shutdown) just now.
  }
  return future.get();
}

std::shared_ptr<std::promise<absl::Status>> Driver::TakePendingCall(uint64_t id) {
  std::lock_guard lock(stop_mu_);
  auto it = pending_calls_.find(id);
  if (it == pending_calls_.end()) return nullptr;
  auto p = std::move(it->second);
  pending_calls_.erase(it);
  return p;
}

bool Driver::Post(std::function<void(node::Time)> fn) {
  std::lock_guard lock(stop_mu_);  // as in RunOnDriver: posted, or refused here
  if (shut_down_ || !started_) return false;
  asio::post(io_, [this, fn = std::move(fn)] {
    const node::Time now = MonotonicNow();
    fn(now);
    AfterNodeCall(now);
  });
  return true;
}

template <typename Result>
void Driver::BeginTicket(std::function<absl::StatusOr<uint64_t>(node::Time)> begin,
                         std::function<void(absl::StatusOr<Result>)> done, TicketCallbacks<Result>& callbacks) {
  // `done` moves into the task; it is still there when Post refuses.
  auto pending = std::make_shared<std::function<void(absl::StatusOr<Result>)>>(std::move(done));
  const bool posted = Post([pending, begin = std::move(begin), &callbacks](node::Time now) {
    absl::StatusOr<uint64_t> ticket = begin(now);
    if (ticket.ok()) {
      callbacks[*ticket] = std::move(*pending);  // AfterNodeCall, next, may answer it
    } else {
      (*pending)(ticket.status());
    }
  });
  if (!posted) (*pending)(absl::UnavailableError("ERR driver unavailable"));
}

template <typename Result>
void Driver::AnswerTickets(std::vector<Result> results, TicketCallbacks<Result>& callbacks) {
  for (Result& r : results) {
    auto it = callbacks.find(r.ticket);
    if (it == callbacks.end()) continue;
    std::function<void(absl::StatusOr<Result>)> done = std::move(it->second);
    callbacks.erase(it);
    done(std::move(r));
  }
}

template <typename Result>
void Driver::FailTickets(TicketCallbacks<Result>& callbacks) {
  TicketCallbacks<Result> left;
  left.swap(callbacks);
  for (auto& [ticket, done] : left) done(absl::UnavailableError("ERR pollend is shutting down"));
}

void Driver::BeginRoutedAdd(std::string filter, std::shared_ptr<const std::vector<std::string>> keys,
                            std::function<void(RoutedResult)> done) {
  assert(keys != nullptr);
  BeginTicket<node::RoutedAddResult>(
      [this, filter = std::move(filter), keys = std::move(keys)](node::Time now) {
        std::vector<std::string_view> views(keys->begin(), keys->end());
        return node_.BeginAdd(filter, views, now);
      },
      std::move(done), routed_callbacks_);
}

void Driver::PeerCheck(std::function<absl::StatusOr<uint64_t>(node::Time)> begin,
                       std::function<void(CheckResult)> done) {
  BeginTicket<node::PeerCheckResult>(std::move(begin), std::move(done), check_callbacks_);
}

absl::StatusOr<Driver::Collected> Driver::Collect() {
  auto c = std::make_shared<Collected>();
  absl::Status s = RunOnDriver([this, c](node::Time now) {
    c->counters = node_.Counters();
    c->members = node_.Members();
    c->key_ids = node_.KeyringList();
    c->peers = node_.Peers(now);
    c->now = now;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // On this thread, not the driver's: a filter changed since the last scrape
  // is scanned for its set bits, and the driver must not miss probes
  // meanwhile (Filters() is safe from any thread). Not for its digest, which
  // no page or metric shows: that second scan (0.2 s a GiB) took the other
  // core from a joining node's merges.
  c->filters = node_.Filters(node::InfoParts::kEstimates);
  return std::move(*c);
}

absl::StatusOr<std::string> Driver::SnapshotNow() {
  if (persistence_ == nullptr) return absl::FailedPreconditionError("no data-dir configured");
  std::lock_guard lock(snapshot_mu_);
  auto job = std::make_shared<SnapshotJob>();
  absl::Status s = RunOnDriver([this, job](node::Time) -> absl::Status {
    auto j = persistence_->BeginSnapshot(node_);
    if (!j.ok()) return j.status();
    *job = std::move(*j);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  auto done = persistence_->FinishSnapshot(*job);
  if (done.ok() && job->unchanged) {
    spdlog::debug("{}", *done);
  } else if (done.ok()) {
    spdlog::info("{}", *done);
  } else {
    spdlog::error("snapshot failed: {}", done.status().message());
  }
  return done;
}

void Driver::RequestSnapshot(SnapshotDone done) {
  assert(done);
  absl::Status refused;
  {
    std::lock_guard lock(stop_mu_);
    if (persistence_ == nullptr) {
      refused = absl::FailedPreconditionError("no data-dir configured");
    } else if (stopping_) {
      refused = absl::UnavailableError("shutting down");
    } else if (snapshot_requests_.size() >= kMaxSnapshotRequests) {
      refused = absl::ResourceExhaustedError("too many snapshot requests waiting");
    } else {
      snapshot_requests_.push_back(std::move(done));
    }
  }
  if (!refused.ok()) return done(refused);
  stop_cv_.notify_all();
}

void Driver::SnapshotLoop() {
  using Clock = std::chrono::steady_clock;
  assert(config_.snapshot_interval > node::Duration::zero());  // config: 1 s to 24 h
  // Below the other threads (nice 10: a tenth of a nice-0 thread's share of
  // a busy core): a base of a big filter keeps a core busy for tens of
  // seconds (the checksum, the copy into the page cache), and on a loaded
  // machine the driver's probe answers must not wait for it. Linux applies
  // a thread id's nice value to that thread alone.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    spdlog::debug("snapshot thread: setpriority: {}", std::strerror(errno));
  }
  std::unique_lock lock(stop_mu_);
  Clock::time_point next = Clock::now() + config_.snapshot_interval;
  while (true) {
    stop_cv_.wait_until(lock, next, [this] { return stopping_ || !snapshot_requests_.empty(); });
    if (stopping_) break;
    // Requests, or the interval ran out (then `waiting` is empty).
    std::vector<SnapshotDone> waiting;
    waiting.swap(snapshot_requests_);
    lock.unlock();
    const absl::StatusOr<std::string> result = SnapshotNow();
    for (SnapshotDone& done : waiting) done(result);
    lock.lock();
    next = Clock::now() + config_.snapshot_interval;
  }
  std::vector<SnapshotDone> waiting;
  waiting.swap(snapshot_requests_);
  lock.unlock();
  for (SnapshotDone& done : waiting) done(absl::UnavailableError("shutting down"));
}

void Driver::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  if (started_) {
    (void)RunOnDriver([this](node::Time now) {
      node_.Leave(now);
      spdlog::info("leaving the cluster");
      return absl::OkStatus();
    });
    if (grace.count() > 0) std::this_thread::sleep_for(grace);
    {
      std::lock_guard lock(stop_mu_);
      shut_down_ = true;
      asio::post(io_, [this] {
        timer_.cancel();
        udp_.Close();
        streams_.Close();
        io_.stop();
      });
    }
    if (thread_.joinable()) thread_.join();
  }
  // Calls whose work was queued behind the stop never run: fail them now
  // instead of leaving their callers (an HTTP scrape, say) to time out.
  std::map<uint64_t, std::shared_ptr<std::promise<absl::Status>>> orphans;
  {
    std::lock_guard lock(stop_mu_);
    shut_down_ = true;
    orphans.swap(pending_calls_);
  }
  for (auto& [id, p] : orphans) p->set_value(absl::UnavailableError("pollend is shutting down"));
  // The thread has stopped: nobody else touches the callbacks now. (A check
  // or a routed add posted but never run is dropped with its task: the RESP
  // server, stopped before the driver, has disconnected its client.)
  FailTickets(check_callbacks_);
  FailTickets(routed_callbacks_);
}

}  // namespace pollen::runtime
