// Helpers for tests that run real pollend processes on loopback: free ports,
// spawning and killing (every process is SIGKILLed in the destructor), a tiny
// blocking RESP client, HTTP GET, and bounded waiting. No Asio: plain sockets.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pollen::testing {

// A port free for both TCP and UDP on 127.0.0.1 (not reused within a process).
uint16_t PickFreePort();

// A fresh empty directory under the test temp dir.
std::string MakeTempDir(const std::string& name);
// Removes every directory MakeTempDir made (call after the processes are gone).
void RemoveTempDirs();

// Polls `pred` every 100 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

struct RespReply {
  enum Type { kError, kStatus, kInteger, kBulk, kNil, kArray, kNone } type = kNone;
  std::string str;
  long long integer = 0;
  std::vector<RespReply> elements;
};

class RespClient {
 public:
  RespClient() = default;
  ~RespClient();
  RespClient(RespClient&& o) noexcept;
  RespClient& operator=(RespClient&&) = delete;
  bool Connect(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Sends one command and reads its reply (kNone on I/O error / timeout).
  RespReply Command(const std::vector<std::string>& args);
  bool SendRaw(const std::string& bytes);
  bool connected() const { return fd_ >= 0; }

 private:
  bool ReadLine(std::string* line);
  bool ReadN(size_t n, std::string* out);
  RespReply ReadReply(int depth);
  int fd_ = -1;
  std::string buf_;
};

// One HTTP GET to 127.0.0.1:port; status 0 on failure.
struct HttpResult {
  int status = 0;
  std::string body;
};
HttpResult HttpGet(uint16_t port, const std::string& path);

// The value of an unlabelled metric or one with exactly `labels` (e.g.
// reason="auth"); nullopt when absent.
std::optional<double> MetricValue(const std::string& metrics, const std::string& name, const std::string& labels = "");

struct NodePorts {
  uint16_t gossip = 0, resp = 0, http = 0;
  bool ipv6_gossip = false;  // gossip on [::1] instead of 127.0.0.1
  std::string gossip_addr() const {
    return (ipv6_gossip ? "[::1]:" : "127.0.0.1:") + std::to_string(gossip);
  }
};

class Pollend {
 public:
  // `extra` are further flags; the secret goes through POLLEN_SECRET.
  Pollend(std::string name, NodePorts ports, std::vector<std::string> extra, std::string secret_hex,
          std::string log_path);
  ~Pollend();  // SIGKILL + reap
  bool Start();
  // True once /readyz answers 200. A first start that exits because a port
  // was taken between PickFreePort and the bind is retried on new ports (up
  // to kMaxPortRetries times), so ports() may change here.
  bool WaitReady(std::chrono::milliseconds timeout);
  void Kill(int sig);
  // SIGSTOP, and true once every thread of the process has stopped. kill()
  // returns before that: a thread already running on another CPU goes on
  // until the stop reaches it, and on a loaded machine it can still answer a
  // peer in that window (a flake seen in CI). Resume() sends SIGCONT.
  bool Pause();
  void Resume();
  // Waits for exit; returns the exit status (or -1 on timeout / signal).
  int WaitExit(std::chrono::milliseconds timeout);
  bool running();
  RespClient Client();
  std::string Metrics();
  const NodePorts& ports() const { return ports_; }
  const std::string& log_path() const { return log_path_; }
  void set_extra(std::vector<std::string> extra) { extra_ = std::move(extra); }

 private:
  std::string name_;
  NodePorts ports_;
  std::vector<std::string> extra_;
  std::string secret_hex_;
  std::string log_path_;
  pid_t pid_ = -1;
  bool ever_ready_ = false;
  size_t log_offset_ = 0;  // the log's size when this start began
  static constexpr int kMaxPortRetries = 5;
  std::string LogSinceStart() const;
};

std::string PollendPath();
std::string RandomSecretHex();
// The last `max_bytes` of a file (for failure messages).
std::string TailFile(const std::string& path, size_t max_bytes = 4000);

}  // namespace pollen::testing
