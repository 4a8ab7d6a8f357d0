// Acceptor: a listening TCP socket on an EventLoop (internal to RespServer).
//
// On readiness it accepts up to kMaxAcceptsPerEvent connections (non-blocking,
// close-on-exec) and hands each descriptor to `on_accept`, which owns it from
// then on. An error other than "nothing to accept" (e.g. EMFILE) pauses
// accepting for kBackoff rather than spinning on it.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "node/runtime/resp/event_loop.h"

namespace pollen::resp {

class Acceptor final : public IoHandler {
 public:
  static constexpr int kMaxAcceptsPerEvent = 64;
  static constexpr std::chrono::milliseconds kBackoff{100};
  using OnAccept = std::function<void(int fd)>;

  // Opens a TCP socket for `addr`, sets SO_REUSEADDR (and IPV6_V6ONLY for
  // IPv6), binds and listens. `where` names the address in errors.
  static absl::StatusOr<int> Listen(const sockaddr* addr, socklen_t len, const std::string& where);

  // Takes the listening `fd`. Construct, Adopt and Start on `loop`'s thread.
  Acceptor(int fd, EventLoop* loop, OnAccept on_accept);
  ~Acceptor() override;

  absl::Status Start();
  void Close();  // stops accepting and retires the acceptor; idempotent

  void OnEvents(uint32_t events) override;
  void OnTick(Clock::time_point now) override;

 private:
  int fd_;
  EventLoop* const loop_;
  OnAccept on_accept_;
  bool paused_ = false;
  Clock::time_point resume_at_;
};

}  // namespace pollen::resp
