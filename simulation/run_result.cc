#include "simulation/run_result.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pollen::sim {

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonMap(const std::map<std::string, uint64_t>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) absl::StrAppend(&out, out.size() > 1 ? "," : "", JsonString(k), ":", v);
  return out + "}";
}

std::string Seconds(double s) { return s < 0 ? std::string("n/a") : absl::StrFormat("%.3fs", s); }

}  // namespace

std::string FormatOneLine(const RunResult& r) {
  return absl::StrFormat(
      "%s seed=%d nodes=%d scenario=%s faults=%s converged_in=%s p99.9=%s tx/bit=%.2f bytes/key=%.0f "
      "failures=%d trace=%016x",
      r.passed ? "PASS" : "FAIL", r.seed, r.nodes, r.scenario.empty() ? "-" : r.scenario, r.faults,
      Seconds(r.convergence_seconds), Seconds(r.p999_median), r.transmissions_per_bit, r.bytes_per_new_key,
      r.failure_count, r.trace_hash);
}

std::string FormatSummary(const RunResult& r) {
  std::string out;
  absl::StrAppendFormat(&out, "pollen-sim: %s\n", r.passed ? "PASS" : "FAIL");
  absl::StrAppendFormat(&out, "  seed %d, %d nodes, %s dissemination, fanout %d, scenario %s\n", r.seed, r.nodes,
                        r.dissemination, r.fanout,
                        r.scenario.empty() ? "-" : r.scenario);
  absl::StrAppendFormat(&out, "  faults: %s\n", r.faults);
  absl::StrAppendFormat(&out,
                        "  virtual time %.1fs, wall %.2fs, cpu %.2fs (%.1f simulated s per wall s, %.1f per cpu s)\n",
                        r.virtual_seconds, r.wall_seconds, r.cpu_seconds,
                        r.wall_seconds > 0 ? r.virtual_seconds / r.wall_seconds : 0.0,
                        r.cpu_seconds > 0 ? r.virtual_seconds / r.cpu_seconds : 0.0);
  absl::StrAppendFormat(&out, "  membership after the cold start: %s\n",
                        r.members_complete_seconds >= 0
                            ? absl::StrCat("every node listed all ", r.nodes, " live at ", Seconds(r.members_complete_seconds))
                            : std::string("not complete by the end of the warmup"));
  absl::StrAppendFormat(&out, "  convergence after faults stopped: %s (bound %.0fs)\n",
                        r.converged ? Seconds(r.convergence_seconds) : std::string("NOT CONVERGED"),
                        r.liveness_bound_seconds);
  if (!r.last_divergence.empty()) absl::StrAppendFormat(&out, "    last difference seen: %s\n", r.last_divergence);
  for (const auto& [name, layers] : r.final_layers) {
    if (layers > 1) absl::StrAppendFormat(&out, "  final stack of %s: %d layers\n", name, layers);
  }
  absl::StrAppendFormat(&out, "  sample keys: %d, %d reached 99.9%% of live nodes; median %s, max %s; 100%% median %s\n",
                        r.samples, r.samples_reached, Seconds(r.p999_median), Seconds(r.p999_max),
                        Seconds(r.p100_median));
  if (r.fresh_samples > 0) {
    absl::StrAppendFormat(&out, "  fresh filters: %d, first key at every live node in %d; median %s, max %s\n",
                          r.fresh_samples, r.fresh_reached, Seconds(r.fresh_p100_median), Seconds(r.fresh_p100_max));
  }
  absl::StrAppendFormat(&out, "  adds %d (new %d, acknowledged %d, lost with wiped nodes %d), keys checked live %d\n",
                        r.adds, r.new_keys, r.acked, r.volatile_acks, r.keys_checked_live);
  if (r.contended_keys > 0) {
    absl::StrAppendFormat(&out,
                          "  contended keys %d (%d adds): duplicate-new %d (rate %.4f), never new %d\n",
                          r.contended_keys, r.contended_adds, r.duplicate_new_keys,
                          static_cast<double>(r.duplicate_new_keys) / static_cast<double>(r.contended_keys),
                          r.contended_never_new);
  }
  if (r.routed_new_p50_ms >= 0 || r.routed_present_p50_ms >= 0) {
    absl::StrAppendFormat(&out,
                          "  routed adds: %d keys decided by their owner elsewhere, %d by fallback; stable duplicates %d;"
                          " latency new p50 %.2f ms p99 %.2f ms, present p50 %.2f ms p99 %.2f ms\n",
                          r.routed_remote_keys, r.routed_fallback_keys, r.stable_duplicate_new_keys, r.routed_new_p50_ms,
                          r.routed_new_p99_ms, r.routed_present_p50_ms, r.routed_present_p99_ms);
  }
  if (r.waits > 0) {
    absl::StrAppendFormat(&out, "  WAIT: %d answered, %d below numreplicas, %d not judged; latency p50 %.2f ms p99 %.2f ms max %.2f ms\n",
                          r.waits, r.waits_short, r.waits_unjudged, r.wait_p50_ms, r.wait_p99_ms, r.wait_max_ms);
  }
  absl::StrAppendFormat(&out,
                        "  wire: %d bytes in %d frames (%d delivered), %.0f bytes per new key (%.0f in delta frames)\n",
                        r.wire_bytes, r.frames_sent, r.frames_delivered, r.bytes_per_new_key,
                        r.delta_bytes_per_new_key);
  if (!r.bytes_out_by_type.empty()) {
    absl::StrAppend(&out, "  bytes out by type:");
    for (const auto& [k, v] : r.bytes_out_by_type) absl::StrAppendFormat(&out, " %s=%d", k, v);
    absl::StrAppend(&out, "\n");
  }
  if (!r.window_bytes_by_type.empty()) {
    absl::StrAppendFormat(&out, "  workload window (%.0fs, %.3g simulated s per cpu s, %.2f cpu s, %.3g per wall s): %.0f bytes per new key; membership %.0f bytes per node per s;",
                          r.window_seconds, r.window_cpu_seconds > 0 ? r.window_seconds / r.window_cpu_seconds : 0.0, r.window_cpu_seconds,
                          r.window_wall_seconds > 0 ? r.window_seconds / r.window_wall_seconds : 0.0,
                          r.window_bytes_per_new_key, r.membership_bytes_per_node_second);
    for (const auto& [k, v] : r.window_bytes_by_type) absl::StrAppendFormat(&out, " %s=%d", k, v);
    absl::StrAppend(&out, "\n");
  }
  if (!r.frames_out_by_type.empty()) {
    absl::StrAppend(&out, "  frames out by type:");
    for (const auto& [k, v] : r.frames_out_by_type) absl::StrAppendFormat(&out, " %s=%d", k, v);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppendFormat(&out,
                        "  transmissions per new bit: %.2f (delta bits sent %d / distinct bits %d; "
                        "N-1 = %d, F*N = %d; RMR %.2f)\n",
                        r.transmissions_per_bit, r.delta_bits_sent, r.distinct_bits, r.nodes ? r.nodes - 1 : 0,
                        static_cast<uint64_t>(r.fanout) * r.nodes, r.relative_message_redundancy);
  absl::StrAppendFormat(&out, "  network: lost %d, duplicated %d, reordered %d, partition-dropped %d\n", r.network.lost,
                        r.network.duplicated, r.network.reordered, r.network.partition_dropped);
  absl::StrAppendFormat(&out, "  faults done: crashes %d, restarts %d, partitions %d, rotations %d, pauses %d\n",
                        r.crashes, r.restarts, r.partitions, r.rotations, r.pauses);
  absl::StrAppendFormat(&out,
                        "  false accusations (of nodes up, unpaused and reachable for 10 s): %d suspicions "
                        "(%d suspect events), %d dead events%s\n",
                        r.false_suspicions, r.false_suspect_events, r.false_deaths,
                        r.paused_frames_dropped > 0
                            ? absl::StrCat("; paused nodes dropped ", r.paused_frames_dropped, " datagrams")
                            : "");
  if (!r.node_counters.empty()) {
    absl::StrAppend(&out, "  node counters:");
    for (const auto& [k, v] : r.node_counters) absl::StrAppendFormat(&out, " %s=%d", k, v);
    absl::StrAppend(&out, "\n");
  }
  if (!r.rejected_by_reason.empty()) {
    absl::StrAppend(&out, "  frames rejected:");
    for (const auto& [k, v] : r.rejected_by_reason) absl::StrAppendFormat(&out, " %s=%d", k, v);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppendFormat(&out, "  checkers: %s\n",
                        r.failure_count == 0 ? std::string("all passed")
                                             : absl::StrCat(r.failure_count, " failure(s)"));
  for (const std::string& f : r.failures) absl::StrAppend(&out, "    - ", f, "\n");
  absl::StrAppendFormat(&out, "  trace hash %016x (%d trace records)\n", r.trace_hash, r.trace_events);
  if (!r.passed) absl::StrAppendFormat(&out, "  replay: %s\n", r.replay_command);
  return out;
}

std::string FormatJson(const RunResult& r) {
  std::string failures = "[";
  for (const std::string& f : r.failures) absl::StrAppend(&failures, failures.size() > 1 ? "," : "", JsonString(f));
  failures += "]";
  return absl::StrCat(
      "{\"passed\":", r.passed ? "true" : "false", ",\"seed\":", r.seed, ",\"nodes\":", r.nodes,
      ",\"fanout\":", r.fanout, ",\"dissemination\":", JsonString(r.dissemination), ",\"scenario\":", JsonString(r.scenario), ",\"faults\":", JsonString(r.faults),
      ",\"virtual_seconds\":", r.virtual_seconds, ",\"wall_seconds\":", r.wall_seconds, ",\"cpu_seconds\":", r.cpu_seconds,
      ",\"converged\":", r.converged ? "true" : "false", ",\"convergence_seconds\":", r.convergence_seconds,
      ",\"members_complete_seconds\":", r.members_complete_seconds,
      ",\"liveness_bound_seconds\":", r.liveness_bound_seconds, ",\"last_divergence\":", JsonString(r.last_divergence), ",\"samples\":", r.samples,
      ",\"samples_reached_999\":", r.samples_reached, ",\"fresh_samples\":", r.fresh_samples,
      ",\"fresh_reached\":", r.fresh_reached, ",\"fresh_p100_median_seconds\":", r.fresh_p100_median,
      ",\"fresh_p100_max_seconds\":", r.fresh_p100_max, ",\"p999_median_seconds\":", r.p999_median,
      ",\"p999_max_seconds\":", r.p999_max, ",\"p100_median_seconds\":", r.p100_median, ",\"adds\":", r.adds,
      ",\"new_keys\":", r.new_keys, ",\"acked\":", r.acked, ",\"volatile_acks\":", r.volatile_acks,
      ",\"keys_checked_live\":", r.keys_checked_live, ",\"contended_keys\":", r.contended_keys,
      ",\"contended_adds\":", r.contended_adds, ",\"duplicate_new_keys\":", r.duplicate_new_keys,
      ",\"contended_never_new\":", r.contended_never_new,
      ",\"stable_duplicate_new_keys\":", r.stable_duplicate_new_keys, ",\"routed_remote_keys\":", r.routed_remote_keys,
      ",\"routed_fallback_keys\":", r.routed_fallback_keys, ",\"routed_new_p50_ms\":", r.routed_new_p50_ms,
      ",\"routed_new_p99_ms\":", r.routed_new_p99_ms, ",\"routed_present_p50_ms\":", r.routed_present_p50_ms,
      ",\"routed_present_p99_ms\":", r.routed_present_p99_ms, ",\"waits\":", r.waits, ",\"waits_short\":", r.waits_short,
      ",\"waits_unjudged\":", r.waits_unjudged, ",\"wait_p50_ms\":", r.wait_p50_ms, ",\"wait_p99_ms\":", r.wait_p99_ms,
      ",\"wait_max_ms\":", r.wait_max_ms, ",\"wire_bytes\":", r.wire_bytes,
      ",\"frames_sent\":", r.frames_sent, ",\"frames_delivered\":", r.frames_delivered,
      ",\"bytes_per_new_key\":", r.bytes_per_new_key, ",\"delta_bytes_per_new_key\":", r.delta_bytes_per_new_key, ",\"delta_bits_sent\":", r.delta_bits_sent,
      ",\"distinct_bits\":", r.distinct_bits, ",\"transmissions_per_bit\":", r.transmissions_per_bit,
      ",\"n_minus_1\":", r.nodes ? r.nodes - 1 : 0, ",\"f_times_n\":", static_cast<uint64_t>(r.fanout) * r.nodes,
      ",\"crashes\":", r.crashes, ",\"restarts\":", r.restarts, ",\"partitions\":", r.partitions,
      ",\"rotations\":", r.rotations, ",\"pauses\":", r.pauses, ",\"false_suspicions\":", r.false_suspicions,
      ",\"false_suspect_events\":", r.false_suspect_events, ",\"false_deaths\":", r.false_deaths, ",\"paused_frames_dropped\":", r.paused_frames_dropped, ",\"network\":{\"planned\":", r.network.planned, ",\"lost\":", r.network.lost,
      ",\"duplicated\":", r.network.duplicated, ",\"reordered\":", r.network.reordered,
      ",\"partition_dropped\":", r.network.partition_dropped, "}", ",\"node_counters\":", JsonMap(r.node_counters), ",\"rejected_by_reason\":",
      JsonMap(r.rejected_by_reason), ",\"bytes_out_by_type\":", JsonMap(r.bytes_out_by_type),
      ",\"frames_out_by_type\":", JsonMap(r.frames_out_by_type),
      ",\"window_seconds\":", r.window_seconds, ",\"window_cpu_seconds\":", r.window_cpu_seconds, ",\"window_wall_seconds\":", r.window_wall_seconds, ",\"windows\":", r.windows, ",\"parallel_windows\":", r.parallel_windows, ",\"window_bytes_by_type\":", JsonMap(r.window_bytes_by_type),
      ",\"window_bytes_per_new_key\":", r.window_bytes_per_new_key,
      ",\"membership_bytes_per_node_second\":", r.membership_bytes_per_node_second,
      ",\"relative_message_redundancy\":", r.relative_message_redundancy,
      ",\"events_by_kind\":", JsonMap(r.events_by_kind), ",\"final_epochs\":", JsonMap(r.final_epochs), ",\"final_layers\":", JsonMap(r.final_layers), ",\"failure_count\":", r.failure_count,
      ",\"failures\":", failures, ",\"trace_hash\":\"", absl::StrFormat("%016x", r.trace_hash), "\"",
      ",\"replay\":", JsonString(r.replay_command), "}");
}

}  // namespace pollen::sim
