// BF.SCANDUMP and BF.LOADCHUNK (the format is in bloom_dump.h). Replies and
// errors follow RedisBloom 2.4: [iterator, data] with [0, ""] at the end,
// "ERR not found", "Second argument must be numeric" (SCANDUMP, no ERR) and
// "ERR Second argument must be numeric" (LOADCHUNK), "ERR received bad data".
#include "node/runtime/resp/bloom_dump.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

constexpr size_t kMaxPendingRestores = 4;  // per connection

void ReplyChunk(std::string* out, int64_t iterator, std::string_view data) {
  AppendArrayHeader(out, 2);
  AppendInteger(out, iterator);
  AppendBulk(out, data);
}

}  // namespace

void CmdBfScandump(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() != 3) return ReplyWrongArity(call);
  int64_t iterator = 0;
  if (!ParseInt64(a[2], &iterator)) return AppendErrorVerbatim(call.out, "Second argument must be numeric");
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(a[1], node::InfoParts::kEpochsOnly);
  if (!info.ok()) return ReplyStatus(call.out, info.status());
  DumpHeader h;
  for (const node::GenerationInfo& g : info->generations) {
    h.slots.push_back(crdt::SlotOf(g.epoch, g.layer));
    h.words.push_back(g.blocks * crdt::kWordsPerBlock);
  }
  h.chunk_words = DumpChunkWords(call.ctx.limits.dump_chunk_bytes, call.ctx.limits.max_bulk_bytes);
  if (iterator == 0) {
    absl::Status s = RunOnDriver(call.ctx, [&](node::Time) {
      absl::StatusOr<std::string> entry = call.ctx.node->ExportCatalogEntry(a[1]);
      if (entry.ok()) h.entry = *std::move(entry);
      return entry.status();
    });
    if (!s.ok()) return ReplyStatus(call.out, s);
    return ReplyChunk(call.out, 1, EncodeDumpHeader(h));
  }
  if (iterator < 0 || static_cast<uint64_t>(iterator) > h.data_chunks()) return ReplyChunk(call.out, 0, "");
  const uint64_t c = static_cast<uint64_t>(iterator);
  const ChunkPlace place = PlaceOfChunk(h, c);
  std::vector<uint64_t> words(place.words);
  const absl::Status s = call.ctx.node->ExportWords(a[1], h.slots[place.sub], place.first_word, words);
  if (!s.ok()) return ReplyStatus(call.out, s);
  ReplyChunk(call.out, iterator + 1, EncodeDumpChunk(h.slots[place.sub], place.first_word, words));
}

void CmdBfLoadchunk(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() != 4) return ReplyWrongArity(call);
  int64_t iterator = 0;
  if (!ParseInt64(a[2], &iterator)) return AppendError(call.out, "ERR Second argument must be numeric");
  auto& restores = call.session.restores;
  if (iterator == 1) {
    // As RedisBloom: a dump loads into a fresh name only.
    if (call.ctx.node->Version(a[1]).has_value()) return AppendError(call.out, "ERR received bad data: the filter exists");
    if (restores.find(a[1]) == restores.end() && restores.size() >= kMaxPendingRestores) {
      return AppendError(call.out, "ERR too many loads in progress on this connection");
    }
    absl::StatusOr<std::unique_ptr<PendingRestore>> p =
        PendingRestore::Begin(a[1], a[3], call.ctx.limits.max_filter_bytes);
    if (!p.ok()) return ReplyStatus(call.out, p.status());
    restores[std::string(a[1])] = *std::move(p);
    return AppendSimple(call.out, "OK");
  }
  auto it = restores.find(a[1]);
  if (it == restores.end()) return AppendError(call.out, "ERR not found");
  if (iterator < 1) return ReplyStatus(call.out, absl::InvalidArgumentError("received bad data: iterator out of range"));
  if (absl::Status s = it->second->Add(static_cast<uint64_t>(iterator), a[3]); !s.ok()) return ReplyStatus(call.out, s);
  if (!it->second->complete()) return AppendSimple(call.out, "OK");
  const std::string value = it->second->SnapshotValue();
  restores.erase(it);
  // Into a deleted name: a new filter (a fresh stamp above the tombstone).
  absl::Status s = RunOnDriver(call.ctx, [&](node::Time now) { return call.ctx.node->ImportSnapshot(value, now); });
  if (!s.ok()) {
    std::string why = ToStd(s.message());
    if (why.rfind("ERR ", 0) == 0) why.erase(0, 4);
    return ReplyStatus(call.out, absl::InvalidArgumentError(Cat("received bad data: ", why)));
  }
  call.ctx.touches.Touch(a[1]);
  // A restored filter is durable once a snapshot holds it (its bits did not
  // come through the add log): the last chunk's OK waits for one, on the
  // snapshot thread, not this RESP thread's other clients.
  if (!call.ctx.snapshot) return AppendSimple(call.out, "OK");
  ReplyAfterSnapshot(call, [](const absl::StatusOr<std::string>& snap, std::string* out) {
    if (!snap.ok()) return AppendError(out, Cat("ERR persistence: ", ToStd(snap.status().message())));
    AppendSimple(out, "OK");
  });
}

}  // namespace pollen::resp
