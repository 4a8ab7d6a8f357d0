// BF.* commands. RedisBloom's argument forms, reply types and error strings;
// where Pollen differs see node/runtime/resp/README.md ("Differences from RedisBloom").
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "crdt/sizing.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// RedisBloom's default EXPANSION: each new layer twice the last.
constexpr uint32_t kDefaultExpansion = 2;

// Options shared by BF.RESERVE and BF.INSERT.
struct CreateOptions {
  uint64_t capacity = 0;
  double fpr = 0;
  bool nonscaling = false;
  uint32_t expansion = kDefaultExpansion;
  bool routed = false;  // Pollen's ROUTED keyword (docs/routing.md)
  bool one_block = false;  // Pollen's ONEBLOCK keyword: hash scheme 2 (docs/crdt.md, "Layouts")
};

// RedisBloom's replies are exact, byte for byte: BF.RESERVE's errors carry
// "ERR " (and the error-rate one a trailing space), BF.INSERT's and BF.INFO's
// do not.
constexpr std::string_view kRateRange = "ERR (0 < error rate range < 1) ";
constexpr std::string_view kCapacityRange = "ERR (capacity should be larger than 0)";

// Whether this reply takes Redis 8's RESP3 types (resp3-replies = redis-8):
// booleans for adds and tests, a map for BF.INFO. Otherwise RedisBloom 2.4's
// integers and arrays, under either protocol.
bool Redis8Replies(const ServerContext& ctx, const Session& session) {
  return session.proto == Proto::kResp3 && ctx.bloom.redis8_resp3();
}

void AppendAnswer(std::string* out, bool yes, bool booleans) {
  if (booleans) return AppendBool(out, yes);
  AppendInteger(out, yes ? 1 : 0);
}

// BF.RESERVE's optional words are looked up anywhere after the command name,
// by exact (case-insensitive) match, as RedisBloom does; other words are
// ignored. Returns the index, or 0 when absent.
size_t FindWord(std::span<const std::string_view> args, std::string_view word) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (IEquals(args[i], word)) return i;
  }
  return 0;
}

// BF.INSERT's keywords are told apart by their first letters, as RedisBloom
// does: I... ITEMS, C... CAPACITY, ER... ERROR, other E... EXPANSION,
// N?C... NOCREATE, other N... NONSCALING.
enum class InsertWord { kItems, kCapacity, kError, kExpansion, kNoCreate, kNonScaling, kUnknown };
InsertWord ClassifyInsertWord(std::string_view w) {
  auto at = [&](size_t i) { return i < w.size() ? absl::ascii_tolower(static_cast<unsigned char>(w[i])) : '\0'; };
  switch (at(0)) {
    case 'i': return InsertWord::kItems;
    case 'c': return InsertWord::kCapacity;
    case 'e': return at(1) == 'r' ? InsertWord::kError : InsertWord::kExpansion;
    case 'n': return at(2) == 'c' ? InsertWord::kNoCreate : InsertWord::kNonScaling;
    default: return InsertWord::kUnknown;
  }
}

node::FilterConfig MakeConfig(const ServerContext& ctx, std::string_view name, const CreateOptions& o) {
  node::FilterConfig config = ctx.default_filter;
  config.name = std::string(name);
  config.scope = node::Scope::kShared;
  config.owner.clear();
  config.capacity = o.capacity;
  config.fpr = o.fpr;
  config.routed = o.routed;
  if (o.one_block) config.hash_scheme = crdt::kHashSchemeSipBlocked2;
  if (o.nonscaling) {  // never rotates by itself; only POLLEN.ROTATE opens a generation
    config.rotate_fill = 0;
    config.rotate_interval = node::Duration(0);
    config.expansion = 0;
  } else {
    // Scales, as in RedisBloom, unless the node's default filter rotates by
    // fill (the two are exclusive: both answer a full filter).
    config.expansion = config.rotate_fill > 0 ? 0 : o.expansion;
  }
  return config;
}

// The false-positive rate layer `layer` of a filter made with `config` is
// sized for: the filter's own for a fixed-size filter, its share of it
// (crdt::LayerFpr) for a scaling one.
double LayerTargetFpr(const node::FilterConfig& config, uint32_t layer) {
  if (config.expansion == 0) return config.fpr;
  crdt::FilterParams sizing;
  sizing.capacity = config.capacity;
  sizing.fpr = config.fpr;
  sizing.expansion = config.expansion;
  sizing.hash_scheme = config.hash_scheme;
  return crdt::LayerFpr(sizing, layer);
}

// Creates a filter on the driver thread after checking the memory and count
// limits. AlreadyExists when it exists (possibly created concurrently). The
// memory limit applies to the filter as created (its first layer in every
// generation: a scaling filter's first layer is sized at a tighter rate than
// `fpr`); the layers it opens later are bounded one by one (crdt::kMaxBlocks).
absl::Status CreateFilter(ServerContext& ctx, const node::FilterConfig& config) {
  const double first_layer_fpr = LayerTargetFpr(config, 0);
  absl::StatusOr<crdt::FilterShape> shape =
      crdt::ChooseShapeCached(config.capacity, first_layer_fpr, crdt::LayoutOf(config.hash_scheme));
  if (!shape.ok()) return absl::InvalidArgumentError(Cat("filter too large: ", ToStd(shape.status().message())));
  const uint64_t gens = std::max<uint32_t>(config.generations, 1);
  if (shape->bytes() > ctx.limits.max_filter_bytes / gens) {
    return absl::ResourceExhaustedError(Cat("filter would need ", shape->bytes() * gens, " bytes, over max-filter-bytes (",
                                            ctx.limits.max_filter_bytes, ")"));
  }
  if (ctx.node->Info(config.name).ok()) return absl::AlreadyExistsError("item exists");
  return RunOnDriver(ctx, [&ctx, &config](node::Time now) {
    if (ctx.node->FilterNames().size() >= ctx.limits.max_filters) {  // no scan on the driver
      return absl::ResourceExhaustedError("max number of filters reached");
    }
    return ctx.node->Reserve(config, now);
  });
}

// How an add is answered. kLocal: a filter that is not routed (or no
// routing here), added to at once. kPresent: a routed filter whose keys are
// all present here, answered 0 each at once (Node::AnswerIfAllPresent counted
// them). kOwners: the keys' owners decide (ServerContext::routed_add).
enum class AddPath { kLocal, kPresent, kOwners };

AddPath ChoosePath(ServerContext& ctx, std::string_view filter, std::span<const std::string_view> items) {
  if (!ctx.routed_add || !ctx.node->IsRouted(filter)) return AddPath::kLocal;
  absl::StatusOr<bool> present = ctx.node->AnswerIfAllPresent(filter, items);
  return present.ok() && *present ? AddPath::kPresent : AddPath::kOwners;
}

absl::StatusOr<std::vector<bool>> Unpack(absl::StatusOr<node::RoutedAddResult> result, std::vector<bool>* full) {
  if (!result.ok()) return result.status();
  if (!result->status.ok()) return result->status;
  *full = std::move(result->full);
  return std::move(result->added);
}

// The owners' answers, waited for on this thread: for an add that cannot
// defer its reply (inside EXEC) and for the first add of a filter created
// by it. The node answers within about three route-timeouts (then the local
// answer), so the wait is a backstop.
absl::StatusOr<std::vector<bool>> WaitForOwners(ServerContext& ctx, std::string_view filter,
                                                std::span<const std::string_view> items, std::vector<bool>* full) {
  constexpr std::chrono::seconds kBackstop{30};
  auto answer = std::make_shared<std::promise<absl::StatusOr<node::RoutedAddResult>>>();
  std::future<absl::StatusOr<node::RoutedAddResult>> future = answer->get_future();
  ctx.routed_add(std::string(filter), std::make_shared<const std::vector<std::string>>(items.begin(), items.end()),
                 [answer](absl::StatusOr<node::RoutedAddResult> r) { answer->set_value(std::move(r)); });
  if (future.wait_for(kBackstop) != std::future_status::ready) {
    return absl::DeadlineExceededError("ERR routed add: no answer in time");
  }
  return Unpack(future.get(), full);
}

// The add, answered now (`path` from ChoosePath).
absl::StatusOr<std::vector<bool>> AddNow(ServerContext& ctx, AddPath path, std::string_view filter,
                                         std::span<const std::string_view> items, std::vector<bool>* full) {
  switch (path) {
    case AddPath::kLocal: return ctx.node->AddMany(filter, items, full);
    case AddPath::kPresent: full->assign(items.size(), false); return std::vector<bool>(items.size(), false);
    case AddPath::kOwners: return WaitForOwners(ctx, filter, items, full);
  }
  return absl::InternalError("unreachable");
}

// After an add answered NotFound: creates the filter, or finds it created
// concurrently.
absl::Status CreateOrFind(ServerContext& ctx, const node::FilterConfig& config) {
  absl::Status created = CreateFilter(ctx, config);
  return absl::IsAlreadyExists(created) ? absl::OkStatus() : created;
}

// After an add answered NotFound: creates the filter (or finds it created
// concurrently) and adds again.
absl::StatusOr<std::vector<bool>> CreateThenAdd(ServerContext& ctx, const node::FilterConfig& config,
                                                std::span<const std::string_view> items, std::vector<bool>* full) {
  if (absl::Status s = CreateOrFind(ctx, config); !s.ok()) return s;
  return AddNow(ctx, ChoosePath(ctx, config.name, items), config.name, items, full);
}

// Keys a filter has taken: counts them, touches the filter for WATCH, logs
// them (persistence). The error is the reply for the log's failure.
absl::Status NoteAdded(ServerContext& ctx, std::string_view filter, std::span<const std::string_view> items) {
  ctx.counters.keys_added.fetch_add(items.size(), std::memory_order_relaxed);
  ctx.touches.Touch(filter);
  if (!ctx.log_adds) return absl::OkStatus();
  absl::Status logged = ctx.log_adds(filter, items);  // fails as a whole (ServerContext::log_adds)
  if (logged.ok()) return logged;
  return absl::UnavailableError(Cat("ERR persistence: ", ToStd(logged.message())));
}

// Replies to an add whose keys the filter has taken (or the error): counts
// them, logs them (persistence), records them for WAIT.
void ReplyAdded(ServerContext& ctx, Session& session, std::string* out, std::string_view filter,
                std::span<const std::string_view> items, const absl::StatusOr<std::vector<bool>>& added,
                const std::vector<bool>& full, bool multi) {
  if (!added.ok()) return ReplyStatus(out, added.status());
  if (absl::Status noted = NoteAdded(ctx, filter, items); !noted.ok()) return ReplyStatus(out, noted);
  // As RedisBloom, the reply stops at the first refused key (a full
  // NONSCALING filter): [results before it..., the error]. The keys after it
  // changed nothing: the filter was full for them too.
  size_t replies = added->size();
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i]) {
      replies = i + 1;
      break;
    }
  }
  // WAIT covers the keys the filter took (not the refused one, nor those after it).
  const bool refused = replies > 0 && replies <= full.size() && full[replies - 1];
  session.wait_record.Add(filter, items.first(refused ? replies - 1 : replies),
                          [&ctx, filter] { return IncarnationOf(*ctx.node, filter); });
  if (multi) AppendArrayHeader(out, replies);
  const bool booleans = Redis8Replies(ctx, session);
  for (size_t i = 0; i < replies; ++i) {
    if (full[i]) {
      AppendError(out, node::kFilterFullError);
    } else {
      AppendAnswer(out, (*added)[i], booleans);
    }
  }
}

// A routed add whose owners decide: the reply is deferred (Session::defer),
// so the RESP thread serves its other clients during the owners' round
// trip. `config` creates the filter again if it was deleted meanwhile
// (nullopt: NOCREATE).
void DeferToOwners(CommandCall& call, std::string_view filter, std::span<const std::string_view> items,
                   std::optional<node::FilterConfig> config, bool multi) {
  struct Pending {
    std::string filter;
    ServerContext::RoutedKeys keys;  // the one copy of the keys, shared with the driver's call
    std::optional<node::FilterConfig> config;
  };
  auto pending = std::make_shared<Pending>(Pending{
      std::string(filter), std::make_shared<const std::vector<std::string>>(items.begin(), items.end()),
      std::move(config)});
  ServerContext* ctx = &call.ctx;  // outlives the server's connections
  DeferredReply reply = call.session.defer();
  call.session.deferred_answers_half_closed = true;
  ctx->routed_add(pending->filter, pending->keys, [reply, ctx, pending, multi](absl::StatusOr<node::RoutedAddResult> r) {
    reply([ctx, pending, multi, r = std::move(r)](Session& session, std::string* out) mutable {
      std::vector<std::string_view> views(pending->keys->begin(), pending->keys->end());
      std::vector<bool> full;
      absl::StatusOr<std::vector<bool>> added = Unpack(std::move(r), &full);
      if (absl::IsNotFound(added.status()) && pending->config.has_value()) {
        added = CreateThenAdd(*ctx, *pending->config, views, &full);
      }
      ReplyAdded(*ctx, session, out, pending->filter, views, added, full, multi);
    });
  });
}

// Adds items, creating the filter with create() when it is missing (nullopt:
// NOCREATE). create() runs only then (or when the reply is deferred), so the
// common path (the filter exists) builds no FilterConfig. Replies with an
// integer (multi == false) or an array.
void AddItems(CommandCall& call, std::string_view filter, std::span<const std::string_view> items,
              absl::FunctionRef<std::optional<node::FilterConfig>()> create, bool multi) {
  ServerContext& ctx = call.ctx;
  const AddPath path = ChoosePath(ctx, filter, items);
  if (path == AddPath::kOwners && call.session.defer) return DeferToOwners(call, filter, items, create(), multi);
  std::vector<bool> full;
  absl::StatusOr<std::vector<bool>> added = AddNow(ctx, path, filter, items, &full);
  std::optional<node::FilterConfig> config;
  if (absl::IsNotFound(added.status()) && (config = create()).has_value()) {
    added = CreateThenAdd(ctx, *config, items, &full);
  }
  ReplyAdded(ctx, call.session, call.out, filter, items, added, full, multi);
}

void CheckItems(CommandCall& call, std::string_view filter, std::span<const std::string_view> items, bool multi) {
  ServerContext& ctx = call.ctx;
  ctx.counters.keys_queried.fetch_add(items.size(), std::memory_order_relaxed);
  absl::StatusOr<std::vector<bool>> found = ctx.node->ExistsMany(filter, items);
  if (absl::IsNotFound(found.status())) {
    found = std::vector<bool>(items.size(), false);  // RedisBloom: unknown filter answers 0
  } else if (!found.ok()) {
    ReplyStatus(call.out, found.status());
    return;
  }
  if (multi) AppendArrayHeader(call.out, found->size());
  const bool booleans = Redis8Replies(ctx, call.session);
  for (bool b : *found) AppendAnswer(call.out, b, booleans);
}

// Per sub-filter this node's count, exact while only this node's adds set its
// bits (RedisBloom's figure); once bits came from elsewhere (peers, a
// snapshot), the larger of that count and the estimate from the bits.
int64_t EstimatedItems(const node::FilterInfo& info) {
  double sum = 0;
  for (const node::GenerationInfo& g : info.generations) {
    const double counted = static_cast<double>(g.items);
    sum += g.merged ? std::max(g.estimated_items, counted) : counted;
  }
  if (!std::isfinite(sum) || sum < 0) return 0;
  return static_cast<int64_t>(std::llround(std::min(sum, 9.0e18)));
}

// What BF.ADD and BF.MADD create: bf-initial-size, bf-error-rate and
// bf-expansion-factor (0: NONSCALING), as Redis 8.
node::FilterConfig DefaultConfig(const ServerContext& ctx, std::string_view name) {
  const BloomSettings settings = ctx.bloom.Get();
  CreateOptions o;
  o.capacity = settings.initial_size;
  o.fpr = settings.error_rate;
  o.nonscaling = settings.expansion == 0;
  o.expansion = o.nonscaling ? kDefaultExpansion : settings.expansion;
  node::FilterConfig c = MakeConfig(ctx, name, o);
  c.rotate_fill = ctx.default_filter.rotate_fill;
  c.rotate_interval = ctx.default_filter.rotate_interval;
  c.routed = ctx.default_filter.routed;
  if (c.rotate_fill > 0) c.expansion = 0;  // rotation by fill and scaling are exclusive
  return c;
}

}  // namespace

void CmdBfReserve(CommandCall& call) {
  const auto& a = call.args;
  CreateOptions o;
  // Pollen's own keyword, looked for after the capacity only (NONSCALING and
  // EXPANSION are matched anywhere, as RedisBloom does): a filter named
  // "routed" is not routed.
  o.routed = a.size() > 4 && FindWord(a.subspan(3), "ROUTED") != 0;
  // ONEBLOCK (Pollen's too, same rule): one cache line per key at any rate,
  // for a low-rate filter whose adds and tests matter more than its bytes.
  o.one_block = a.size() > 4 && FindWord(a.subspan(3), "ONEBLOCK") != 0;
  if (a.size() < 4 || a.size() > 7u + (o.routed ? 1 : 0) + (o.one_block ? 1 : 0)) return ReplyWrongArity(call);
  if (!ParseRedisDouble(a[2], &o.fpr)) return AppendError(call.out, "ERR bad error rate");
  if (!(o.fpr > 0 && o.fpr < 1)) return AppendError(call.out, kRateRange);
  int64_t capacity = 0;
  if (!ParseInt64(a[3], &capacity)) return AppendError(call.out, "ERR bad capacity");
  if (capacity <= 0) return AppendError(call.out, kCapacityRange);
  o.capacity = static_cast<uint64_t>(capacity);
  const bool nonscaling_word = FindWord(a, "NONSCALING") != 0;
  // Without EXPANSION: bf-expansion-factor's, 0 making it NONSCALING (Redis 8).
  const uint32_t default_expansion = call.ctx.bloom.Get().expansion;
  o.nonscaling = nonscaling_word || default_expansion == 0;
  if (default_expansion > 0) o.expansion = std::min(default_expansion, crdt::kMaxExpansion);
  if (const size_t e = FindWord(a, "EXPANSION"); e != 0) {
    if (e + 1 >= a.size()) return AppendError(call.out, "ERR no expansion");
    if (nonscaling_word) return AppendErrorVerbatim(call.out, "Nonscaling filters cannot expand");
    o.nonscaling = false;
    int64_t expansion = 0;
    if (!ParseInt64(a[e + 1], &expansion)) return AppendError(call.out, "ERR bad expansion");
    // RedisBloom takes any integer here; Pollen clamps it to [1, 65536]
    // (README, "Differences").
    o.expansion = static_cast<uint32_t>(std::clamp<int64_t>(expansion, 1, crdt::kMaxExpansion));
  }
  const absl::Status s = CreateFilter(call.ctx, MakeConfig(call.ctx, a[1], o));
  if (!s.ok()) return ReplyStatus(call.out, s);
  call.ctx.touches.Touch(a[1]);
  AppendSimple(call.out, "OK");
}

void CmdBfAdd(CommandCall& call) {
  if (call.args.size() != 3) return ReplyWrongArity(call);
  AddItems(call, call.args[1], call.args.subspan(2),
           [&call]() -> std::optional<node::FilterConfig> { return DefaultConfig(call.ctx, call.args[1]); }, false);
}

void CmdBfMadd(CommandCall& call) {
  if (call.args.size() < 3) return ReplyWrongArity(call);
  AddItems(call, call.args[1], call.args.subspan(2),
           [&call]() -> std::optional<node::FilterConfig> { return DefaultConfig(call.ctx, call.args[1]); }, true);
}

// RedisBloom's order: parse every option (a malformed value or an unknown word
// answers at once), then require ITEMS with at least one item, then check the
// ranges ("Bad argument received"), then create or add.
void CmdBfInsert(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() < 4) return ReplyWrongArity(call);
  // Defaults as Redis 8: bf-initial-size, bf-error-rate, and
  // bf-expansion-factor (0: NONSCALING unless EXPANSION is given).
  const BloomSettings settings = call.ctx.bloom.Get();
  CreateOptions o;
  o.capacity = settings.initial_size;
  o.fpr = settings.error_rate;
  int64_t capacity = static_cast<int64_t>(o.capacity), expansion = settings.expansion;
  bool expansion_given = false;
  bool create = true;
  size_t items = 0;
  for (size_t i = 2; i < a.size() && items == 0;) {
    const InsertWord word = ClassifyInsertWord(a[i]);
    if (word == InsertWord::kUnknown) return AppendErrorVerbatim(call.out, "Unknown argument received");
    if (word == InsertWord::kItems) {
      items = i + 1;
    } else if (word == InsertWord::kNoCreate) {
      create = false;
      ++i;
    } else if (word == InsertWord::kNonScaling) {
      o.nonscaling = true;
      ++i;
    } else {
      if (i + 1 >= a.size()) return ReplyWrongArity(call);
      const std::string_view value = a[i + 1];
      if (word == InsertWord::kCapacity && !ParseInt64(value, &capacity)) {
        return AppendErrorVerbatim(call.out, "Bad capacity");
      }
      if (word == InsertWord::kError && !ParseRedisDouble(value, &o.fpr)) {
        return AppendErrorVerbatim(call.out, "Bad error rate");
      }
      if (word == InsertWord::kExpansion && !ParseInt64(value, &expansion)) {
        return AppendErrorVerbatim(call.out, "Bad expansion");
      }
      if (word == InsertWord::kExpansion) expansion_given = true;
      i += 2;
    }
  }
  if (items == 0 || items >= a.size()) return ReplyWrongArity(call);
  if (expansion == 0 && !expansion_given) {
    o.nonscaling = true;
    expansion = kDefaultExpansion;
  }
  if (capacity <= 0 || !(o.fpr > 0 && o.fpr < 1) || expansion < 1) {
    return AppendErrorVerbatim(call.out, "Bad argument received");
  }
  o.capacity = static_cast<uint64_t>(capacity);
  o.expansion = static_cast<uint32_t>(std::clamp<int64_t>(expansion, 1, crdt::kMaxExpansion));
  std::optional<node::FilterConfig> config;
  if (create) {
    config = MakeConfig(call.ctx, a[1], o);
    if (!o.nonscaling) {
      config->rotate_fill = call.ctx.default_filter.rotate_fill;
      config->rotate_interval = call.ctx.default_filter.rotate_interval;
      if (config->rotate_fill > 0) config->expansion = 0;
    }
  }
  AddItems(call, a[1], a.subspan(items), [&config] { return config; }, true);
}

// One key: Node::Exists probes it directly (no batch pipeline, no vectors),
// which is most of BF.EXISTS's own cost at pipeline depth 1.
void CmdBfExists(CommandCall& call) {
  ServerContext& ctx = call.ctx;
  if (call.args.size() != 3) return ReplyWrongArity(call);
  ctx.counters.keys_queried.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<bool> found = ctx.node->Exists(call.args[1], call.args[2]);
  if (absl::IsNotFound(found.status())) {
    found = false;  // RedisBloom: unknown filter answers 0
  } else if (!found.ok()) {
    ReplyStatus(call.out, found.status());
    return;
  }
  AppendAnswer(call.out, *found, Redis8Replies(ctx, call.session));
}

std::optional<size_t> RunBfAdds(ServerContext& ctx, Session& session, std::string_view filter,
                                std::span<const std::string_view> items, std::string* out) {
  const size_t n = items.size();
  auto fail_all = [out, n](const absl::Status& status) {
    for (size_t i = 0; i < n; ++i) ReplyStatus(out, status);
    return n;
  };
  // The owners of a routed filter decide its adds, and each add defers its
  // reply: a run cannot, so it hands its requests back before changing
  // anything (ChoosePath answers kOwners with no side effect). The
  // connection checked before the run; this covers a filter made routed
  // since (created by this add with a routed default, or re-created).
  AddPath path = ChoosePath(ctx, filter, items);
  if (path == AddPath::kOwners) return std::nullopt;
  std::vector<bool> full;
  absl::StatusOr<std::vector<bool>> added = AddNow(ctx, path, filter, items, &full);
  if (absl::IsNotFound(added.status())) {  // CreateThenAdd, with the same hand-back
    if (absl::Status s = CreateOrFind(ctx, DefaultConfig(ctx, filter)); !s.ok()) return fail_all(s);
    path = ChoosePath(ctx, filter, items);
    if (path == AddPath::kOwners) return std::nullopt;
    added = AddNow(ctx, path, filter, items, &full);
  }
  if (!added.ok()) return fail_all(added.status());
  // One touch marks the run for WATCH, which compares counts for equality.
  if (absl::Status noted = NoteAdded(ctx, filter, items); !noted.ok()) return fail_all(noted);
  // Each request is its own BF.ADD: a refused key (a full NONSCALING
  // filter) fails its own request only, and WAIT covers every other key.
  const size_t refused = static_cast<size_t>(std::count(full.begin(), full.end(), true));
  auto incarnation = [&ctx, filter] { return IncarnationOf(*ctx.node, filter); };
  if (refused == 0) {
    session.wait_record.Add(filter, items, incarnation);
  } else {
    std::vector<std::string_view> taken;
    for (size_t i = 0; i < n; ++i) {
      if (!full[i]) taken.push_back(items[i]);
    }
    session.wait_record.Add(filter, taken, incarnation);
  }
  const bool booleans = Redis8Replies(ctx, session);
  for (size_t i = 0; i < n; ++i) {
    if (full[i]) {
      AppendError(out, node::kFilterFullError);
    } else {
      AppendAnswer(out, (*added)[i], booleans);
    }
  }
  return refused;
}

size_t RunBfExists(ServerContext& ctx, const Session& session, std::string_view filter,
                   std::span<const std::string_view> items, std::string* out) {
  ctx.counters.keys_queried.fetch_add(items.size(), std::memory_order_relaxed);
  absl::StatusOr<std::vector<bool>> found = ctx.node->ExistsMany(filter, items);
  if (absl::IsNotFound(found.status())) {
    found = std::vector<bool>(items.size(), false);  // RedisBloom: unknown filter answers 0
  } else if (!found.ok()) {
    for (size_t i = 0; i < items.size(); ++i) ReplyStatus(out, found.status());
    return items.size();
  }
  const bool booleans = Redis8Replies(ctx, session);
  for (bool b : *found) AppendAnswer(out, b, booleans);
  return 0;
}

void CmdBfMexists(CommandCall& call) {
  if (call.args.size() < 3) return ReplyWrongArity(call);
  CheckItems(call, call.args[1], call.args.subspan(2), true);
}

void CmdBfCard(CommandCall& call) {
  if (call.args.size() != 2) return ReplyWrongArity(call);
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(call.args[1]);
  if (absl::IsNotFound(info.status())) return AppendInteger(call.out, 0);
  if (!info.ok()) return ReplyStatus(call.out, info.status());
  AppendInteger(call.out, EstimatedItems(*info));
}

// BF.DEBUG key: RedisBloom's shape, filled with Pollen's sub-filters (every
// generation's layers, oldest first): "size:N" (BF.CARD's count), then one
// "bytes:B bits:b hashes:k hashwidth:64 capacity:C size:n ratio:p" per
// sub-filter, p its target false-positive rate (%g, as RedisBloom prints it).
void CmdBfDebug(CommandCall& call) {
  if (call.args.size() != 2) return ReplyWrongArity(call);
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(call.args[1]);
  if (!info.ok()) return ReplyStatus(call.out, info.status());
  AppendArrayHeader(call.out, 1 + info->generations.size());
  AppendBulk(call.out, Cat("size:", EstimatedItems(*info)));
  for (const node::GenerationInfo& g : info->generations) {
    char ratio_text[32];
    std::snprintf(ratio_text, sizeof ratio_text, "%g", LayerTargetFpr(info->config, g.layer));
    const uint64_t bytes = g.blocks * crdt::kWordsPerBlock * 8;
    AppendBulk(call.out, Cat("bytes:", bytes, " bits:", bytes * 8, " hashes:", g.k, " hashwidth:64 capacity:", g.capacity,
                             " size:", g.items, " ratio:", ratio_text));
  }
}

void CmdBfInfo(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() < 2 || a.size() > 3) return ReplyWrongArity(call);
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(a[1]);
  if (!info.ok()) return ReplyStatus(call.out, info.status());
  // As RedisBloom: the capacity of the whole stack (the newest generation's
  // layers), its memory, and how many sub-filters it holds.
  uint64_t stack_capacity = 0;
  for (const node::GenerationInfo& g : info->generations) {
    if (g.epoch == info->epoch) stack_capacity = std::min<uint64_t>(stack_capacity + g.capacity, INT64_MAX);
  }
  const int64_t capacity = static_cast<int64_t>(stack_capacity);
  const int64_t size = static_cast<int64_t>(std::min<uint64_t>(info->memory_bytes, INT64_MAX));
  const int64_t filters = static_cast<int64_t>(info->generations.size());
  const uint32_t expansion = info->config.expansion;
  struct Field {
    std::string_view word;  // BF.INFO key WORD
    std::string_view name;
    std::optional<int64_t> value;  // nullopt: a NONSCALING filter's expansion
  };
  const Field fields[] = {
      {"CAPACITY", "Capacity", capacity},
      {"SIZE", "Size", size},
      {"FILTERS", "Number of filters", filters},
      {"ITEMS", "Number of items inserted", EstimatedItems(*info)},
      {"EXPANSION", "Expansion rate", expansion > 0 ? std::optional<int64_t>(expansion) : std::nullopt},
  };
  std::span<const Field> shown = fields;
  if (a.size() == 3) {
    const auto it = std::find_if(std::begin(fields), std::end(fields), [&a](const Field& f) { return IEquals(a[2], f.word); });
    if (it == std::end(fields)) return AppendErrorVerbatim(call.out, "Invalid information value");
    shown = std::span(it, 1);
  }
  // RedisBloom 2.4: a flat array naming every field, or the one value asked
  // for. Redis 8 under RESP3 (resp3-replies = redis-8): a map either way.
  const bool map = Redis8Replies(call.ctx, call.session);
  const bool named = map || a.size() == 2;
  if (map) {
    AppendMapHeader(call.out, shown.size(), Proto::kResp3);
  } else {
    AppendArrayHeader(call.out, named ? 2 * shown.size() : shown.size());
  }
  for (const Field& f : shown) {
    if (named) AppendSimple(call.out, f.name);
    if (f.value.has_value()) {
      AppendInteger(call.out, *f.value);
    } else {
      AppendNull(call.out, call.session.proto);
    }
  }
}

}  // namespace pollen::resp
