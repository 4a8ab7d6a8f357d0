// RespClient: a small blocking RESP2 client over one TCP connection (IPv4 or
// IPv6), with a timeout on every send and receive. For pollenctl.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/runtime/resp/reply_reader.h"

namespace pollen::ctl {

class RespClient {
 public:
  RespClient() = default;
  ~RespClient();
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;

  // Resolves host (name, IPv4 or IPv6 literal) and connects. Unavailable on failure.
  absl::Status Connect(const std::string& host, uint16_t port, std::chrono::seconds timeout);

  // Sends one command and reads its reply. An error reply is returned as a
  // Reply of type kError (not as a failed status); a failed status means the
  // connection or the protocol broke.
  absl::StatusOr<resp::Reply> Call(const std::vector<std::string>& args);

 private:
  absl::Status SendAll(const std::string& data);
  int fd_ = -1;
  std::string buf_;
};

}  // namespace pollen::ctl
