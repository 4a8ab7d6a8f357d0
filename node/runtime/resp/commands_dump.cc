// BF.SCANDUMP and BF.LOADCHUNK (the format is in bloom_dump.h). Replies and
// errors follow RedisBloom 2.4: [iterator, data] with [0, ""] at the end,
// "ERR not found", "Second argument must be numeric" (SCANDUMP, no ERR) and
// "ERR Second argument must be numeric" (LOADCHUNK), and LOADCHUNK's three
// refusals verbatim (RefuseChunk), their reasons in the log.
#include <atomic>
#include <chrono>

#include <spdlog/spdlog.h>

#include "node/runtime/resp/bloom_dump.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

constexpr size_t kMaxPendingRestores = 4;  // per connection

// RedisBloom 2.4's LOADCHUNK errors, word for word: restore scripts and
// client tests match them. Pollen's reason (checksum, order, another
// cluster's secret...) goes to the log, at most a line a second, and every
// refusal to pollen_resp_loadchunk_refused_total. A limit keeps its own
// error, which names the setting (max-filter-bytes).
void RefuseChunk(CommandCall& call, std::string_view key, const absl::Status& why) {
  if (why.code() == absl::StatusCode::kResourceExhausted) return ReplyStatus(call.out, why);
  call.ctx.counters.loadchunk_refused.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<int64_t> last_log_ms{0};
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch()).count();
  if (int64_t last = last_log_ms.load(std::memory_order_relaxed);
      now_ms - last >= 1000 && last_log_ms.compare_exchange_strong(last, now_ms, std::memory_order_relaxed)) {
    spdlog::warn("BF.LOADCHUNK {}: refused: {}", key, ToStd(why.message()));
  }
  switch (why.code()) {
    case absl::StatusCode::kOutOfRange:
      return AppendError(call.out, "ERR invalid offset - no link found");
    case absl::StatusCode::kFailedPrecondition:
      return AppendError(call.out, "ERR invalid chunk - Too big for current filter");
    default:
      return AppendError(call.out, "ERR received bad data");
  }
}

void ReplyChunk(std::string* out, int64_t iterator, std::string_view data) {
  AppendArrayHeader(out, 2);
  AppendInteger(out, iterator);
  AppendBulk(out, data);
}

// A dump's layout of `info`'s sub-filters (no catalog entry yet).
DumpHeader DumpLayout(const node::FilterInfo& info, uint64_t chunk_words) {
  DumpHeader h;
  for (const node::GenerationInfo& g : info.generations) {
    h.slots.push_back(crdt::SlotOf(g.epoch, g.layer));
    h.words.push_back(g.blocks * crdt::kWordsPerBlock);
  }
  h.chunk_words = chunk_words;
  return h;
}

// The filter's catalog entry, for a dump's header (driver thread).
absl::Status ExportEntry(ServerContext& ctx, std::string_view filter, DumpHeader* h) {
  return RunOnDriver(ctx, [&](node::Time) {
    absl::StatusOr<std::string> entry = ctx.node->ExportCatalogEntry(filter);
    if (entry.ok()) h->entry = *std::move(entry);
    return entry.status();
  });
}

}  // namespace

void CmdBfScandump(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() != 3) return ReplyWrongArity(call);
  int64_t iterator = 0;
  if (!ParseInt64(a[2], &iterator)) return AppendErrorVerbatim(call.out, "Second argument must be numeric");
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(a[1], node::InfoParts::kEpochsOnly);
  if (!info.ok()) return ReplyStatus(call.out, info.status());
  DumpHeader h = DumpLayout(*info, DumpChunkWords(call.ctx.limits.dump_chunk_bytes, call.ctx.limits.max_bulk_bytes));
  if (iterator == 0) {
    if (absl::Status s = ExportEntry(call.ctx, a[1], &h); !s.ok()) return ReplyStatus(call.out, s);
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
  const bool exists = call.ctx.node->Version(a[1]).has_value();
  if (iterator == 1) {
    // As RedisBloom: a dump loads into a fresh name only.
    if (exists) return RefuseChunk(call, a[1], absl::InvalidArgumentError("the filter exists"));
    if (restores.find(a[1]) == restores.end() && restores.size() >= kMaxPendingRestores) {
      return AppendError(call.out, "ERR too many loads in progress on this connection");
    }
    absl::StatusOr<std::unique_ptr<PendingRestore>> p =
        PendingRestore::Begin(a[1], a[3], call.ctx.limits.max_filter_bytes);
    if (!p.ok()) return RefuseChunk(call, a[1], p.status());
    restores[std::string(a[1])] = *std::move(p);
    return AppendSimple(call.out, "OK");
  }
  auto it = restores.find(a[1]);
  if (it == restores.end()) {
    // RedisBloom writes a chunk into any filter of that name; Pollen loads
    // only the dump this connection began (a filter's bits only grow).
    if (!exists) return AppendError(call.out, "ERR not found");
    return RefuseChunk(call, a[1], absl::OutOfRangeError("no load of this filter in progress on this connection"));
  }
  if (iterator < 1) return RefuseChunk(call, a[1], absl::InvalidArgumentError("iterator out of range"));
  if (absl::Status s = it->second->Add(static_cast<uint64_t>(iterator), a[3]); !s.ok()) {
    return RefuseChunk(call, a[1], s);
  }
  if (!it->second->complete()) return AppendSimple(call.out, "OK");
  absl::StatusOr<std::shared_ptr<node::Node::PreparedRestore>> prepared = [&] {
    const std::string value = it->second->SnapshotValue();
    restores.erase(it);
    return call.ctx.node->PrepareRestore(value);  // here, not on the driver: it builds the whole filter
  }();
  // A new filter (a fresh stamp, above the tombstone of a deleted name).
  absl::Status s = prepared.status();
  if (s.ok()) s = RunOnDriver(call.ctx, [&](node::Time now) { return call.ctx.node->CommitRestore(*std::move(prepared), now); });
  if (absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) return ReplyStatus(call.out, s);  // a limit; no driver
  if (!s.ok()) return RefuseChunk(call, a[1], absl::InvalidArgumentError(s.message()));  // e.g. another cluster's
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

// The source's dump, taken chunk by chunk from the live filter as SCANDUMP
// takes it and loaded under `dst` as LOADCHUNK loads one: the copy keeps the
// source's identity, so its bits answer for the same keys.
absl::Status CopyFilter(ServerContext& ctx, std::string_view src, std::string_view dst) {
  absl::StatusOr<node::FilterInfo> info = ctx.node->Info(src, node::InfoParts::kEpochsOnly);
  if (!info.ok()) return info.status();
  DumpHeader h = DumpLayout(*info, kMaxDumpChunkWords);
  if (absl::Status s = ExportEntry(ctx, src, &h); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<PendingRestore>> restore =
      PendingRestore::Begin(dst, EncodeDumpHeader(h), ctx.limits.max_filter_bytes);
  if (!restore.ok()) return restore.status();
  std::vector<uint64_t> words;
  for (uint64_t c = 1; c <= h.data_chunks(); ++c) {
    const ChunkPlace place = PlaceOfChunk(h, c);
    words.resize(place.words);
    if (absl::Status s = ctx.node->ExportWords(src, h.slots[place.sub], place.first_word, words); !s.ok()) {
      // The source was deleted, rotated or grew meanwhile: nothing changed.
      return absl::AbortedError(Cat("ERR the source changed during the copy (", ToStd(s.message()), "); try again"));
    }
    if (absl::Status s = (*restore)->Add(c + 1, EncodeDumpChunk(h.slots[place.sub], place.first_word, words)); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::shared_ptr<node::Node::PreparedRestore>> copy = [&] {
    const std::string value = (*restore)->SnapshotValue();
    restore->reset();  // the staged words go before the copy is built
    return ctx.node->PrepareRestore(value);
  }();
  if (!copy.ok()) return copy.status();
  return RunOnDriver(ctx, [&](node::Time now) { return ctx.node->CommitRestore(*std::move(copy), now); });
}

}  // namespace pollen::resp
