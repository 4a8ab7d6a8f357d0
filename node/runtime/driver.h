// Driver: runs one node::Node on real sockets.
//
// One driver thread runs an io_context that owns every non-client call into
// the Node (Handle*, Tick, Take*, Start, Leave, Reserve, Rotate, keyring,
// export/import, Filters/Members/Counters): datagrams from the UdpTransport and
// frames from the StreamPool are fed in as they arrive; Tick runs at the node's
// NextWakeup and at least every kMaxTickGap; after each call the outgoing
// frames are sent (Channel::kStream over TCP, kDatagram over UDP) and the
// events logged (one line each; rejected-frame lines rate-limited).
// Client operations (Add/Exists/...) do not go through the driver: RESP threads
// call the Node directly.
//
// With persistence, every kFilterCreated / kFilterDiscarded event also puts
// the filter's catalog entry in the add log (Persistence::LogCreate).
// Snapshots (when persistence is on) run every snapshot-interval on a
// background thread: the export happens on the driver, the file writes do not.
// Readiness: after Start, once another member is alive, or there is no seed
// but this node, or join-timeout has passed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/statusor.h"
#include "node/core/node.h"
#include "node/runtime/config.h"
#include "node/runtime/peer_resolver.h"
#include "node/runtime/persistence.h"
#include "node/runtime/runtime_counters.h"
#include "node/runtime/stream_pool.h"
#include "node/runtime/udp_transport.h"

namespace pollen::runtime {

// Process-wide monotonic time mapped onto node::Time (origin: first call).
node::Time MonotonicNow();

class Driver {
 public:
  static constexpr std::chrono::milliseconds kMaxTickGap{50};
  static constexpr std::chrono::seconds kRunOnDriverTimeout{30};

  struct Collected {
    node::NodeCounters counters;
    std::vector<node::FilterInfo> filters;
    std::vector<node::MemberInfo> members;
    std::vector<node::PeerStats> peers;  // Node::Peers at `now`
    std::vector<uint64_t> key_ids;
    node::Time now{0};
  };

  // `persistence` may be null (no data dir). Both must outlive the driver.
  Driver(node::Node& node, const DaemonConfig& config, Persistence* persistence);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  absl::Status Bind();  // UDP + TCP on gossip-bind
  void Start();         // starts the thread; Node::Start runs on it

  // Runs fn(now) on the driver thread and waits (inline when called there).
  // Unavailable once Shutdown has begun stopping the thread: a call is then
  // refused at once, and one already queued that will not run is failed as
  // soon as the thread has stopped (never left to kRunOnDriverTimeout).
  absl::Status RunOnDriver(std::function<absl::Status(node::Time)> fn);

  // An owner-routed add (node::Node::BeginAdd) that does not wait: `done`
  // gets the owners' answers (at most about three route-timeouts, then the
  // local answer) on the driver thread, or BeginAdd's error, or Unavailable
  // (any thread) when the driver is not running or stops first.
  using RoutedResult = absl::StatusOr<node::RoutedAddResult>;
  void BeginRoutedAdd(std::string filter, std::shared_ptr<const std::vector<std::string>> keys,
                      std::function<void(RoutedResult)> done);

  // WAIT and the quorum EXISTS (ServerContext::peer_check): runs begin(now)
  // on the driver thread without waiting for it; `done` gets the answer of
  // the check it began (node::Node::TakePeerChecks) on the driver thread,
  // or the error begin returned, or Unavailable (any thread) when the
  // driver is not running or stops first.
  using CheckResult = absl::StatusOr<node::PeerCheckResult>;
  void PeerCheck(std::function<absl::StatusOr<uint64_t>(node::Time)> begin, std::function<void(CheckResult)> done);

  absl::StatusOr<Collected> Collect();
  // Writes a snapshot now (any thread but the driver's; serialized).
  absl::StatusOr<std::string> SnapshotNow();
  // Asks the snapshot thread for a snapshot that begins after this call and
  // returns at once; `done` gets its result on that thread. Requests that
  // wait together share one snapshot, which also restarts the periodic
  // interval. `done` gets the error on the calling thread instead when
  // there is no data dir, when kMaxSnapshotRequests already wait, or once
  // the driver is stopping (and requests still waiting then get
  // Unavailable). POLLEN.SNAPSHOT and SIGUSR1 use it, so that neither a RESP
  // thread's other clients nor the signal thread wait on the disk.
  using SnapshotDone = std::function<void(absl::StatusOr<std::string>)>;
  static constexpr size_t kMaxSnapshotRequests = 4096;
  void RequestSnapshot(SnapshotDone done);

  // Graceful: Node::Leave, send it, wait `grace`, stop the thread.
  void Shutdown(std::chrono::milliseconds grace);

  bool ready() const { return ready_.load(); }
  const RuntimeCounters& counters() const { return counters_; }
  uint16_t gossip_port() const { return udp_.port(); }

 private:
  void OnDatagram(const std::string& from, std::string_view bytes);
  void OnFrame(const std::string& from, std::string_view frame);
  void AfterNodeCall(node::Time now);  // send outgoing, log events, re-arm the timer
  void Send(std::vector<node::Outgoing> outgoing);
  // Queues the keys the node added at peers' requests in the add log; true
  // if the frames of this call must wait for them (SendWhenDurable).
  bool LogPeerAdds(std::vector<node::PeerAdds> adds);
  void SendWhenDurable(std::vector<node::Outgoing> outgoing);
  void NoteLogFailure(const absl::Status& s);
  void ArmTimer(node::Time now);
  void OnTimer();
  void CheckReady(node::Time now);
  void LogEvent(const node::Event& e, node::Time now);
  void SnapshotLoop();
  // Runs fn(now), then AfterNodeCall, on the driver thread, without waiting
  // for it. False (nothing posted) when the driver is not running.
  bool Post(std::function<void(node::Time)> fn);
  // Callbacks of node calls answered later by ticket (BeginAdd and
  // TakeRoutedAdds, BeginWait/BeginQuorumExists and TakePeerChecks).
  template <typename Result>
  using TicketCallbacks = std::map<uint64_t, std::function<void(absl::StatusOr<Result>)>>;
  // Posts begin(now); its ticket's answer reaches `done` through `callbacks`
  // (AnswerTickets), or begin's error, or Unavailable when not posted.
  template <typename Result>
  void BeginTicket(std::function<absl::StatusOr<uint64_t>(node::Time)> begin,
                   std::function<void(absl::StatusOr<Result>)> done, TicketCallbacks<Result>& callbacks);
  template <typename Result>
  static void AnswerTickets(std::vector<Result> results, TicketCallbacks<Result>& callbacks);
  template <typename Result>
  static void FailTickets(TicketCallbacks<Result>& callbacks);  // Unavailable to each, after the thread stopped
  // Removes and returns a pending RunOnDriver promise (nullptr if gone).
  std::shared_ptr<std::promise<absl::Status>> TakePendingCall(uint64_t id);

  node::Node& node_;
  const DaemonConfig config_;
  Persistence* persistence_;
  bool peer_add_log_failed_ = false;  // driver thread: the first failure is logged, not every one
  // Frames held until the add log is durable (SendWhenDurable), oldest
  // first. Driver thread. Bounded by the fsyncs in flight: the writer
  // answers every notice at its next fsync.
  std::deque<std::vector<node::Outgoing>> held_;
  // How the log's writer reaches this driver: cleared (under mu) once the
  // driver is gone, so a late notice posts nothing.
  struct Mailbox {
    std::mutex mu;
    Driver* driver = nullptr;
  };
  std::shared_ptr<Mailbox> mailbox_ = std::make_shared<Mailbox>();
  RuntimeCounters counters_;
  PeerResolver resolver_;
  boost::asio::io_context io_;
  UdpTransport udp_;
  StreamPool streams_;
  boost::asio::steady_timer timer_;
  node::Time timer_at_{-1};
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> ready_{false};
  bool started_ = false;
  node::Time start_time_{0};
  // Rejected-frame log rate limit.
  node::Time reject_window_start_{0};
  uint64_t reject_lines_ = 0, reject_suppressed_ = 0;

  std::mutex snapshot_mu_;
  std::thread snapshot_thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;  // also wakes SnapshotLoop for a request
  bool stopping_ = false;
  std::vector<SnapshotDone> snapshot_requests_;  // stop_mu_; at most kMaxSnapshotRequests
  bool shut_down_ = false;
  // RunOnDriver calls posted and not yet answered (stop_mu_), bounded by the
  // number of threads that can be waiting in RunOnDriver.
  uint64_t next_call_ = 0;
  std::map<uint64_t, std::shared_ptr<std::promise<absl::Status>>> pending_calls_;
  // BeginRoutedAdd callbacks by ticket (driver thread only until the thread
  // has stopped; then Shutdown fails the rest), answered by AfterNodeCall;
  // bounded by the RESP connections (each awaits at most one reply).
  TicketCallbacks<node::RoutedAddResult> routed_callbacks_;
  // PeerCheck callbacks by ticket (driver thread only until the thread has
  // stopped; then Shutdown fails the rest); bounded by node::kMaxCheckTickets.
  TicketCallbacks<node::PeerCheckResult> check_callbacks_;
};

}  // namespace pollen::runtime
