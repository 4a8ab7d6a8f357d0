// Counters kept by the daemon's transports (the node core keeps its own).
// Relaxed atomics: written on the driver thread, read by /metrics.
#pragma once

#include <atomic>
#include <cstdint>

namespace pollen::runtime {

struct RuntimeCounters {
  std::atomic<uint64_t> udp_datagrams_in{0};
  std::atomic<uint64_t> udp_datagrams_out{0};
  std::atomic<uint64_t> udp_send_errors{0};
  std::atomic<uint64_t> udp_dropped_queue_full{0};
  std::atomic<uint64_t> tcp_frames_in{0};
  std::atomic<uint64_t> tcp_frames_out{0};
  std::atomic<uint64_t> tcp_connects{0};
  std::atomic<uint64_t> tcp_connect_failures{0};   // refused or unreachable
  std::atomic<uint64_t> tcp_connect_timeouts{0};   // not connected within the pool's connect timeout
  std::atomic<uint64_t> tcp_accepts{0};
  std::atomic<uint64_t> tcp_accept_refused{0};
  std::atomic<uint64_t> tcp_dropped_backoff{0};     // frames for a peer in reconnect backoff
  std::atomic<uint64_t> tcp_dropped_queue_full{0};  // per-peer queue bound reached
  std::atomic<uint64_t> tcp_connections{0};         // gauge
  // Frames refused by the transport before the node saw them.
  std::atomic<uint64_t> stream_rejected_oversize{0};   // length prefix above the maximum
  std::atomic<uint64_t> stream_rejected_malformed{0};  // zero length prefix
  std::atomic<uint64_t> unresolved_peer{0};            // address could not be resolved
};

}  // namespace pollen::runtime
