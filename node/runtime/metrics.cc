#include "node/runtime/metrics.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "node/core/printable_name.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

class Writer {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += Cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Sample(std::string_view name, std::string_view labels, double value) {
    out_ += Cat(name);
    if (!labels.empty()) out_ += Cat("{", labels, "}");
    out_ += Cat(" ", Format(value), "\n");
  }
  void Sample(std::string_view name, std::string_view labels, uint64_t value) {
    out_ += Cat(name);
    if (!labels.empty()) out_ += Cat("{", labels, "}");
    out_ += Cat(" ", value, "\n");
  }
  void One(std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    Family(name, type, help);
    Sample(name, "", value);
  }
  void OneD(std::string_view name, std::string_view type, std::string_view help, double value) {
    Family(name, type, help);
    Sample(name, "", value);
  }
  std::string Take() { return std::move(out_); }

 private:
  static std::string Format(double v) {
    if (v != v) return "NaN";
    return Cat(v);
  }
  std::string out_;
};

std::string L(std::string_view k, std::string_view v) { return Cat(k, "=\"", EscapeLabel(v), "\""); }
std::string L2(std::string_view k1, std::string_view v1, std::string_view k2, std::string_view v2) {
  return Cat(L(k1, v1), ",", L(k2, v2));
}

// One sub-filter: its filter, generation (epoch) and layer (0 unless it scales).
std::string SubLabels(const node::FilterInfo& f, const node::GenerationInfo& g) {
  return Cat(L2("filter", node::PrintableName(f.config.name), "generation", Cat(g.epoch)), ",", L("layer", Cat(g.layer)));
}

uint64_t Get(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

std::string EscapeLabel(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// pollen_resp_command_duration_seconds (a histogram per command) and
// pollen_resp_command_errors_total, for the commands that have run.
void RenderCommandStats(Writer& w, const resp::CommandStats& stats) {
  using resp::CommandStats;
  std::vector<std::pair<std::string_view, CommandStats::Totals>> seen;
  for (size_t slot = 0; slot < CommandStats::kMaxCommands; ++slot) {
    const std::string_view name = resp::CommandSlotName(slot);
    if (name.empty()) continue;
    CommandStats::Totals t = stats.Read(slot);
    if (t.calls + t.rejected > 0) seen.emplace_back(name, t);
  }
  w.Family("pollen_resp_command_duration_seconds", "histogram",
           "Time a RESP command took to parse and execute (a deferred reply: until it was written), by command.");
  for (const auto& [name, t] : seen) {
    uint64_t cumulative = 0;
    for (size_t b = 0; b < CommandStats::kBuckets; ++b) {
      cumulative += t.buckets[b];
      const std::string le = b < CommandStats::kBoundsNs.size() ? Cat(static_cast<double>(CommandStats::kBoundsNs[b]) / 1e9) : "+Inf";
      w.Sample("pollen_resp_command_duration_seconds_bucket", L2("command", name, "le", le), cumulative);
    }
    w.Sample("pollen_resp_command_duration_seconds_sum", L("command", name), static_cast<double>(t.nanos) / 1e9);
    w.Sample("pollen_resp_command_duration_seconds_count", L("command", name), t.calls);
  }
  w.Family("pollen_resp_command_errors_total", "counter",
           "RESP commands answered with an error, by command and kind: failed (it ran; also in the duration histogram) or rejected (arity, NOAUTH; not in it).");
  for (const auto& [name, t] : seen) {
    w.Sample("pollen_resp_command_errors_total", L2("command", name, "kind", "failed"), t.failed);
    w.Sample("pollen_resp_command_errors_total", L2("command", name, "kind", "rejected"), t.rejected);
  }
}

}  // namespace

std::string RenderMetrics(const MetricsInput& in) {
  Writer w;
  const Driver::Collected& n = *in.node;
  const node::NodeCounters& c = n.counters;

  w.Family("pollen_build_info", "gauge", "Always 1; labels carry the version and node name.");
  w.Sample("pollen_build_info", L2("version", in.version, "node", in.node_name), uint64_t{1});
  w.One("pollen_ready", "gauge", "1 once state is loaded and the node joined (or timed out joining).", in.ready ? 1 : 0);

  // Per filter and generation.
  w.Family("pollen_filter_fill_ratio", "gauge", "Fraction of the generation's bits that are set.");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations)
      w.Sample("pollen_filter_fill_ratio", SubLabels(f, g), g.fill_ratio);
  w.Family("pollen_filter_estimated_items", "gauge", "Distinct keys estimated from the generation's fill.");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations)
      w.Sample("pollen_filter_estimated_items", SubLabels(f, g),
               g.estimated_items);
  w.Family("pollen_filter_estimated_fpr_ratio", "gauge",
           "False-positive rate of the generation under the blocked-filter model at its current fill.");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations)
      w.Sample("pollen_filter_estimated_fpr_ratio", SubLabels(f, g),
               g.estimated_fpr);
  w.Family("pollen_filter_set_bit_positions", "gauge", "Bits set in the generation.");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations)
      w.Sample("pollen_filter_set_bit_positions", SubLabels(f, g), g.set_bits);

  w.Family("pollen_filter_layer_capacity_items", "gauge",
           "Keys the sub-filter is sized for (a scaling filter's layer L: capacity * expansion^L).");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations) w.Sample("pollen_filter_layer_capacity_items", SubLabels(f, g), g.capacity);
  w.Family("pollen_filter_layer_items", "gauge",
           "Keys this node counts in the sub-filter: new adds here, raised to the estimate from its bits.");
  for (const auto& f : n.filters)
    for (const auto& g : f.generations) w.Sample("pollen_filter_layer_items", SubLabels(f, g), g.items);

  // Per filter.
  w.Family("pollen_filter_layers", "gauge", "Layers (sub-filters) of the filter's newest generation: 1 unless it scales.");
  for (const auto& f : n.filters) {
    uint64_t layers = 0;
    for (const auto& g : f.generations) layers += g.epoch == f.epoch ? 1 : 0;
    w.Sample("pollen_filter_layers", L("filter", node::PrintableName(f.config.name)), layers);
  }
  w.Family("pollen_filter_expansion", "gauge", "Growth factor of a scaling filter's next layer; 0 for a fixed-size filter.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_expansion", L("filter", node::PrintableName(f.config.name)), uint64_t{f.config.expansion});
  w.Family("pollen_filter_capacity_items", "gauge", "Design capacity of the filter (keys per generation).");
  for (const auto& f : n.filters) w.Sample("pollen_filter_capacity_items", L("filter", node::PrintableName(f.config.name)), f.config.capacity);
  w.Family("pollen_filter_design_fpr_ratio", "gauge", "Configured false-positive rate at design capacity.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_design_fpr_ratio", L("filter", node::PrintableName(f.config.name)), f.config.fpr);
  w.Family("pollen_filter_memory_bytes", "gauge", "Memory held by the filter's live generations.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_memory_bytes", L("filter", node::PrintableName(f.config.name)), f.memory_bytes);
  w.Family("pollen_filter_epoch", "gauge", "The filter's current epoch (newest generation).");
  for (const auto& f : n.filters) w.Sample("pollen_filter_epoch", L("filter", node::PrintableName(f.config.name)), f.epoch);
  w.Family("pollen_filter_generations", "gauge", "Live generations of the filter.");
  for (const auto& f : n.filters)
    w.Sample("pollen_filter_generations", L("filter", node::PrintableName(f.config.name)), static_cast<uint64_t>(f.generations.size()));
  w.Family("pollen_filter_blocks", "gauge", "512-bit blocks per generation.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_blocks", L("filter", node::PrintableName(f.config.name)), f.blocks);
  w.Family("pollen_filter_hash_functions", "gauge", "Bits set per key (k).");
  for (const auto& f : n.filters) w.Sample("pollen_filter_hash_functions", L("filter", node::PrintableName(f.config.name)), uint64_t{f.k});
  w.Family("pollen_filter_saturated", "gauge",
           "1 while the filter is past a saturation threshold (a fixed filter at 90% of its capacity, or its newest "
           "sub-filter over 0.6 full), else 0.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_saturated", L("filter", node::PrintableName(f.config.name)), f.saturated ? uint64_t{1} : uint64_t{0});
  w.Family("pollen_filter_queries_total", "counter", "Keys tested against the filter on this node.");
  for (const auto& f : n.filters) w.Sample("pollen_filter_queries_total", L("filter", node::PrintableName(f.config.name)), f.queries);
  w.Family("pollen_filter_answered_present_total", "counter", "Keys the filter answered \"may be present\" for on this node.");
  for (const auto& f : n.filters) {
    w.Sample("pollen_filter_answered_present_total", L("filter", node::PrintableName(f.config.name)), f.answered_present);
  }
  w.Family("pollen_filter_false_positives_total", "counter",
           "Keys answered present that clients reported absent from their exact store (POLLEN.FALSEPOSITIVE).");
  for (const auto& f : n.filters) {
    w.Sample("pollen_filter_false_positives_total", L("filter", node::PrintableName(f.config.name)), f.false_positives);
  }
  w.Family("pollen_filter_observed_fpr_ratio", "gauge",
           "Observed false-positive rate on this node since the filter appeared: over all negatives (over=\"negatives\", "
           "comparable to the design rate) and over the keys answered present (over=\"present\").");
  for (const auto& f : n.filters) {
    const node::ObservedFpr observed = node::ObservedFalsePositiveRate(f);
    const std::string name = node::PrintableName(f.config.name);
    w.Sample("pollen_filter_observed_fpr_ratio", L2("filter", name, "over", "negatives"), observed.over_negatives);
    w.Sample("pollen_filter_observed_fpr_ratio", L2("filter", name, "over", "present"), observed.over_present);
  }

  // Per node.
  w.One("pollen_adds_total", "counter", "Keys added by clients at this node.", c.adds);
  w.One("pollen_queries_total", "counter", "Keys queried by clients at this node.", c.queries);
  w.One("pollen_query_hits_total", "counter", "Queries that answered present.", c.hits);
  w.One("pollen_delta_bit_positions_sent_total", "counter", "Newly set bit positions sent to peers in deltas.", c.delta_bits_sent);
  w.One("pollen_delta_bit_positions_received_total", "counter", "Bit positions received from peers in deltas.", c.delta_bits_received);
  w.One("pollen_gossip_sent_bytes_total", "counter", "Sealed gossip bytes sent (all message types).", c.bytes_out);
  w.One("pollen_gossip_received_bytes_total", "counter", "Gossip bytes received (all message types).", c.bytes_in);
  w.One("pollen_gossip_sent_frames_total", "counter", "Gossip frames sent.", c.frames_out);
  w.One("pollen_gossip_received_frames_total", "counter", "Gossip frames received.", c.frames_in);
  w.Family("pollen_gossip_sent_by_type_bytes_total", "counter", "Gossip bytes sent by message type.");
  for (const auto& [type, v] : c.bytes_out_by_type) w.Sample("pollen_gossip_sent_by_type_bytes_total", L("type", type), v);
  w.Family("pollen_gossip_received_by_type_bytes_total", "counter", "Gossip bytes received by message type.");
  for (const auto& [type, v] : c.bytes_in_by_type)
    w.Sample("pollen_gossip_received_by_type_bytes_total", L("type", type), v);
  w.One("pollen_anti_entropy_runs_total", "counter", "Anti-entropy exchanges started or answered.", c.anti_entropy_runs);
  w.One("pollen_anti_entropy_ranges_repaired_total", "counter", "Ranges that differed and were transferred.",
        c.ranges_repaired);
  w.One("pollen_anti_entropy_continued_total", "counter",
        "Anti-entropy exchanges started at once because the last one ran out of budget with much left to repair.",
        c.anti_entropy_continued);
  w.One("pollen_anti_entropy_resumed_total", "counter",
        "Anti-entropy content legs cut by the budget and continued where they stopped, at the peer's request.",
        c.anti_entropy_resumed);
  w.One("pollen_anti_entropy_stale_ranges", "gauge",
        "Filter ranges whose anti-entropy summary is not recomputed yet since they changed (refreshed each gossip round).",
        c.stale_summary_ranges);

  w.One("pollen_epochs_advanced_total", "counter", "Epoch advances (generation rotations) applied.", c.epochs_advanced);
  w.One("pollen_layers_opened_total", "counter", "Layers scaling filters opened here (by an add, an estimate or a peer).",
        c.layers_opened);
  w.One("pollen_filters_replaced_total", "counter",
        "Filters whose local state was discarded for a winning catalog entry with other parameters.",
        c.filters_replaced);
  w.Family("pollen_filters_refused_total", "counter",
           "Peers' filters this node would not hold, by reason: over max-filter-bytes or max-memory.");
  for (const char* reason : {"max_filter_bytes", "max_memory"}) {
    auto it = c.filters_refused.find(reason);
    w.Sample("pollen_filters_refused_total", L("reason", reason), it == c.filters_refused.end() ? 0 : it->second);
  }
  w.One("pollen_filters_deleted_total", "counter",
        "Live filters removed by a tombstone (DEL on this node or on a peer).", c.filters_deleted);
  w.One("pollen_tombstones_dropped_total", "counter",
        "Oldest tombstones forgotten because the node held the maximum (4096).", c.tombstones_dropped);
  w.One("pollen_delta_overflows_total", "counter",
        "Dissemination buffers dropped because they overflowed (anti-entropy repairs).", c.delta_overflows);
  w.One("pollen_stale_deltas_total", "counter", "Deltas for epochs outside the window, dropped.", c.stale_deltas);
  w.One("pollen_unknown_filter_messages_total", "counter", "Deltas or epochs for filters not (yet) in the catalog.",
        c.unknown_filter);
  w.Family("pollen_held_deltas_total", "counter",
           "Deltas that arrived before their filter's catalog entry, by fate: held (kept for it), refused (no room), "
           "released (merged when it came), dropped (held an anti-entropy interval, or the name was deleted).");
  for (const auto& [fate, value] : {std::pair<const char*, uint64_t>{"held", c.held_deltas},
                                    {"refused", c.held_deltas_refused},
                                    {"released", c.held_deltas_released},
                                    {"dropped", c.held_deltas_dropped}}) {
    w.Sample("pollen_held_deltas_total", L("fate", fate), value);
  }
  w.One("pollen_tree_parent_changes_total", "counter",
        "Tree dissemination: times this node took another parent in the spanning tree (or became its root).",
        c.tree_parent_changes);
  w.One("pollen_tree_resends_total", "counter",
        "Tree dissemination: pushes sent again because the tree link reported them missing.", c.tree_resends);
  w.One("pollen_membership_health_score", "gauge",
        "Lifeguard local health score: 0 is healthy; the probe interval and probe timeout stretch by score + 1.",
        static_cast<uint64_t>(c.health_score));
  w.One("pollen_membership_stalls_total", "counter",
        "Membership ticks that came more than a probe timeout late: this node did not run (paused, CPU-starved).",
        c.membership_stalls);
  w.Family("pollen_routed_keys_total", "counter",
           "Owner-routed adds, in keys, by outcome: present (answered here at once), owned (decided here as owner), "
           "remote (decided by their owner), fallback (owner silent: decided here; a duplicate new is possible), "
           "served (decided here for other nodes).");
  for (const auto& [outcome, value] :
       {std::pair<const char*, uint64_t>{"present", c.routed_present}, {"owned", c.routed_owned},
        {"remote", c.routed_remote}, {"fallback", c.routed_fallbacks}, {"served", c.routed_served}}) {
    w.Sample("pollen_routed_keys_total", L("outcome", outcome), value);
  }

  // Rejections: the node's (by reason) plus the stream framer's, always every reason.
  std::map<std::string, uint64_t> rejected = {{"auth", 0},    {"version", 0}, {"malformed", 0}, {"oversize", 0},
                                              {"replay", 0},  {"params", 0},  {"unknown_key", 0}};
  for (const auto& [reason, v] : c.rejected_by_reason) rejected[reason] += v;
  rejected["oversize"] += Get(in.transport->stream_rejected_oversize);
  rejected["malformed"] += Get(in.transport->stream_rejected_malformed);
  w.Family("pollen_frames_rejected_total", "counter",
           "Gossip datagrams and stream frames refused (authentication and decode failures) by reason.");
  for (const auto& [reason, v] : rejected) w.Sample("pollen_frames_rejected_total", L("reason", reason), v);

  std::map<std::string, uint64_t> by_state = {{"alive", 0}, {"suspect", 0}, {"dead", 0}, {"left", 0}};
  for (const auto& m : n.members) {
    switch (m.state) {
      case node::MemberState::kAlive: ++by_state["alive"]; break;
      case node::MemberState::kSuspect: ++by_state["suspect"]; break;
      case node::MemberState::kDead: ++by_state["dead"]; break;
      case node::MemberState::kLeft: ++by_state["left"]; break;
    }
  }
  w.Family("pollen_members", "gauge", "Cluster members known to this node (itself included) by state.");
  for (const auto& [state, v] : by_state) w.Sample("pollen_members", L("state", state), v);
  // Per peer: only alive or suspect members (dead and left ones would report
  // ever-growing or stale values).
  auto live = [](const node::PeerStats& p) {
    return p.state == node::MemberState::kAlive || p.state == node::MemberState::kSuspect;
  };
  w.Family("pollen_probe_rtt_seconds", "gauge",
           "Round-trip time of the last answered direct probe of each live peer (never answered: omitted).");
  for (const node::PeerStats& p : n.peers) {
    if (!live(p) || !p.probe_rtt) continue;
    w.Sample("pollen_probe_rtt_seconds", L("peer", p.name), std::chrono::duration<double>(*p.probe_rtt).count());
  }
  w.Family("pollen_replication_lag_seconds", "gauge",
           "Seconds since the last delta or anti-entropy sync message from each live peer (never: omitted).");
  for (const node::PeerStats& p : n.peers) {
    if (!live(p) || !p.since_data) continue;
    w.Sample("pollen_replication_lag_seconds", L("peer", p.name), std::chrono::duration<double>(*p.since_data).count());
  }
  uint64_t never_synced = 0;
  for (const node::PeerStats& p : n.peers) {
    if (live(p) && !p.since_data) ++never_synced;
  }
  w.One("pollen_replication_never_synced_peers", "gauge",
        "Alive or suspect peers from which no delta or sync data has arrived yet.", never_synced);
  w.One("pollen_keyring_keys", "gauge", "Gossip keys installed in the keyring.", static_cast<uint64_t>(n.key_ids.size()));

  // Transports.
  const RuntimeCounters& t = *in.transport;
  w.One("pollen_udp_received_datagrams_total", "counter", "UDP datagrams received.", Get(t.udp_datagrams_in));
  w.One("pollen_udp_sent_datagrams_total", "counter", "UDP datagrams sent.", Get(t.udp_datagrams_out));
  w.One("pollen_udp_send_errors_total", "counter", "UDP sends that failed.", Get(t.udp_send_errors));
  w.One("pollen_udp_dropped_datagrams_total", "counter", "UDP datagrams dropped because too many were in flight.",
        Get(t.udp_dropped_queue_full));
  w.One("pollen_tcp_received_frames_total", "counter", "Stream frames received over TCP.", Get(t.tcp_frames_in));
  w.One("pollen_tcp_sent_frames_total", "counter", "Stream frames written to TCP.", Get(t.tcp_frames_out));
  w.One("pollen_tcp_connects_total", "counter", "Outbound TCP connections established.", Get(t.tcp_connects));
  w.One("pollen_tcp_connect_failures_total", "counter", "Outbound TCP connections that failed.",
        Get(t.tcp_connect_failures));
  w.One("pollen_tcp_connect_timeouts_total", "counter",
        "Outbound TCP connections abandoned for not connecting within 2 s (the peer then backs off).",
        Get(t.tcp_connect_timeouts));
  w.One("pollen_tcp_accepts_total", "counter", "Inbound TCP connections accepted.", Get(t.tcp_accepts));
  w.One("pollen_tcp_accept_refused_total", "counter", "Inbound TCP connections refused (limit).",
        Get(t.tcp_accept_refused));
  w.Family("pollen_tcp_dropped_frames_total", "counter", "Stream frames dropped before sending, by reason.");
  w.Sample("pollen_tcp_dropped_frames_total", L("reason", "backoff"), Get(t.tcp_dropped_backoff));
  w.Sample("pollen_tcp_dropped_frames_total", L("reason", "queue_full"), Get(t.tcp_dropped_queue_full));
  w.One("pollen_tcp_connections", "gauge", "Open gossip TCP connections.", Get(t.tcp_connections));
  w.One("pollen_unresolved_peer_total", "counter", "Sends to an address that did not resolve.", Get(t.unresolved_peer));

  if (in.resp != nullptr) {
    const resp::ServerCounters& r = *in.resp;
    w.One("pollen_resp_connections_accepted_total", "counter", "RESP client connections accepted.",
          Get(r.connections_accepted));
    w.One("pollen_resp_connections_rejected_total", "counter", "RESP connections refused (max clients).",
          Get(r.connections_rejected));
    w.One("pollen_resp_connections", "gauge", "Open RESP client connections.", Get(r.connections_current));
    w.One("pollen_resp_commands_total", "counter", "RESP commands processed.", Get(r.commands_processed));
    w.One("pollen_resp_error_replies_total", "counter", "RESP error replies sent.", Get(r.error_replies));
    w.One("pollen_resp_protocol_errors_total", "counter", "Malformed RESP requests.", Get(r.protocol_errors));
    w.One("pollen_resp_auth_failures_total", "counter", "RESP authentication failures.", Get(r.auth_failures));
    w.One("pollen_resp_loadchunk_refused_total", "counter", "BF.LOADCHUNK chunks refused (the reason is logged).",
          Get(r.loadchunk_refused));
    w.Family("pollen_resp_disconnects_total", "counter", "RESP clients disconnected by the server, by reason.");
    w.Sample("pollen_resp_disconnects_total", L("reason", "output_limit"), Get(r.output_limit_disconnects));
    w.Sample("pollen_resp_disconnects_total", L("reason", "idle"), Get(r.idle_disconnects));
    w.One("pollen_resp_received_bytes_total", "counter", "Bytes received from RESP clients.", Get(r.bytes_in));
    w.One("pollen_resp_sent_bytes_total", "counter", "Bytes sent to RESP clients.", Get(r.bytes_out));
    w.One("pollen_resp_keys_added_total", "counter", "Keys in BF.ADD/MADD/INSERT commands.", Get(r.keys_added));
    w.One("pollen_resp_keys_queried_total", "counter", "Keys in BF.EXISTS/MEXISTS commands.", Get(r.keys_queried));
    w.One("pollen_resp_batched_requests_total", "counter",
          "BF.ADD/BF.EXISTS requests executed in pipelined runs of two or more.", Get(r.batched_requests));
  }
  if (in.command_stats != nullptr) RenderCommandStats(w, *in.command_stats);
  if (in.persistence != nullptr) {
    const Persistence& p = *in.persistence;
    w.One("pollen_snapshots_total", "counter", "Snapshots written.", p.snapshots_written());
    w.One("pollen_snapshot_failures_total", "counter", "Snapshots that failed.", p.snapshot_failures());
    w.One("pollen_snapshot_bytes_written_total", "counter", "Bytes snapshots wrote (filter files and tombstones).",
          p.snapshot_bytes_written());
    w.One("pollen_snapshot_deltas_total", "counter",
          "Filter files a snapshot wrote as deltas: the blocks changed since the filter's previous file.",
          p.snapshot_deltas_written());
    w.One("pollen_snapshot_files_skipped_total", "counter",
          "Filter files a snapshot did not rewrite: the filter had not changed since its file was written.",
          p.snapshot_files_skipped());
    w.One("pollen_snapshot_last_success_timestamp_seconds", "gauge", "Unix time of the last snapshot (0: none yet).",
          p.last_snapshot_unix());
    w.One("pollen_addlog_records_total", "counter", "Add-log records appended since start.", p.log_records());
    w.One("pollen_addlog_fsyncs_total", "counter", "Add-log fsync calls since start.", p.log_fsyncs());
    w.One("pollen_addlog_create_records_total", "counter",
          "Add-log create records (a filter's catalog entry) appended since start.", p.create_records());
  }
  return w.Take();
}

}  // namespace pollen::runtime
