// Fuzzes Membership::Handle with sequences of messages. Each input builds a
// fresh instance (so a crash replays from the input alone) and feeds it up to
// kMaxSteps messages, each [length: 1 byte; 255 = the rest][bytes], where the
// bytes' first byte picks the sender and the form: odd, a structured message
// built from the rest; even, the rest parsed as a wire::MembershipMessage.
// Time moves forward and Tick() runs in between. Whatever arrives, the member
// table, the outgoing queue and the pending relays stay within their bounds,
// and Tick always moves the wakeup forward.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "node/core/membership.h"

namespace {

using namespace std::chrono_literals;
using pollen::node::Membership;
using pollen::node::MembershipConfig;
using pollen::node::Time;

constexpr size_t kMaxMembers = 32;
constexpr size_t kMaxSteps = 16;

std::unique_ptr<Membership> FreshInstance() {
  MembershipConfig c;
  c.self_name = "self";
  c.self_address = "self:1";
  c.seeds = {"seed:1"};
  c.max_members = kMaxMembers;
  auto out = std::make_unique<Membership>(c, 1);
  out->Start(Time{0});
  // A few real members, so ping-reqs and probes have something to act on.
  pollen::wire::MembershipMessage join;
  join.set_sender("seed");
  auto* pp = join.mutable_push_pull();
  pp->set_reply(true);
  for (const char* name : {"seed", "a", "b", "c"}) {
    auto* u = pp->add_members();
    u->set_name(name);
    u->set_address(std::string(name) + ":1");
  }
  out->Handle("seed:1", join, Time{0});
  (void)out->TakeOutgoing();
  (void)out->TakeEvents();
  return out;
}

// Builds a well-formed-ish message from the bytes, so inputs reach the
// protocol logic rather than only the parser: names from a small set (so they
// collide with real members), any status value, incarnations and seqs.
pollen::wire::MembershipMessage Structured(const uint8_t* data, size_t size, uint64_t own_digest) {
  static const char* kNames[] = {"self", "seed", "a", "b", "c", "d", "e", "", "zz"};
  size_t pos = 0;
  auto next = [&]() -> uint8_t { return pos < size ? data[pos++] : 0; };
  auto name = [&] { return std::string(kNames[next() % 9]); };
  pollen::wire::MembershipMessage msg;
  msg.set_sender(name());
  switch (next() % 6) {
    case 0:
      msg.mutable_ping()->set_seq(next());
      msg.mutable_ping()->set_target(name());
      msg.mutable_ping()->set_reliable(next() & 1);
      break;
    case 1:
      msg.mutable_ack()->set_seq(next());
      break;
    case 2:
      msg.mutable_ping_req()->set_seq(next());
      msg.mutable_ping_req()->set_target(name());
      msg.mutable_ping_req()->set_target_address(name() + ":1");
      break;
    case 3: {
      const uint8_t flags = next();
      msg.mutable_push_pull()->set_join(flags & 1);
      msg.mutable_push_pull()->set_reply(flags & 2);
      // A summary: its digest is either this instance's own (the equal
      // tables' path) or a byte's worth of noise.
      msg.mutable_push_pull()->set_summary(flags & 4);
      msg.mutable_push_pull()->set_table_digest((flags & 8) ? own_digest : next());
      break;
    }
    case 4:
      msg.mutable_gossip();
      break;
    default:
      break;  // no body
  }
  while (pos + 3 <= size) {
    pollen::wire::MemberUpdate* u =
        msg.has_push_pull() && (next() & 1) ? msg.mutable_push_pull()->add_members() : msg.add_updates();
    u->set_name(name());
    u->set_address(name() + ":1");
    u->set_incarnation(next() % 8);
    u->set_status(static_cast<pollen::wire::MemberStatus>(next() % 5));
  }
  return msg;
}

// One message from `bytes` (non-empty) into `m` at `now`, then the checks.
void Step(Membership& m, std::string_view bytes, Time& now) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  pollen::wire::MembershipMessage msg;
  if (data[0] & 1) {
    msg = Structured(data + 1, size - 1, m.TableDigest());
  } else if (!msg.ParseFromArray(data + 1, static_cast<int>(size - 1))) {
    return;
  }
  static const char* kFrom[] = {"seed:1", "a:1", "b:1", "x:1"};
  const std::string from = kFrom[(data[0] >> 1) % 4];
  m.Handle(from, msg, now);
  if (m.Members().size() > kMaxMembers) std::abort();
  auto out = m.TakeOutgoing();
  // One reply, one self-news message, relayed acks/pings and notifications.
  if (out.size() > 3 + Membership::kMaxNotify) std::abort();
  for (const auto& s : out) {
    if (static_cast<size_t>(s.msg->updates_size()) > m.config().max_piggyback + 2) std::abort();
    if (s.msg->has_push_pull() && static_cast<size_t>(s.msg->push_pull().members_size()) > kMaxMembers) std::abort();
  }
  m.TakeEvents();
  now += 37ms * (1 + (data[0] >> 3));  // up to ~1.2 s, so timeouts and suspicion fire
  if (m.NextWakeup() <= now) {
    m.Tick(now);
    if (m.NextWakeup() <= now) std::abort();
    auto ticked = m.TakeOutgoing();
    if (ticked.size() > 2 * Membership::kMaxSeeds + Membership::kMaxNotify + 16) std::abort();
    m.TakeEvents();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<Membership> m = FreshInstance();
  Time now{0};
  size_t at = 0;
  for (size_t step = 0; step < kMaxSteps && at < size; ++step) {
    const size_t length = data[at] == 255 ? size - at - 1 : std::min<size_t>(data[at], size - at - 1);
    const std::string_view bytes(reinterpret_cast<const char*>(data + at + 1), length);
    at += 1 + length;
    if (!bytes.empty()) Step(*m, bytes, now);
  }
  return 0;
}
