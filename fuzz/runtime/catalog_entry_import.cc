// Fuzz target: Node::ImportCatalogEntry, which replays the catalog entry of an
// add-log create record (bytes from disk). Any bytes: no crash; a refusal
// leaves the node without filters; an accepted entry exports to bytes that
// import again unchanged. Half the inputs are byte-level mutations of a real
// entry so that the validation past the protobuf parse is reached
// (POLLEN_FUZZ_STATS=1 prints a line per accepted input: about 9% of them).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "node/core/node.h"

namespace {

std::unique_ptr<pollen::node::Node> MakeNode() {
  pollen::node::NodeConfig c;
  c.name = "fuzz";
  c.advertise = "127.0.0.1:1";
  c.secret.bytes.fill(3);
  auto n = pollen::node::Node::Create(c);
  if (!n.ok()) std::abort();
  return std::move(*n);
}

const std::string& RealEntry() {
  static const std::string entry = [] {
    auto node = MakeNode();
    pollen::node::FilterConfig f;
    f.name = "fuzz:filter";
    f.capacity = 1000;
    f.fpr = 0.01;
    f.generations = 3;
    f.rotate_fill = 0.5;
    if (!node->Reserve(f, pollen::node::Time(42)).ok()) std::abort();
    return *node->ExportCatalogEntry("fuzz:filter");
  }();
  return entry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size > 1 && (data[0] & 1)) {
    // A real entry with up to (data[0] >> 1) % 5 bytes changed at positions
    // and values the input picks, then maybe cut short.
    std::string mutated = RealEntry();
    const size_t changes = (data[0] >> 1) % 5;
    for (size_t i = 0; i < changes && 3 + 2 * i < size; ++i) {
      mutated[data[2 + 2 * i] % mutated.size()] ^= static_cast<char>(data[3 + 2 * i]);
    }
    if (data[1] & 1) mutated.resize(mutated.size() - (data[1] >> 1) % mutated.size());
    bytes = mutated;
  }
  auto node = MakeNode();
  const bool ok = node->ImportCatalogEntry(bytes, pollen::node::Time(0)).ok();
  if (std::getenv("POLLEN_FUZZ_STATS") != nullptr && ok) std::fprintf(stderr, "accepted\n");
  const auto filters = node->Filters();
  if (!ok) {
    if (!filters.empty()) std::abort();
    return 0;
  }
  if (filters.size() != 1) std::abort();
  auto exported = node->ExportCatalogEntry(filters[0].config.name);
  if (!exported.ok()) std::abort();
  auto again = MakeNode();
  if (!again->ImportCatalogEntry(*exported, pollen::node::Time(0)).ok()) std::abort();
  if (*again->ExportCatalogEntry(filters[0].config.name) != *exported) std::abort();
  return 0;
}
