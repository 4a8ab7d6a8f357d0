// Fuzzes the BF.SCANDUMP/BF.LOADCHUNK chunk decoders and the restore that
// assembles them. The first byte picks a mode: 0, the input as a header chunk
// (a decoded header re-encodes to the same bytes); 1, as a data chunk (the
// same); 0xff, two u64 (chunk bytes wanted, bulk limit) for DumpChunkWords,
// whose chunk must fit the limit and decode; any other, a valid header of a
// small filter, then the rest of the input as a sequence of
// [iterator u8][length u8][bytes] chunks fed to a PendingRestore, which must
// refuse or accept each without crashing and only ever complete after every
// data chunk.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "crdt/keyed_hash.h"
#include "node/core/catalog.h"
#include "node/runtime/resp/bloom_dump.h"
#include "protocol/wire.pb.h"

namespace {

using namespace pollen;

std::string SmallHeader() {
  node::FilterConfig f;
  f.name = "f";
  f.capacity = 100;
  f.expansion = 2;  // a stack: generation 3 has two layers
  crdt::ClusterSecret secret;
  auto entry = node::MakeCatalogEntry(f, secret, 0, "");
  if (!entry.ok()) std::abort();
  wire::CatalogEntry w;
  node::ToWire(*entry, 3, &w);
  resp::DumpHeader h;
  h.entry = w.SerializeAsString();
  h.params = entry->params;
  h.slots = {crdt::SlotOf(2, 0), crdt::SlotOf(3, 0), crdt::SlotOf(3, 1)};
  if (!resp::SizeDump(h)) std::abort();
  h.chunk_words = 3;
  return resp::EncodeDumpHeader(h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] == 0) {
    auto h = resp::DecodeDumpHeader(input);
    if (h.ok() && resp::EncodeDumpHeader(*h) != input) std::abort();
    return 0;
  }
  if (data[0] == 1) {
    auto c = resp::DecodeDumpChunk(input);
    if (c.ok() && resp::EncodeDumpChunk(c->slot, c->first_word, c->words) != input) std::abort();
    return 0;
  }
  if (data[0] == 0xff) {
    uint64_t want = 0, bulk = 0;
    for (size_t i = 0; i < 8 && i < input.size(); ++i) want |= uint64_t{static_cast<uint8_t>(input[i])} << (8 * i);
    for (size_t i = 8; i < 16 && i < input.size(); ++i) bulk |= uint64_t{static_cast<uint8_t>(input[i])} << (8 * i - 64);
    bulk %= uint64_t{64} << 20;  // chunks are built below: keep them small
    want %= uint64_t{64} << 20;
    const uint64_t words = resp::DumpChunkWords(want, bulk);
    if (words < 1 || words > resp::kMaxDumpChunkWords) std::abort();
    if (bulk >= resp::kDumpChunkOverhead + 8 && resp::kDumpChunkOverhead + 8 * words > bulk) std::abort();
    const std::vector<uint64_t> zeros(words, 0);
    const std::string chunk = resp::EncodeDumpChunk(1, 0, zeros);
    if (bulk >= resp::kDumpChunkOverhead + 8 && chunk.size() > bulk) std::abort();
    if (!resp::DecodeDumpChunk(chunk).ok()) std::abort();
    return 0;
  }
  static const std::string header = SmallHeader();
  auto restore = resp::PendingRestore::Begin("f", header, uint64_t{1} << 30);
  if (!restore.ok()) std::abort();
  size_t at = 0, accepted = 0;
  while (at + 2 <= input.size()) {
    const uint64_t iterator = static_cast<uint8_t>(input[at]);
    const size_t len = std::min<size_t>(static_cast<uint8_t>(input[at + 1]), input.size() - at - 2);
    const bool was_complete = (*restore)->complete();
    if ((*restore)->Add(iterator, input.substr(at + 2, len)).ok()) {
      if (was_complete) std::abort();  // nothing is accepted after the last chunk
      ++accepted;
    }
    at += 2 + len;
  }
  if ((*restore)->complete() && (*restore)->SnapshotValue().empty()) std::abort();
  return 0;
}
