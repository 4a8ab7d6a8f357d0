// The least memory any rate schedule can give a grown stack, from the sizing
// model (crdt/sizing.h), against one filter sized right from the start: the
// floor under issue 10's memory figure ("a filter grown from 1,000 to 10^7
// keys at p = 1%: <= 2.2x right-sized").
//
//   build/bench/crdt/scaling_floor [keys] [first_capacity] [expansion] [fpr]
//   (defaults: 10000000 1000 2 0.01)
//
// The stack's layer capacities are RedisBloom's (first_capacity *
// expansion^L, until they hold `keys`), as BF.INFO must report them. A
// schedule gives layer L a rate p_L at its capacity, and the compound rate
// stays <= p however far the filter grows only if the sum over every layer
// that may ever open is <= p. The program prints:
//   - geometric schedules p_L = p (1 - r) r^L (Pollen's: r = 0.9);
//   - the oracle: a schedule that knows the stack stops at these layers and
//     spends the whole budget on them, p_L proportional to C_L^a (a = 1 is the
//     Lagrange optimum of sum C_L log(1/p_L); the scan finds the best a under
//     the blocked model). No schedule that must also serve larger filters
//     can do better at this size;
//   - how much of the budget a schedule may keep for the layers after these
//     (14 at the defaults) and still meet a ratio of 2.2x.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "crdt/sizing.h"

namespace pollen::crdt {
namespace {

double Bytes(double capacity, double fpr) {
  absl::StatusOr<FilterShape> shape = ChooseShape(static_cast<uint64_t>(capacity), fpr);
  if (!shape.ok()) {
    std::fprintf(stderr, "%s\n", shape.status().ToString().c_str());
    std::exit(1);
  }
  return static_cast<double>(shape->bytes());
}

// Memory of the stack when layer L gets share w[L] / sum(w) of `budget`.
double StackBytes(const std::vector<double>& capacities, const std::vector<double>& weights, double budget) {
  double sum = 0, bytes = 0;
  for (double w : weights) sum += w;
  for (size_t l = 0; l < capacities.size(); ++l) bytes += Bytes(capacities[l], budget * weights[l] / sum);
  return bytes;
}

int Main(int argc, char** argv) {
  const double keys = argc > 1 ? std::atof(argv[1]) : 1e7;
  const double first = argc > 2 ? std::atof(argv[2]) : 1000;
  const double expansion = argc > 3 ? std::atof(argv[3]) : 2;
  const double p = argc > 4 ? std::atof(argv[4]) : 0.01;
  if (!(keys >= first && first >= 1 && expansion >= 2 && p > 0 && p < 1)) {
    std::fprintf(stderr, "usage: scaling_floor [keys >= first] [first >= 1] [expansion >= 2] [0 < fpr < 1]\n");
    return 2;
  }
  std::vector<double> capacities;
  for (double held = 0, c = first; held < keys; held += c, c *= expansion) capacities.push_back(c);
  double allocated = 0;
  for (double c : capacities) allocated += c;
  const double right = Bytes(keys, p);
  std::printf("%.0f keys at p = %g from capacity %.0f, expansion %.0f: %zu layers, capacity %.0f (%.3fx the keys)\n",
              keys, p, first, expansion, capacities.size(), allocated, allocated / keys);
  std::printf("right-sized filter: %.2f MB\n\n", right / 1e6);

  std::printf("geometric p_L = p (1 - r) r^L (sum over all layers ever: p)\n");
  for (double r : {0.5, 0.8, 0.85, 0.9, 0.925, 0.95}) {
    std::vector<double> weights;
    for (size_t l = 0; l < capacities.size(); ++l) weights.push_back((1 - r) * std::pow(r, static_cast<double>(l)));
    double used = 0;
    for (double w : weights) used += w;  // these layers' share of p; the rest is kept for later layers
    const double bytes = StackBytes(capacities, weights, p * used);
    std::printf("  r = %.3f: %7.2f MB = %.3fx right-sized\n", r, bytes / 1e6, bytes / right);
  }

  double best = 0, best_a = 0;
  for (double a = 0.5; a <= 1.5001; a += 0.05) {
    std::vector<double> weights;
    for (double c : capacities) weights.push_back(std::pow(c, a));
    const double bytes = StackBytes(capacities, weights, p);
    if (best == 0 || bytes < best) {
      best = bytes;
      best_a = a;
    }
  }
  std::printf("\noracle (the whole budget on these layers, p_L ~ C_L^%.2f): %.2f MB = %.3fx right-sized\n", best_a,
              best / 1e6, best / right);

  std::vector<double> weights;
  for (double c : capacities) weights.push_back(std::pow(c, best_a));
  double kept = 0;  // the largest share of p left for later layers with the ratio <= 2.2
  for (double share = 0; share < 1; share += 0.001) {
    if (StackBytes(capacities, weights, p * (1 - share)) > 2.2 * right) break;
    kept = share;
  }
  std::printf("to stay <= 2.2x, a schedule keeps at most %.1f%% of p for every layer after these %zu\n", 100 * kept,
              capacities.size());
  return 0;
}

}  // namespace
}  // namespace pollen::crdt

int main(int argc, char** argv) { return pollen::crdt::Main(argc, argv); }
