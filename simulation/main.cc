// pollen-sim: runs seeded simulations of a Pollen cluster and reports.
// The wall clock is read here only, to report simulation speed; it never
// reaches the simulation.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "simulation/run_result.h"
#include "simulation/sim_options.h"
#include "simulation/simulator.h"

namespace {

// --huge-pages=on: restarts pollen-sim once with glibc's tunable
// glibc.malloc.hugetlb=1, so that malloc asks for transparent huge pages
// (2 MB) for the heap; glibc reads tunables only at start-up. Each event
// touches another node's state (~130 KB at N=1000, ~850 KB at N=10,000), so
// with 4 KB pages most events miss the TLB. Measured in interleaved pairs
// (simulation/README.md, "Huge pages"): 8% less CPU at N=1000, 11-18% at
// N=10,000. Nothing happens when GLIBC_TUNABLES already names the tunable
// (the restarted process, or a user's own choice). If the exec fails the
// run goes on as it is; with the kernel's THP off the tunable does nothing.
// heaptrack and valgrind do not follow the restart (heaptrack then reports
// only what came before it, and hides its LD_PRELOAD from the process, so it
// cannot be detected): leave the flag off for them. Off by default: the
// huge pages cost ~1-6% of peak RSS, and the N=10,000 cold start then
// passes 8 GiB (8.04 GiB against 7.94).
void RestartWithHugePages(char** argv) {
  constexpr char kTunable[] = "glibc.malloc.hugetlb";
  const char* current = std::getenv("GLIBC_TUNABLES");
  std::string tunables = current == nullptr ? "" : current;
  if (tunables.find(kTunable) != std::string::npos) return;
  tunables += tunables.empty() ? "" : ":";
  tunables += std::string(kTunable) + "=1";
  // The binary's own path, not /proc/self/exe, so that the process keeps its
  // name (ps, pgrep).
  std::string self(4096, '\0');
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (length <= 0 || static_cast<size_t>(length) >= self.size() - 1) return;  // none, or maybe cut short
  self.resize(static_cast<size_t>(length));
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv(self.c_str(), argv);
  std::fprintf(stderr, "pollen-sim: could not restart with huge pages; going on without them\n");
}

}  // namespace

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
  if (base.huge_pages) RestartWithHugePages(argv);
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
