#include "node/runtime/resp/acceptor.h"

#include <netinet/in.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pollen::resp {

absl::StatusOr<int> Acceptor::Listen(const sockaddr* addr, socklen_t len, const std::string& where) {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("RESP listen on ", where, ": ", std::strerror(errno)));
  const int one = 1;
  bool ok = ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0;
  if (ok && addr->sa_family == AF_INET6) ok = ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == 0;
  ok = ok && ::bind(fd, addr, len) == 0 && ::listen(fd, SOMAXCONN) == 0;
  if (!ok) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("RESP listen on ", where, ": ", std::strerror(err)));
  }
  return fd;
}

Acceptor::Acceptor(int fd, EventLoop* loop, OnAccept on_accept)
    : fd_(fd), loop_(loop), on_accept_(std::move(on_accept)) {
  assert(fd_ >= 0 && loop_ != nullptr && on_accept_);
}

Acceptor::~Acceptor() {
  if (fd_ >= 0) {
    loop_->Unwatch(fd_);
    ::close(fd_);
  }
}

absl::Status Acceptor::Start() { return loop_->Watch(fd_, EPOLLIN, this); }

void Acceptor::Close() {
  if (fd_ < 0) return;
  loop_->Unwatch(fd_);
  ::close(fd_);
  fd_ = -1;
  loop_->Retire(this);
}

void Acceptor::OnEvents(uint32_t events) {
  (void)events;
  for (int i = 0; i < kMaxAcceptsPerEvent && fd_ >= 0 && !paused_; ++i) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c >= 0) {
      on_accept_(c);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR || errno == ECONNABORTED) continue;
    // Usually transient (EMFILE, ENFILE, ENOBUFS): retry after a pause.
    paused_ = true;
    resume_at_ = loop_->now() + kBackoff;
    if (!loop_->Modify(fd_, 0, this).ok()) Close();
  }
}

void Acceptor::OnTick(Clock::time_point now) {
  if (!paused_ || fd_ < 0 || now < resume_at_) return;
  paused_ = false;
  if (!loop_->Modify(fd_, EPOLLIN, this).ok()) Close();
}

}  // namespace pollen::resp
