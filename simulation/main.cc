// pollen-sim: runs seeded simulations of a Pollen cluster and reports.
// The wall clock is read here only, to report simulation speed; it never
// reaches the simulation.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "simulation/run_result.h"
#include "simulation/sim_options.h"
#include "simulation/simulator.h"

int main(int argc, char** argv) {
  using namespace pollen::sim;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ParseFlags(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n(see pollen-sim --help)\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  const SimOptions& base = *parsed;
  if (base.help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (base.version) {
    std::printf("pollen-sim %s\n", POLLEN_VERSION);
    return 0;
  }
  uint32_t failed = 0;
  for (uint32_t k = 0; k < base.seeds; ++k) {
    SimOptions o = OptionsForSeed(base, base.seed + k);
    if (o.progress) {
      o.on_progress = [seed = o.seed, nodes = o.nodes](double t, int64_t listing_all) {
        std::fprintf(stderr, "pollen-sim: seed %llu at virtual t=%.1fs", static_cast<unsigned long long>(seed), t);
        if (listing_all >= 0) {
          std::fprintf(stderr, " (cold start: %lld of %u nodes list every node live)", static_cast<long long>(listing_all),
                       nodes);
        }
        std::fprintf(stderr, "\n");
      };
    }
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    RunResult r = Simulator(o).Run();
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    if (!r.passed) ++failed;
    if (base.json) {
      std::printf("%s\n", FormatJson(r).c_str());
    } else if (base.quiet || base.seeds > 1) {
      std::printf("%s\n", FormatOneLine(r).c_str());
      if (!r.passed) {
        for (const std::string& f : r.failures) std::printf("    - %s\n", f.c_str());
        std::printf("    replay: %s\n", r.replay_command.c_str());
      }
    } else {
      std::fputs(FormatSummary(r).c_str(), stdout);
    }
    std::fflush(stdout);
  }
  if (base.seeds > 1 && !base.json) {
    std::printf("pollen-sim: %u of %u seeds passed\n", base.seeds - failed, base.seeds);
  }
  if (failed > 0) {
    std::fprintf(stderr, "pollen-sim: %u of %u seed(s) FAILED (replay commands above)\n", failed, base.seeds);
    return 1;
  }
  return 0;
}
