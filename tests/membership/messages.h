// Hand-made membership messages for the single-instance tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/membership.pb.h"

namespace pollen::node::testing {

// An update about `name` at address name + ":1"; `accuser` only on suspect ones.
inline wire::MemberUpdate Update(const std::string& name, uint64_t inc, wire::MemberStatus status,
                                 const std::string& accuser = "") {
  wire::MemberUpdate u;
  u.set_name(name);
  u.set_address(name + ":1");
  u.set_incarnation(inc);
  u.set_status(status);
  u.set_accuser(accuser);
  return u;
}

// A gossip message from `sender` carrying `updates`.
inline wire::MembershipMessage Gossip(const std::string& sender, std::vector<wire::MemberUpdate> updates) {
  wire::MembershipMessage m;
  m.set_sender(sender);
  m.mutable_gossip();
  for (auto& u : updates) *m.add_updates() = u;
  return m;
}

}  // namespace pollen::node::testing
