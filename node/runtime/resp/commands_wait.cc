// Commands that ask peers (node/core/peer_checks.h): WAIT numreplicas
// timeout, and POLLEN.QEXISTS key replicas item [item ...]. Both defer their
// reply (Session::defer): the client waits, the RESP thread does not.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "node/runtime/resp/commands.h"

namespace pollen::resp {

uint64_t IncarnationOf(const node::Node& node, std::string_view filter) {
  const std::optional<node::FilterVersion> v = node.Version(filter);
  return v.has_value() ? v->incarnation : 0;
}

void WaitRecord::Add(std::string_view filter, std::span<const std::string_view> items,
                     absl::FunctionRef<uint64_t()> incarnation_of) {
  if (overflowed || items.empty()) return;
  size_t added_bytes = 0;
  for (std::string_view item : items) added_bytes += item.size() + sizeof(uint32_t);
  static_assert(kMaxKeys <= node::kMaxWaitKeys);
  if (count + items.size() > kMaxKeys || bytes + added_bytes > kMaxBytes) {
    keys.clear();
    count = bytes = 0;
    overflowed = true;
    return;
  }
  auto it = keys.find(filter);
  if (it == keys.end()) {
    const uint64_t incarnation = incarnation_of();
    if (incarnation == 0) return;  // deleted since the add: nothing to hold
    it = keys.emplace(std::string(filter), FilterKeys{incarnation, {}}).first;
  }
  std::string& buf = it->second.records;
  for (std::string_view item : items) {
    const uint32_t n = static_cast<uint32_t>(item.size());
    buf.append(reinterpret_cast<const char*>(&n), sizeof(n));
    buf.append(item);
  }
  count += items.size();
  bytes += added_bytes;
}

std::vector<node::KeyBatch> WaitRecord::Batches(const std::function<uint64_t(std::string_view)>& current_of,
                                                bool* stale) const {
  std::vector<node::KeyBatch> out;
  *stale = false;
  for (const auto& [filter, recorded] : keys) {
    const uint64_t current = current_of(filter);
    if (current != recorded.incarnation) {
      if (current != 0) *stale = true;
      continue;
    }
    const std::string& buf = recorded.records;
    node::KeyBatch batch{filter, {}, recorded.incarnation};
    // Bounded by the buffer: every record is a u32 length and that many bytes.
    for (size_t pos = 0; pos + sizeof(uint32_t) <= buf.size();) {
      uint32_t n = 0;
      std::memcpy(&n, buf.data() + pos, sizeof(n));
      pos += sizeof(n);
      assert(pos + n <= buf.size());
      batch.keys.emplace_back(buf.data() + pos, n);
      pos += n;
    }
    out.push_back(std::move(batch));
  }
  return out;
}

// WAIT numreplicas timeout (Redis): answers the number of peers that hold
// every key this connection added (since its last WAIT that every live peer
// acknowledged), once numreplicas of them do, or at the timeout (ms; 0:
// none). The peers are sent the keys and acknowledge them, so it takes a
// round trip, not a gossip delay. Inside EXEC, and when the connection's
// adds overflowed its record, it answers 0 at once: it cannot vouch for them.
void CmdWait(CommandCall& call) {
  int64_t replicas = 0, timeout = 0;
  if (!ParseInt64(call.args[1], &replicas)) return AppendError(call.out, "ERR value is not an integer or out of range");
  if (!ParseInt64(call.args[2], &timeout)) return AppendError(call.out, "ERR timeout is not an integer or out of range");
  if (timeout < 0) return AppendError(call.out, "ERR timeout is negative");
  Session& session = call.session;
  node::Node* node = call.ctx.node;
  bool stale = false;
  auto batches = std::make_shared<std::vector<node::KeyBatch>>(
      session.wait_record.Batches([node](std::string_view filter) { return IncarnationOf(*node, filter); }, &stale));
  if (session.wait_record.overflowed || stale) {
    session.wait_record = WaitRecord{};  // later WAITs cover the keys added from now on
    return AppendInteger(call.out, 0);
  }
  if (!call.ctx.peer_check || !session.defer) return AppendInteger(call.out, 0);
  const uint32_t wanted = static_cast<uint32_t>(std::clamp<int64_t>(replicas, 0, std::numeric_limits<uint32_t>::max()));
  const node::Duration limit = std::chrono::milliseconds(std::min<int64_t>(timeout, int64_t{1} << 40));
  DeferredReply reply = session.defer();
  call.ctx.peer_check(
      [node, batches, wanted, limit](node::Time now) { return node->BeginWait(*batches, wanted, limit, now); },
      [reply](absl::StatusOr<node::PeerCheckResult> result) {
        reply([result = std::move(result)](Session& s, std::string* out) {
          if (!result.ok()) return ReplyStatus(out, result.status());
          // Every live peer holds every key: the next WAIT need not send them.
          if (result->every_live_peer) s.wait_record = WaitRecord{};
          AppendInteger(out, result->peers_acked);
        });
      });
}

// POLLEN.QEXISTS key replicas item [item ...]: BF.MEXISTS that also asks
// up to `replicas` random live peers (at most node::kMaxQuorumPeers) about
// the items absent here; 1 if any says present. Not inside EXEC.
void CmdPollenQExists(CommandCall& call) {
  int64_t replicas = 0;
  if (!ParseInt64(call.args[2], &replicas) || replicas < 0) {
    return AppendError(call.out, "ERR value is not an integer or out of range");
  }
  if (!call.ctx.peer_check) return AppendError(call.out, "ERR driver unavailable");
  if (!call.session.defer) return AppendError(call.out, "ERR POLLEN.QEXISTS cannot run inside a transaction");
  call.ctx.counters.keys_queried.fetch_add(call.args.size() - 3, std::memory_order_relaxed);
  auto filter = std::make_shared<std::string>(call.args[1]);
  auto items = std::make_shared<std::vector<std::string>>(call.args.begin() + 3, call.args.end());
  const uint32_t wanted = static_cast<uint32_t>(std::min<int64_t>(replicas, node::kMaxQuorumPeers));
  node::Node* node = call.ctx.node;
  DeferredReply reply = call.session.defer();
  call.ctx.peer_check(
      [node, filter, items, wanted](node::Time now) {
        std::vector<std::string_view> views(items->begin(), items->end());
        return node->BeginQuorumExists(*filter, views, wanted, now);
      },
      [reply, n = items->size()](absl::StatusOr<node::PeerCheckResult> result) {
        reply([result = std::move(result), n](Session&, std::string* out) {
          // RedisBloom: an unknown filter answers 0 for every item.
          const bool unknown = absl::IsNotFound(result.status());
          if (!result.ok() && !unknown) return ReplyStatus(out, result.status());
          AppendArrayHeader(out, n);
          for (size_t i = 0; i < n; ++i) AppendInteger(out, !unknown && result->present[i] ? 1 : 0);
        });
      });
}

}  // namespace pollen::resp
