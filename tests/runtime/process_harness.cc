#include "tests/runtime/process_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace pollen::testing {

namespace {

int BindLoopback(int type, uint16_t port) {
  const int fd = ::socket(AF_INET, type, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int ConnectLoopback(uint16_t port, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::vector<std::string>& TempDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

}  // namespace

uint16_t PickFreePort() {
  static std::set<uint16_t> used;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int t = BindLoopback(SOCK_STREAM, 0);
    if (t < 0) continue;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(t, reinterpret_cast<sockaddr*>(&a), &len);
    const uint16_t port = ntohs(a.sin_port);
    const int u = BindLoopback(SOCK_DGRAM, port);
    ::close(t);
    if (u < 0) continue;
    ::close(u);
    if (used.insert(port).second) return port;
  }
  ADD_FAILURE() << "no free port";
  return 0;
}

std::string MakeTempDir(const std::string& name) {
  std::string tmpl = ::testing::TempDir() + "/pollen_" + name + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* dir = ::mkdtemp(buf.data());
  EXPECT_NE(dir, nullptr);
  if (dir == nullptr) return std::string();
  TempDirs().emplace_back(dir);
  return std::string(dir);
}

void RemoveTempDirs() {
  for (const std::string& d : TempDirs()) std::system(("rm -rf '" + d + "'").c_str());
  TempDirs().clear();
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

RespClient::~RespClient() {
  if (fd_ >= 0) ::close(fd_);
}

RespClient::RespClient(RespClient&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }

bool RespClient::Connect(uint16_t port, std::chrono::milliseconds timeout) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ConnectLoopback(port, timeout);
  buf_.clear();
  return fd_ >= 0;
}

bool RespClient::SendRaw(const std::string& bytes) { return fd_ >= 0 && SendAll(fd_, bytes); }

RespReply RespClient::Command(const std::vector<std::string>& args) {
  std::string req = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  if (!SendRaw(req)) return {};
  return ReadReply(0);
}

bool RespClient::ReadLine(std::string* line) {
  while (true) {
    const size_t pos = buf_.find("\r\n");
    if (pos != std::string::npos) {
      *line = buf_.substr(0, pos);
      buf_.erase(0, pos + 2);
      return true;
    }
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    if (buf_.size() > (64u << 20)) return false;
  }
}

bool RespClient::ReadN(size_t n, std::string* out) {
  while (buf_.size() < n + 2) {
    char tmp[65536];
    const ssize_t r = ::recv(fd_, tmp, sizeof tmp, 0);
    if (r <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(r));
  }
  *out = buf_.substr(0, n);
  buf_.erase(0, n + 2);
  return true;
}

RespReply RespClient::ReadReply(int depth) {
  RespReply r;
  std::string line;
  if (fd_ < 0 || depth > 8 || !ReadLine(&line) || line.empty()) return r;
  const char t = line[0];
  const std::string rest = line.substr(1);
  switch (t) {
    case '+': r.type = RespReply::kStatus; r.str = rest; break;
    case '-': r.type = RespReply::kError; r.str = rest; break;
    case ':': r.type = RespReply::kInteger; r.integer = std::atoll(rest.c_str()); break;
    case '$': {
      const long long n = std::atoll(rest.c_str());
      if (n < 0) {
        r.type = RespReply::kNil;
      } else if (ReadN(static_cast<size_t>(n), &r.str)) {
        r.type = RespReply::kBulk;
      }
      break;
    }
    case '*': {
      const long long n = std::atoll(rest.c_str());
      if (n < 0) {
        r.type = RespReply::kNil;
        break;
      }
      r.type = RespReply::kArray;
      for (long long i = 0; i < n && i < 1000000; ++i) {
        r.elements.push_back(ReadReply(depth + 1));
        if (r.elements.back().type == RespReply::kNone) return RespReply{};
      }
      break;
    }
    default: break;
  }
  return r;
}

HttpResult HttpGet(uint16_t port, const std::string& path) {
  HttpResult result;
  const int fd = ConnectLoopback(port, std::chrono::seconds(10));
  if (fd < 0) return result;
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (!SendAll(fd, req)) {
    ::close(fd);
    return result;
  }
  std::string resp;
  char tmp[65536];
  while (true) {
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    resp.append(tmp, static_cast<size_t>(n));
  }
  ::close(fd);
  if (resp.compare(0, 9, "HTTP/1.1 ") != 0 || resp.size() < 12) return result;
  result.status = std::atoi(resp.substr(9, 3).c_str());
  const size_t body = resp.find("\r\n\r\n");
  if (body != std::string::npos) result.body = resp.substr(body + 4);
  return result;
}

std::optional<double> MetricValue(const std::string& metrics, const std::string& name, const std::string& labels) {
  const std::string want = labels.empty() ? name + " " : name + "{" + labels + "} ";
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, want.size(), want) == 0) return std::strtod(line.c_str() + want.size(), nullptr);
  }
  return std::nullopt;
}

Pollend::Pollend(std::string name, NodePorts ports, std::vector<std::string> extra, std::string secret_hex,
                 std::string log_path)
    : name_(std::move(name)),
      ports_(ports),
      extra_(std::move(extra)),
      secret_hex_(std::move(secret_hex)),
      log_path_(std::move(log_path)) {}

Pollend::~Pollend() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool Pollend::Start() {
  std::vector<std::string> args = {PollendPath(),
                                   "--node-name", name_,
                                   "--gossip-bind", ports_.gossip_addr(),
                                   "--resp-bind", "127.0.0.1:" + std::to_string(ports_.resp),
                                   "--http-bind", "127.0.0.1:" + std::to_string(ports_.http)};
  args.insert(args.end(), extra_.begin(), extra_.end());
  struct stat st {};
  log_offset_ = ::stat(log_path_.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::setenv("POLLEN_SECRET", secret_hex_.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  return true;
}

bool Pollend::WaitReady(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int restarts = 0;; ++restarts) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    // Readiness is recorded where it is seen: asking /readyz again afterwards
    // could fail on its own and turn a ready node into a timeout.
    bool ready = false;
    WaitFor(
        [&] {
          ready = running() && HttpGet(ports_.http, "/readyz").status == 200;
          return ready || !running();
        },
        left);
    if (ready) {
      ever_ready_ = true;
      return true;
    }
    if (running()) return false;  // timed out
    // It exited. PickFreePort's ports are free when picked, not when pollend
    // binds them: a test running beside this one (ctest -j) may take one in
    // between. On a first start, and only for that reason, try other ports.
    if (ever_ready_ || restarts == kMaxPortRetries) return false;
    if (LogSinceStart().find("Address already in use") == std::string::npos) return false;
    ports_ = NodePorts{PickFreePort(), PickFreePort(), PickFreePort(), ports_.ipv6_gossip};
    if (!Start()) return false;
  }
}

std::string Pollend::LogSinceStart() const {
  std::ifstream in(log_path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(log_offset_));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void Pollend::Kill(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool Pollend::Pause() {
  if (pid_ <= 0) return false;
  ::kill(pid_, SIGSTOP);
  // The parent hears of a stop (WUNTRACED) once the whole thread group has stopped.
  int status = 0;
  return WaitFor(
      [&] { return ::waitpid(pid_, &status, WUNTRACED | WNOHANG) == pid_ && WIFSTOPPED(status); },
      std::chrono::seconds(10));
}

void Pollend::Resume() { Kill(SIGCONT); }

int Pollend::WaitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  int status = 0;
  const bool exited = WaitFor(
      [&] {
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        return r == pid_;
      },
      timeout);
  if (!exited) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool Pollend::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

RespClient Pollend::Client() {
  RespClient c;
  c.Connect(ports_.resp, std::chrono::seconds(20));
  return c;
}

std::string Pollend::Metrics() { return HttpGet(ports_.http, "/metrics").body; }

std::string PollendPath() {
  if (const char* p = std::getenv("POLLEND_PATH"); p != nullptr) return p;
  return POLLEND_BINARY;
}

std::string RandomSecretHex() {
  std::random_device rd;  // tests may use real randomness for secrets
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 64; ++i) s += kHex[rd() % 16];
  return s;
}

std::string TailFile(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace pollen::testing
