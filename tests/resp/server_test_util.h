// Helpers for end-to-end tests of RespServer: an in-process server on
// 127.0.0.1:0 with a real Node, a blocking raw-socket client with timeouts,
// and bounded subprocesses (redis-cli, python3-redis).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "node/runtime/resp/io_pool.h"
#include "node/runtime/resp/reply_reader.h"
#include "node/runtime/resp/resp_server.h"
#include "tests/resp/resp_test_util.h"

namespace pollen::resp::testing {

// A RespServer over a NodeFixture, on an IoPool of two event loops (as
// pollend runs it with resp-threads = 2).
class ServerFixture {
 public:
  explicit ServerFixture(const std::function<void(ServerContext&)>& configure = nullptr) {
    if (configure) configure(f.ctx);
    server = std::make_unique<RespServer>(
        pool, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0), f.ctx);
    const absl::Status s = server->Start();
    EXPECT_TRUE(s.ok()) << s;
    pool.Start();
  }
  ~ServerFixture() {
    server->Stop();
    pool.Stop(std::chrono::seconds(5));  // connections finish closing; then the threads return
    server.reset();
  }
  uint16_t port() const { return server->port(); }

  NodeFixture f;
  IoPool pool{2};
  std::unique_ptr<RespServer> server;
};

// A blocking TCP client with a receive timeout (so a test can never hang).
class RawClient {
 public:
  explicit RawClient(uint16_t port, int timeout_seconds = 20) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Half-closes: the server reads EOF, this client can still read.
  bool ShutdownWrite() { return ::shutdown(fd_, SHUT_WR) == 0; }

  // Next reply; nullopt on EOF, timeout or a malformed reply.
  std::optional<Reply> Read() {
    while (true) {
      Reply r;
      size_t consumed = 0;
      if (!ParseReply(buf_, &r, &consumed).ok()) return std::nullopt;
      if (consumed > 0) {
        buf_.erase(0, consumed);
        return r;
      }
      if (!Fill()) return std::nullopt;
    }
  }

  // True when the server closed the connection (EOF or reset) before the
  // timeout, after any buffered replies.
  bool ReadsEof() {
    char tmp[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool Fill() {
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

inline std::string Multibulk(const std::vector<std::string>& args) {
  std::string s = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return s;
}

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs a shell command under `timeout` so it always ends.
inline ProcessResult RunCommand(const std::string& command, int timeout_seconds = 120) {
  ProcessResult r;
  const std::string full = "timeout -k 5 " + std::to_string(timeout_seconds) + " " + command + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace pollen::resp::testing
