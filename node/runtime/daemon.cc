#include "node/runtime/daemon.h"

#include <sodium.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "crdt/blocked_filter.h"
#include "node/core/node.h"
#include "node/runtime/config.h"
#include "node/runtime/driver.h"
#include "node/runtime/http_server.h"
#include "node/runtime/metrics.h"
#include "node/runtime/recent_rates.h"
#include "node/runtime/status_page.h"
#include "node/runtime/net_address.h"
#include "node/runtime/memory_trim.h"
#include "node/runtime/persistence.h"
#include "node/runtime/resp/io_pool.h"
#include "node/runtime/resp/resp_server.h"
#include "node/runtime/resp/server_context.h"
#include "node/runtime/secret.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace asio = boost::asio;

namespace {

constexpr int kExitConfig = 2;
constexpr int kExitRuntime = 1;

int Fail(int code, std::string_view message) {
  std::fprintf(stderr, "pollend: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}
int Fail(int code, absl::string_view message) { return Fail(code, SV(message)); }
int Fail(int code, const std::string& message) { return Fail(code, std::string_view(message)); }
int Fail(int code, const char* message) { return Fail(code, std::string_view(message)); }

asio::ip::tcp::endpoint TcpEndpoint(const std::string& host_port) {
  auto hp = ParseHostPort(host_port);
  return asio::ip::tcp::endpoint(asio::ip::make_address(hp->host), hp->port);
}

node::NodeConfig MakeNodeConfig(const DaemonConfig& c, const crdt::ClusterSecret& secret) {
  node::NodeConfig nc;
  nc.name = c.node_name;
  nc.advertise = c.advertise.empty() ? c.gossip_bind : c.advertise;
  nc.seeds = c.seeds;
  nc.secret = secret;
  nc.cluster_label = c.cluster_label;
  randombytes_buf(&nc.rng_seed, sizeof nc.rng_seed);
  nc.gossip_interval = c.gossip_interval;
  nc.fanout = c.fanout;
  nc.dissemination = c.dissemination;
  nc.probe_interval = c.probe_interval;
  nc.probe_timeout = c.probe_timeout;
  nc.route_timeout = c.route_timeout;
  nc.report_peer_adds = !c.data_dir.empty();  // the driver logs them (Driver::LogPeerAdds)
  nc.indirect_probes = c.indirect_probes;
  nc.suspicion_multiplier = c.suspicion_multiplier;
  nc.lifeguard = c.lifeguard;
  nc.anti_entropy_interval = c.anti_entropy_interval;
  nc.anti_entropy_max_interval = c.anti_entropy_max_interval;
  nc.dead_reconnect_interval = c.dead_reconnect_interval;
  nc.max_datagram_bytes = c.max_datagram_bytes;
  nc.tcp_only = c.tcp_only;
  nc.max_memory_bytes = c.max_memory;
  nc.max_filter_bytes = c.max_filter_bytes;
  nc.filters = c.filters;
  return nc;
}

}  // namespace

int RunDaemon(int argc, char** argv) {
  auto cl = ParseCommandLine(argc, argv, nullptr);
  if (!cl.ok()) return Fail(kExitConfig, Cat(cl.status().message(), " (see pollend --help)"));
  if (cl->help) {
    std::cout << HelpText();
    return 0;
  }
  if (cl->version) {
    std::cout << "pollend " << kPollenVersion << "\n";
    return 0;
  }
  const DaemonConfig& config = cl->config;
  if (cl->print_config) {
    std::cout << RenderConfig(config);
    return 0;
  }

  auto logger = spdlog::stderr_color_mt("pollend");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + config.node_name + "] %v");
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::flush_on(spdlog::level::info);

  if (sodium_init() < 0) return Fail(kExitRuntime, "libsodium failed to initialize");
  std::string warning;
  auto secret = LoadSecret(config.secret_file, std::getenv("POLLEN_SECRET"), &warning);
  ::unsetenv("POLLEN_SECRET");  // children never inherit it
  if (!secret.ok()) return Fail(kExitConfig, secret.status().message());
  if (!warning.empty()) spdlog::warn("{}", warning);

  absl::StatusOr<resp::CommandNames> command_names = resp::CommandNames::Parse(config.rename_command);
  if (!command_names.ok()) return Fail(kExitConfig, Cat("rename-command: ", command_names.status().message()));

  crdt::SetHugePages(config.huge_pages ? crdt::HugePages::kAdvise : crdt::HugePages::kNone);
  if (!ConfigureAllocator()) spdlog::debug("memory: the allocator's thresholds are its own (not glibc's malloc)");
  auto node_or = node::Node::Create(MakeNodeConfig(config, *secret));
  sodium_memzero(secret->bytes.data(), secret->bytes.size());
  if (!node_or.ok()) return Fail(kExitConfig, Cat("invalid node configuration: ", node_or.status().message()));
  std::unique_ptr<node::Node> node = std::move(*node_or);

  std::signal(SIGPIPE, SIG_IGN);
  // Signals are delivered to the signal_set, which the main thread waits on.
  asio::io_context signal_io;
  asio::signal_set signals(signal_io, SIGTERM, SIGINT, SIGUSR1);

  node::FilterConfig default_filter;  // what BF.ADD auto-creates
  std::unique_ptr<Persistence> persistence;
  if (!config.data_dir.empty()) {
    auto p = Persistence::Open(config.data_dir, config.appendfsync);
    if (!p.ok()) return Fail(kExitConfig, p.status().message());
    persistence = std::move(*p);
    auto stats = persistence->Recover(node.get(), MonotonicNow(), default_filter);
    if (!stats.ok()) return Fail(kExitRuntime, Cat("recovery failed: ", stats.status().message()));
    spdlog::info("recovered from {}: {} snapshots and {} deltas ({} stale skipped), {} filter creations and {} "
                 "adds from {} log segments, {} files moved aside, {} torn tails",
                 config.data_dir, stats->snapshots_loaded, stats->deltas_loaded, stats->stale_deltas_skipped,
                 stats->creates_replayed, stats->records_replayed, stats->segments_replayed, stats->files_moved_aside,
                 stats->torn_tails);
    if (stats->creates_refused > 0 || stats->default_creates > 0) {
      spdlog::warn("recovery: {} create records refused, {} filters re-created with default parameters",
                   stats->creates_refused, stats->default_creates);
    }
  } else {
    spdlog::warn("no data-dir: state is kept in memory only and rebuilt from peers after a restart");
  }

  Driver driver(*node, config, persistence.get());
  if (absl::Status s = driver.Bind(); !s.ok()) return Fail(kExitRuntime, s.message());

  // RESP.
  auto ctx = std::make_unique<resp::ServerContext>();
  ctx->node = node.get();
  ctx->run_on_driver = [&driver, p = persistence.get()](std::function<absl::Status(node::Time)> fn) {
    const uint64_t records_before = p != nullptr ? p->create_records() + p->delete_records() : 0;
    absl::Status s = driver.RunOnDriver(std::move(fn));
    // The call created a filter (BF.RESERVE, auto-create) or deleted one
    // (DEL): its record is durable, under appendfsync always, before the
    // client hears the reply.
    if (p != nullptr && p->create_records() + p->delete_records() != records_before) {
      if (absl::Status d = p->WaitDurable(); !d.ok() && s.ok()) {
        return absl::InternalError(Cat("persistence: ", d.message()));
      }
    }
    return s;
  };
  ctx->peer_check = [&driver](resp::ServerContext::PeerCheckBegin begin, resp::ServerContext::PeerCheckDone done) {
    driver.PeerCheck(std::move(begin), std::move(done));
  };
  ctx->routed_add = [&driver](std::string filter, resp::ServerContext::RoutedKeys keys,
                              resp::ServerContext::RoutedAddDone done) {
    driver.BeginRoutedAdd(std::move(filter), std::move(keys), std::move(done));
  };
  if (persistence) {
    Persistence* p = persistence.get();
    node::Node* n = node.get();
    ctx->log_adds = [p, n, &driver](std::string_view filter, std::span<const std::string_view> keys) {
      // The first add of a filter this log has no create record for (learned
      // from a peer, or its event not yet handled): log the entry first.
      if (p->NeedsCreateRecord(filter)) {
        absl::Status s = driver.RunOnDriver([p, n, name = std::string(filter)](node::Time) {
          return p->NeedsCreateRecord(name) ? p->LogCreate(*n, name, false) : absl::OkStatus();
        });
        // Deleted since the add (a routed add's reply comes later): its
        // keys went with it, nothing to log.
        if (absl::IsNotFound(s)) return absl::OkStatus();
        if (!s.ok()) return s;
      }
      return p->LogAdds(filter, keys);
    };
    ctx->log_delete = [p](std::string_view filter, uint64_t deleted_through) {
      return p->LogDelete(filter, deleted_through, false);
    };
    ctx->snapshot = [&driver](resp::ServerContext::SnapshotDone done) { driver.RequestSnapshot(std::move(done)); };
  }
  if (persistence != nullptr) {
    ctx->last_save_unix = [p = persistence.get()] { return static_cast<int64_t>(p->last_snapshot_unix()); };
  }
  ctx->info_extra = [&driver, &config, p = persistence.get()](std::string_view section) -> std::string {
    if (section == "pollen") {
      return Cat("ready:", driver.ready() ? 1 : 0, "\r\ngossip_bind:", config.gossip_bind,
                 "\r\ntcp_only:", config.tcp_only ? 1 : 0, "\r\n");
    }
    if (section != "persistence") return "";
    // Pollen's add log is its AOF: aof_enabled says whether adds are logged.
    if (p == nullptr) return "aof_enabled:0\r\npollen_data_dir:\r\n";
    return Cat("aof_enabled:1\r\npollen_data_dir:", p->dir(), "\r\npollen_appendfsync:",
               AppendFsyncName(config.appendfsync), "\r\npollen_snapshots:", p->snapshots_written(),
               "\r\npollen_last_snapshot_time:", p->last_snapshot_unix(), "\r\npollen_addlog_records:",
               p->log_records(), "\r\npollen_addlog_create_records:", p->create_records(), "\r\n");
  };
  ctx->password = config.resp_password;
  ctx->command_names = *std::move(command_names);
  ctx->limits.max_clients = config.resp_max_clients;
  ctx->limits.max_bulk_bytes = config.proto_max_bulk_len;
  // The node enforces both memory limits (Node::Reserve); this early check
  // spares a BF.RESERVE the driver call, and bounds a restore's staging.
  ctx->limits.max_filter_bytes = config.max_filter_bytes == 0 ? ~uint64_t{0} : config.max_filter_bytes;
  // A client's unparsed input must hold one whole argument and its command.
  ctx->limits.max_query_bytes = std::max<size_t>(ctx->limits.max_query_bytes, config.proto_max_bulk_len + (1u << 20));
  ctx->latency_tracking = config.resp_latency_tracking;
  ctx->limits.idle_timeout = std::chrono::duration_cast<std::chrono::seconds>(config.resp_idle_timeout);
  ctx->default_filter = default_filter;
  ctx->bloom.Reset(config.bloom);
  ctx->version = kPollenVersion;

  resp::IoPool resp_pool(config.resp_threads,  // one event loop per RESP thread
                         std::chrono::microseconds(config.resp_busy_poll_us));
  resp::RespServer resp_server(resp_pool, TcpEndpoint(config.resp_bind), *ctx);
  if (absl::Status s = resp_server.Start(); !s.ok()) {
    return Fail(kExitRuntime, Cat("option 'resp-bind': ", s.message()));
  }

  // HTTP.
  asio::io_context http_io(1);
  std::unique_ptr<HttpServer> http;
  // From the first shutdown signal on, /readyz and /metrics answer 503 at once
  // (no driver call that shutdown would have to wait for).
  std::atomic<bool> shutting_down{false};
  RecentRates rates;  // HTTP thread only: sampled by every / and /metrics request
  auto sample_rates = [&rates](const Driver::Collected& n) {
    const node::NodeCounters& c = n.counters;
    rates.Sample(n.now, RecentRates::Counters{c.adds, c.queries, c.hits, c.bytes_in, c.bytes_out});
  };
  if (!config.http_bind.empty()) {
    http = std::make_unique<HttpServer>(http_io, [&](const std::string& path) {
      HttpResponse r;
      if (shutting_down.load() && (path == "/readyz" || path == "/metrics" || path == "/")) {
        r.status = 503;
        r.body = "shutting down\n";
      } else if (path == "/healthz") {
        r.body = "ok\n";
      } else if (path == "/readyz") {
        const bool ready = driver.ready();
        r.status = ready ? 200 : 503;
        r.body = ready ? "ready\n" : "not ready\n";
      } else if (path == "/metrics" || path == "/") {
        auto collected = driver.Collect();
        if (!collected.ok()) {
          r.status = 503;
          r.body = Cat(collected.status().message(), "\n");
          return r;
        }
        sample_rates(*collected);
        if (path == "/") {
          StatusInput status;
          status.node = &*collected;
          status.rates = &rates;
          status.ready = driver.ready();
          status.version = kPollenVersion;
          status.node_name = config.node_name;
          r.content_type = "text/html; charset=utf-8";
          r.body = RenderStatusPage(status);
          return r;
        }
        MetricsInput in;
        in.node = &*collected;
        in.transport = &driver.counters();
        in.resp = &ctx->counters;
        in.command_stats = &ctx->command_stats;
        in.persistence = persistence.get();
        in.ready = driver.ready();
        in.version = kPollenVersion;
        in.node_name = config.node_name;
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        r.body = RenderMetrics(in);
      } else {
        r.status = 404;
        r.body = "not found: try /, /metrics, /healthz or /readyz\n";
      }
      return r;
    });
    if (absl::Status s = http->Listen(TcpEndpoint(config.http_bind)); !s.ok()) return Fail(kExitRuntime, s.message());
  }

  driver.Start();
  resp_pool.Start();
  auto http_guard = asio::make_work_guard(http_io);
  std::thread http_thread([&] { http_io.run(); });

  spdlog::info("pollend {} node {} up: gossip udp+tcp {} (advertise {}{}), resp {}, http {}, data-dir {} "
               "(appendfsync {}), seeds [{}], {} filters declared",
               kPollenVersion, config.node_name, config.gossip_bind,
               config.advertise.empty() ? config.gossip_bind : config.advertise, config.tcp_only ? ", tcp-only" : "",
               config.resp_bind, config.http_bind.empty() ? "off" : config.http_bind,
               config.data_dir.empty() ? "(none)" : config.data_dir, AppendFsyncName(config.appendfsync),
               absl::StrJoin(config.seeds, ","), config.filters.size());

  // Wait for signals on this thread.
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                            int sig) {
    if (ec) return;
    if (sig == SIGUSR1) {
      // On the snapshot thread: this one runs the memory trimmer.
      driver.RequestSnapshot([](absl::StatusOr<std::string> r) {
        if (!r.ok()) spdlog::warn("SIGUSR1 snapshot: {}", r.status().message());
      });
      signals.async_wait(on_signal);
      return;
    }
    spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    shutting_down.store(true);
    signal_io.stop();
  };
  signals.async_wait(on_signal);
  MemoryTrimmer trimmer(signal_io);  // on this thread, which serves no client
  trimmer.Start();
  signal_io.run();

  // Graceful shutdown.
  resp_server.Stop();
  resp_pool.Stop(std::chrono::milliseconds(100));  // lets connections finish closing
  if (persistence) {
    if (absl::Status s = persistence->Flush(); !s.ok()) spdlog::error("add log flush: {}", s.message());
    auto snap = driver.SnapshotNow();
    if (!snap.ok()) spdlog::error("final snapshot failed: {}", snap.status().message());
  }
  driver.Shutdown(std::chrono::milliseconds(500));
  if (http) http->Stop();
  http_guard.reset();
  http_io.stop();
  http_thread.join();
  if (persistence) {
    if (absl::Status s = persistence->Close(); !s.ok()) spdlog::error("add log close: {}", s.message());
  }
  spdlog::info("stopped");
  spdlog::shutdown();
  return 0;
}

}  // namespace pollen::runtime
