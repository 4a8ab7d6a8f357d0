// POLLEN.* commands. Replies describing an object are flat field/value arrays
// (the RESP2 rendering of a map), so generic clients and pollenctl --json can
// turn them into objects.
#include <cmath>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

std::string_view StateName(node::MemberState s) {
  switch (s) {
    case node::MemberState::kAlive: return "alive";
    case node::MemberState::kSuspect: return "suspect";
    case node::MemberState::kDead: return "dead";
    case node::MemberState::kLeft: return "left";
  }
  return "unknown";
}

int64_t Clamp(uint64_t v) { return static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX)); }

// Layers of the newest generation: 1 unless the filter scales.
size_t NewestLayers(const node::FilterInfo& f) {
  size_t layers = 0;
  for (const node::GenerationInfo& g : f.generations) layers += g.epoch == f.epoch;
  return std::max<size_t>(layers, 1);
}

void AppendFilter(std::string* out, const node::FilterInfo& f) {
  double items = 0, miss = 1;
  for (const node::GenerationInfo& g : f.generations) {
    items += g.estimated_items;
    miss *= 1 - g.estimated_fpr;  // a read checks every live generation
  }
  const double fill = f.generations.empty() ? 0 : f.generations.back().fill_ratio;
  const node::ObservedFpr observed = node::ObservedFalsePositiveRate(f);
  AppendArrayHeader(out, 44);
  AppendBulk(out, "name"), AppendBulk(out, f.config.name);
  AppendBulk(out, "scope"), AppendBulk(out, f.config.scope == node::Scope::kDigest ? "digest" : "shared");
  AppendBulk(out, "owner"), AppendBulk(out, f.config.owner);
  AppendBulk(out, "capacity"), AppendInteger(out, Clamp(f.config.capacity));
  AppendBulk(out, "fpr"), AppendDouble(out, f.config.fpr);
  AppendBulk(out, "generations"), AppendInteger(out, f.config.generations);
  AppendBulk(out, "live_generations"), AppendInteger(out, static_cast<int64_t>(f.generations.size()));
  AppendBulk(out, "epoch"), AppendInteger(out, Clamp(f.epoch));
  AppendBulk(out, "blocks"), AppendInteger(out, Clamp(f.blocks));
  AppendBulk(out, "k"), AppendInteger(out, f.k);
  AppendBulk(out, "memory_bytes"), AppendInteger(out, Clamp(f.memory_bytes));
  AppendBulk(out, "fill_ratio"), AppendDouble(out, fill);
  AppendBulk(out, "estimated_items"), AppendInteger(out, std::isfinite(items) ? std::llround(std::min(items, 9e18)) : 0);
  AppendBulk(out, "estimated_fpr"), AppendDouble(out, 1 - miss);
  AppendBulk(out, "rotate_fill"), AppendDouble(out, f.config.rotate_fill);
  AppendBulk(out, "saturated"), AppendInteger(out, f.saturated ? 1 : 0);
  AppendBulk(out, "queries"), AppendInteger(out, Clamp(f.queries));
  AppendBulk(out, "answered_present"), AppendInteger(out, Clamp(f.answered_present));
  AppendBulk(out, "false_positives"), AppendInteger(out, Clamp(f.false_positives));
  AppendBulk(out, "observed_fpr"), AppendDouble(out, observed.over_negatives);
  AppendBulk(out, "observed_fpr_of_present"), AppendDouble(out, observed.over_present);
  AppendBulk(out, "layers"), AppendInteger(out, static_cast<int64_t>(NewestLayers(f)));
}

bool ParseKeyId(std::string_view s, uint64_t* id) { return ParseUint64(s, id); }

}  // namespace

void CmdPollenStatus(CommandCall& call) {
  ServerContext& ctx = call.ctx;
  absl::StatusOr<NodeView> view = CollectNodeView(ctx);
  if (!view.ok()) return ReplyStatus(call.out, view.status());
  const std::vector<node::MemberInfo>& members = view->members;
  size_t alive = 0, suspect = 0, dead = 0;
  for (const auto& m : members) {
    alive += m.state == node::MemberState::kAlive;
    suspect += m.state == node::MemberState::kSuspect;
    dead += m.state == node::MemberState::kDead;
  }
  const size_t filters = view->filters.size();
  const node::NodeCounters& nc = view->counters;
  const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - ctx.start_time);
  std::string* out = call.out;
  AppendArrayHeader(out, 26);
  AppendBulk(out, "node"), AppendBulk(out, ctx.node->name());
  AppendBulk(out, "version"), AppendBulk(out, ctx.version);
  AppendBulk(out, "uptime_seconds"), AppendInteger(out, up.count());
  AppendBulk(out, "members"), AppendInteger(out, static_cast<int64_t>(members.size()));
  AppendBulk(out, "members_alive"), AppendInteger(out, static_cast<int64_t>(alive));
  AppendBulk(out, "members_suspect"), AppendInteger(out, static_cast<int64_t>(suspect));
  AppendBulk(out, "members_dead"), AppendInteger(out, static_cast<int64_t>(dead));
  AppendBulk(out, "filters"), AppendInteger(out, static_cast<int64_t>(filters));
  AppendBulk(out, "connected_clients"),
      AppendInteger(out, Clamp(ctx.counters.connections_current.load(std::memory_order_relaxed)));
  AppendBulk(out, "adds"), AppendInteger(out, Clamp(nc.adds));
  AppendBulk(out, "queries"), AppendInteger(out, Clamp(nc.queries));
  AppendBulk(out, "delta_bits_sent"), AppendInteger(out, Clamp(nc.delta_bits_sent));
  AppendBulk(out, "delta_bits_received"), AppendInteger(out, Clamp(nc.delta_bits_received));
}

void CmdPollenMembers(CommandCall& call) {
  absl::StatusOr<NodeView> view = CollectNodeView(call.ctx);
  if (!view.ok()) return ReplyStatus(call.out, view.status());
  const std::vector<node::MemberInfo>& members = view->members;
  AppendArrayHeader(call.out, members.size());
  for (const node::MemberInfo& m : members) {
    AppendArrayHeader(call.out, 8);
    AppendBulk(call.out, "name"), AppendBulk(call.out, m.name);
    AppendBulk(call.out, "address"), AppendBulk(call.out, m.address);
    AppendBulk(call.out, "state"), AppendBulk(call.out, StateName(m.state));
    AppendBulk(call.out, "incarnation"), AppendInteger(call.out, Clamp(m.incarnation));
  }
}

void CmdPollenFilters(CommandCall& call) {
  absl::StatusOr<NodeView> view = CollectNodeView(call.ctx);
  if (!view.ok()) return ReplyStatus(call.out, view.status());
  const std::vector<node::FilterInfo>& filters = view->filters;
  AppendArrayHeader(call.out, filters.size() + view->refused.size());
  for (const node::FilterInfo& f : filters) AppendFilter(call.out, f);
  // Filters of the catalog this node does not hold (its memory budget): a
  // shorter entry, told apart by held 0.
  for (const node::Node::RefusedFilter& r : view->refused) {
    AppendArrayHeader(call.out, 12);
    AppendBulk(call.out, "name"), AppendBulk(call.out, r.name);
    AppendBulk(call.out, "held"), AppendInteger(call.out, 0);
    AppendBulk(call.out, "refused_reason"), AppendBulk(call.out, r.reason);
    AppendBulk(call.out, "memory_bytes_needed"), AppendInteger(call.out, Clamp(r.bytes));
    AppendBulk(call.out, "creator"), AppendBulk(call.out, r.creator);
    AppendBulk(call.out, "detail"), AppendBulk(call.out, r.detail);
  }
}

// POLLEN.FALSEPOSITIVE filter [count]: the client's exact store found `count`
// (default 1) keys absent that this filter had answered present for. Replies
// with the filter's total reported on this node.
void CmdPollenFalsePositive(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() > 3) return AppendError(call.out, "ERR wrong number of arguments for 'pollen.falsepositive' command");
  uint64_t count = 1;
  if (a.size() == 3 && (!ParseUint64(a[2], &count) || count < 1 || count > node::kMaxFalsePositiveReport)) {
    return AppendError(call.out, Cat("ERR count must be an integer from 1 to ", node::kMaxFalsePositiveReport));
  }
  absl::StatusOr<uint64_t> total = call.ctx.node->ReportFalsePositives(a[1], count);
  if (!total.ok()) return ReplyStatus(call.out, total.status());
  AppendInteger(call.out, Clamp(*total));
}

void CmdPollenRotate(CommandCall& call) {
  ServerContext& ctx = call.ctx;
  const std::string filter(call.args[1]);
  const absl::Status s = RunOnDriver(ctx, [&ctx, &filter](node::Time now) { return ctx.node->Rotate(filter, now); });
  if (!s.ok()) return ReplyStatus(call.out, s);
  AppendSimple(call.out, "OK");
}

void CmdPollenWhoHas(CommandCall& call) {
  std::vector<std::string> digests;
  if (call.args[1] != "*") {
    for (std::string_view d : SplitSkipEmpty(call.args[1], ',')) {
      if (digests.size() >= 4096) return AppendError(call.out, "ERR too many digests");
      digests.emplace_back(d);
    }
    if (digests.empty()) return AppendError(call.out, "ERR empty digest set (use * for all)");
  }
  call.ctx.counters.keys_queried.fetch_add(1, std::memory_order_relaxed);
  const std::vector<std::string> owners = call.ctx.node->WhoHas(digests, call.args[2]);
  AppendArrayHeader(call.out, owners.size());
  for (const std::string& o : owners) AppendBulk(call.out, o);
}

void CmdPollenKeyring(CommandCall& call) {
  ServerContext& ctx = call.ctx;
  const auto& a = call.args;
  const std::string_view sub = a[1];
  if (IEquals(sub, "LIST") && a.size() == 2) {
    std::vector<uint64_t> ids;
    const absl::Status s = RunOnDriver(ctx, [&ctx, &ids](node::Time) {
      ids = ctx.node->KeyringList();
      return absl::OkStatus();
    });
    if (!s.ok()) return ReplyStatus(call.out, s);
    AppendArrayHeader(call.out, ids.size());  // primary first; decimal strings (ids are 64-bit unsigned)
    for (uint64_t id : ids) AppendBulk(call.out, Cat(id));
    return;
  }
  if (IEquals(sub, "INSTALL") && a.size() == 3) {
    std::string key;
    if (!absl::Base64Unescape(absl::string_view(a[2].data(), a[2].size()), &key) || key.size() != 32) {
      return AppendError(call.out, "ERR keyring key must be 32 bytes, base64-encoded");
    }
    const absl::Status s = RunOnDriver(ctx, [&ctx, &key](node::Time) { return ctx.node->KeyringInstall(key); });
    std::fill(key.begin(), key.end(), '\0');
    if (!s.ok()) return ReplyStatus(call.out, s);
    return AppendSimple(call.out, "OK");
  }
  if ((IEquals(sub, "USE") || IEquals(sub, "REMOVE")) && a.size() == 3) {
    uint64_t id = 0;
    if (!ParseKeyId(a[2], &id)) return AppendError(call.out, "ERR key id must be an unsigned 64-bit integer");
    const bool use = IEquals(sub, "USE");
    const absl::Status s = RunOnDriver(ctx, [&ctx, id, use](node::Time) {
      return use ? ctx.node->KeyringUse(id) : ctx.node->KeyringRemove(id);
    });
    if (!s.ok()) return ReplyStatus(call.out, s);
    return AppendSimple(call.out, "OK");
  }
  if (IEquals(sub, "LIST") || IEquals(sub, "INSTALL") || IEquals(sub, "USE") || IEquals(sub, "REMOVE")) {
    return AppendError(call.out,
                       Cat("ERR wrong number of arguments for 'pollen.keyring|", Lower(sub), "' command"));
  }
  AppendError(call.out, Cat("ERR unknown subcommand '", sub.substr(0, 128), "'. Try INSTALL, USE, REMOVE or LIST."));
}

// POLLEN.SNAPSHOT: answers once a snapshot that began after the command is
// written. The client waits; its RESP thread serves its other clients
// meanwhile (a base of a big filter takes seconds).
void CmdPollenSnapshot(CommandCall& call) {
  if (!call.ctx.snapshot) return AppendError(call.out, "ERR snapshot not available");
  ReplyAfterSnapshot(call, [](const absl::StatusOr<std::string>& r, std::string* out) {
    if (!r.ok()) return ReplyStatus(out, r.status());
    AppendBulk(out, *r);
  });
}

}  // namespace pollen::resp
