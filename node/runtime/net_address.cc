#include "node/runtime/net_address.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

bool IsHostname(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') return false;
  }
  return h.front() != '-' && h.front() != '.';
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError("expected [ipv6]:port");
    }
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
    in6_addr a6;
    if (hp.host.size() > 64 || inet_pton(AF_INET6, hp.host.c_str(), &a6) != 1) {
      return absl::InvalidArgumentError("bad IPv6 address");
    }
    hp.numeric = true;
    hp.ipv6 = true;
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return absl::InvalidArgumentError("expected host:port");
    hp.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (hp.host.find(':') != std::string::npos) return absl::InvalidArgumentError("IPv6 needs [brackets]");
    in_addr a4;
    if (inet_pton(AF_INET, hp.host.c_str(), &a4) == 1) {
      hp.numeric = true;
    } else if (!IsHostname(hp.host)) {
      return absl::InvalidArgumentError("bad host");
    }
  }
  uint32_t p = 0;
  if (port.empty() || port.size() > 5 || !ParseUnsigned(port, &p) || p > 65535 ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port[0]))) {
    return absl::InvalidArgumentError("bad port");
  }
  hp.port = static_cast<uint16_t>(p);
  return hp;
}

std::string FormatHostPort(std::string_view host, uint16_t port) {
  if (host.find(':') != std::string_view::npos) return Cat("[", host, "]:", port);
  return Cat(host, ":", port);
}

bool IsUnspecifiedHost(std::string_view host) { return host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0"; }

}  // namespace pollen::runtime
