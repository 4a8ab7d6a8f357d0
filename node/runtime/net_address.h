// Host:port strings as pollend uses them for node::Address values.
//
// Forms: "1.2.3.4:7946", "[::1]:7946", "name.example:7946" (hostnames only where
// a peer address is expected; binds need numeric IPs). Parsing is strict:
// port 0..65535, no trailing bytes, brackets exactly around IPv6 literals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pollen::runtime {

struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;
  bool numeric = false;  // host is an IPv4 or IPv6 literal
  bool ipv6 = false;
};

absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

// "[v6]:port" for IPv6 hosts, "host:port" otherwise.
std::string FormatHostPort(std::string_view host, uint16_t port);

// 0.0.0.0 or :: (a wildcard bind that cannot be advertised).
bool IsUnspecifiedHost(std::string_view host);

}  // namespace pollen::runtime
