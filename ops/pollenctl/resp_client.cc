#include "ops/pollenctl/resp_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pollen::ctl {

RespClient::~RespClient() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RespClient::Connect(const std::string& host, uint16_t port, std::chrono::seconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    timeval tv{static_cast<time_t>(timeout.count()), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fd_ = fd;
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port, ": ", last_error));
  return absl::OkStatus();
}

absl::Status RespClient::SendAll(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send failed: ", std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<resp::Reply> RespClient::Call(const std::vector<std::string>& args) {
  if (fd_ < 0) return absl::FailedPreconditionError("not connected");
  std::string req = absl::StrCat("*", args.size(), "\r\n");
  for (const std::string& a : args) absl::StrAppend(&req, "$", a.size(), "\r\n", a, "\r\n");
  if (absl::Status s = SendAll(req); !s.ok()) return s;
  constexpr size_t kMaxReplyBytes = 256u << 20;
  while (true) {
    resp::Reply reply;
    size_t consumed = 0;
    if (absl::Status s = resp::ParseReply(buf_, &reply, &consumed); !s.ok()) return s;
    if (consumed > 0) {
      buf_.erase(0, consumed);
      return reply;
    }
    if (buf_.size() > kMaxReplyBytes) return absl::ResourceExhaustedError("reply too large");
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return absl::UnavailableError("server closed the connection");
    if (n < 0) {
      return absl::UnavailableError(errno == EAGAIN || errno == EWOULDBLOCK ? std::string("timed out waiting for a reply")
                                                                           : absl::StrCat("recv failed: ", std::strerror(errno)));
    }
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

}  // namespace pollen::ctl
