// Node::Impl anti-entropy: digests, then hashes one level down where they
// differ, down to range summaries, then only the differing ranges
// (anti_entropy.h has the protocol).
#include "node/core/node_impl.h"

#include <numeric>

namespace pollen::node {

void Node::Impl::StartAntiEntropy(const Address& peer, bool by_stream, uint32_t level) {
  assert(level <= kDigestLevel);
  if (peer.empty() || peer == config.advertise) return;
  DrainPending();  // mark the words of client adds in the summary cache
  Stats([](NodeCounters& s) { ++s.anti_entropy_runs; });
  NoteExchange();
  // Tombstones first, so the peer drops what they delete before comparing;
  // they go by stream, and so must the request then, to arrive after them.
  const bool stream = by_stream || !tombstones.empty();
  SendTombstones(peer);
  wire::Envelope env;
  wire::SyncRequest* req = env.mutable_sync_request();
  for (const auto& [name, state] : filters) ToWire(state->entry, state->set->epoch(), req->add_catalog());
  size_t bytes = 0;
  bool complete = true;
  for (const auto& [name, state] : filters) {
    if (bytes > kSyncChunkBytes) {
      complete = false;
      Send(peer, env, true);
      req->Clear();
      bytes = 0;
    }
    wire::FilterSummary* fs = req->add_filters();
    ToWire(state->entry.params, fs->mutable_filter());
    fs->set_epoch(state->set->epoch());
    for (uint64_t slot : state->set->slots()) {
      std::shared_ptr<const crdt::SubFilter> sub = state->set->Sub(slot);
      if (sub == nullptr) continue;
      wire::GenerationSummary* g = fs->add_generations();
      const uint64_t blocks = sub->filter->shape().blocks;
      const bool looks_empty = CountsNoBits(*state, slot);
      Summarize(summary_cache.Get(state->uid, slot, *sub->filter, looks_empty), blocks, sub->epoch, level, {}, g);
      if (sub->layer > 0) g->set_layer(sub->layer);
      bytes += 24 + 8 * ItemsAt(level, RangeCount(blocks));  // the hashes and their framing
    }
    bytes += 64 + 2 * name.size();  // the filter reference and the catalog entry
  }
  req->set_complete(complete);
  Send(peer, env, stream);  // else a datagram when it fits: equal replicas stop here
}

// Why between runs as well as in Get: at 4 GiB under 20,000 adds/s every
// range is dirty at each run, and Get's bound alone left most summaries a
// run or more behind. Ranges that differ only by staleness descend to block
// hashes: the repair after the campaign's bulk load took 119 s with Get's
// bound alone, 92 s with summaries recomputed whole in Get (and the driver
// stalled), 53 s with this refresh (tests/scale/scale.sh 4gb, 2026-12-06/07).
// 64 MiB a round (200 ms) refreshes a 4 GiB filter in 64 rounds (~13 s,
// about one anti_entropy_interval); a round's share is ~9 ms at
// RangeSummaries' in-cache 7.3 GB/s (bench_scan), more from memory.
void Node::Impl::RefreshSummaries() {
  uint64_t budget = SummaryCache::kRefreshWords;
  auto it = filters.upper_bound(summary_refresh_after);
  for (size_t n = 0; n < filters.size() && budget > 0; ++n, ++it) {
    if (it == filters.end()) it = filters.begin();
    const FilterState& state = *it->second;
    for (uint64_t slot : state.set->slots()) {
      std::shared_ptr<const crdt::SubFilter> sub = state.set->Sub(slot);
      if (sub != nullptr) summary_cache.Refresh(state.uid, slot, *sub->filter, &budget, CountsNoBits(state, slot));
    }
    if (budget == 0) break;  // this filter may have more: it goes first next round
    summary_refresh_after = it->first;
  }
  const uint64_t stale = summary_cache.DirtyRanges();
  if (stale != stale_summary_ranges) {
    stale_summary_ranges = stale;
    Stats([stale](NodeCounters& s) { s.stale_summary_ranges = stale; });
  }
}

void Node::Impl::ApplyCatalog(const std::vector<std::pair<CatalogEntry, uint64_t>>& entries) {
  for (const auto& [entry, epoch] : entries) {
    if (entry.params.key_id != key_id) {
      RefuseMerge(entry.config.name, "catalog entry under another cluster secret");
      continue;
    }
    ApplyCatalogEntry(entry, epoch);
  }
}

void Node::Impl::HandleSyncRequest(const Address& from, const wire::SyncRequest& req) {
  if (req.resume()) {
    if (req.catalog_size() > 0 || req.filters_size() > 0 || req.partial() || req.more()) {
      Reject(from, "malformed");
      return;
    }
    ResumeCutLeg(from);
    return;
  }
  std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
  std::vector<DecodedSummary> summaries;
  if (!DecodeCatalog(req.catalog(), &catalog) || static_cast<size_t>(req.filters_size()) > kMaxFilters) {
    Reject(from, "malformed");
    return;
  }
  for (const wire::FilterSummary& fs : req.filters()) {
    absl::StatusOr<crdt::FilterParams> params = FromWire(fs.filter());
    bool ok = params.ok() && fs.epoch() <= kMaxEpoch &&
              fs.generations_size() <= static_cast<int>(crdt::kMaxGenerations * crdt::kMaxLayers);
    for (int i = 0; ok && i < fs.generations_size(); ++i) {
      const wire::GenerationSummary& g = fs.generations(i);
      absl::StatusOr<crdt::FilterShape> shape =
          g.layer() < crdt::kMaxLayers ? crdt::LayerShape(*params, g.layer()) : absl::InvalidArgumentError("layer");
      ok = g.epoch() <= kMaxEpoch && shape.ok() && ValidateSummary(g, *shape).ok();
    }
    if (!ok) {
      Reject(from, "malformed");
      return;
    }
    summaries.push_back({*std::move(params), fs.epoch(), &fs});
  }
  // Validated: apply.
  if (req.partial()) NoteExchange();  // a descent: an exchange is under way (a first leg is answered at once)
  DrainPending();  // mark the words of client adds in the summary cache
  ApplyCatalog(catalog);
  if (!req.partial()) SendTombstones(from);
  RangesWriter writer(this, from, true);
  writer.message().set_reply(true);
  if (!req.partial()) CatalogNews(req, writer.message());
  wire::Envelope down;  // the next level of what differs, back to the requester
  down.mutable_sync_request()->set_partial(true);
  size_t down_bytes = 0;
  wire::FilterSummary* down_filter = nullptr;  // the current filter's entry in `down`
  // By stream, as the ranges are: once replicas are known to differ, a lost
  // leg would cost a whole anti_entropy_interval (scenario loss30: converged
  // 8.8 s after the faults stopped with datagram legs, 0.8 s by stream).
  // Split like the ranges: a frame has a size limit, generations do not.
  auto flush_down = [&] {
    if (down.sync_request().filters_size() > 0 || down.sync_request().more()) Send(from, down, true);
    down.mutable_sync_request()->clear_filters();
    down_bytes = 0;
    down_filter = nullptr;
  };
  // A generation entry in `down` for `sub` of `state`, under the filter's entry.
  auto down_generation = [&](const FilterState& state, const crdt::SubFilter& sub) {
    if (down_filter == nullptr) {
      down_bytes += 64 + state.entry.params.name.size();  // the filter reference
      down_filter = down.mutable_sync_request()->add_filters();
      ToWire(state.entry.params, down_filter->mutable_filter());
      down_filter->set_epoch(state.set->epoch());
    }
    wire::GenerationSummary* g = down_filter->add_generations();
    g->set_epoch(sub.epoch);
    g->set_blocks_per_range(BlocksPerRange(sub.filter->shape().blocks));
    if (sub.layer > 0) g->set_layer(sub.layer);
    return g;
  };
  size_t block_bytes = 0;   // block hashes in this leg (the exchange's budget)
  bool blocks_cut = false;  // the budget left differing ranges unhashed
  bool kept = false;        // a cut content leg's hashes were kept for a resume
  bool ranges_cut = false;  // the budget left ranges out that no kept hashes cover
  std::set<std::string> mentioned;
  for (const DecodedSummary& s : summaries) {
    mentioned.insert(s.params.name);
    std::shared_ptr<const FilterState> state = MatchFilter(s.params);
    if (state == nullptr) continue;
    LearnEpoch(s.params.name, s.epoch);
    for (const wire::GenerationSummary& g : s.wire->generations()) LearnLayers(*state, g.epoch(), g.layer() + 1);
    writer.BeginFilter(*state);
    down_filter = nullptr;
    for (uint64_t slot : state->set->slots()) {
      std::shared_ptr<const crdt::SubFilter> sub = state->set->Sub(slot);
      if (sub == nullptr) continue;
      const wire::GenerationSummary* theirs = nullptr;
      for (const wire::GenerationSummary& g : s.wire->generations()) {
        if (g.epoch() == sub->epoch && g.layer() == sub->layer) theirs = &g;
      }
      writer.BeginGeneration(slot);
      if (theirs == nullptr) {
        if (!req.partial()) ranges_cut |= !SendWholeGeneration(writer, *sub->filter);
        continue;
      }
      if (theirs->blocks()) {
        kept |= AnswerBlockHashes(writer, from, *state, *sub, *theirs, req.more());
        continue;
      }
      const std::vector<uint64_t>& ours = summary_cache.Get(state->uid, slot, *sub->filter, CountsNoBits(*state, slot));
      const std::vector<uint64_t> differing = DifferingItems(ours, *theirs);
      if (differing.empty()) continue;
      const uint64_t blocks = sub->filter->shape().blocks;
      // Our contents of each range, and a request for the requester's
      // (`wanted`), as far as the exchange's budget goes. A cut exchange
      // resumes from where the last one was cut, so that ranges past the
      // budget are not left behind by exchanges that keep starting at range 0.
      // `theirs_empty(r)`: the requester's summary of range r is the empty
      // one, so there is nothing of theirs to ask for. A joining node's
      // answers to those requests were ~7% of its CPU (perf, 1 GiB): it
      // exported and coded each range it had just merged to find nothing
      // new. A summary that is stale there (bits added since it was
      // computed) only delays those bits to a later exchange.
      auto send_contents = [&](const std::vector<uint64_t>& ranges, const auto& theirs_empty) {
        const size_t start = static_cast<size_t>(
            std::lower_bound(ranges.begin(), ranges.end(), ae_resume_range) - ranges.begin());
        for (size_t i = 0; i < ranges.size(); ++i) {
          const uint64_t r = ranges[(start + i) % ranges.size()];
          if (summary_cache.KnownEmpty(state->uid, slot, *sub->filter, r)) {
            // Nothing to send, and nothing to export to learn it: a joining
            // node scanned its 4 GiB of zeros for each peer's run.
            if (!theirs_empty(r)) writer.AddWanted(r);
            continue;
          }
          if (!writer.AddRange(*sub->filter, r)) {
            ae_resume_range = r;
            ranges_cut = true;
            break;
          }
          if (!theirs_empty(r)) writer.AddWanted(r);
        }
      };
      if (theirs->level() == 0 && BlocksPerRange(blocks) >= kMinBlocksPerRangeForHashes) {
        // A range empty on either side needs no block hashes: the side with
        // bits sends them all (the flat exchange), which costs its set bits.
        // A joining or wiped node's ranges are all empty, and hashing every
        // block (4 bytes each) cost more than the bits: 154 MB of hashes
        // for a 2.47 GB filter at 0.3% fill, ~90 MB of set bits.
        std::vector<uint64_t> theirs_at(ours.size(), 0);
        for (int i = 0; i < theirs->summaries_size(); ++i) {
          const uint64_t item = theirs->items_size() == 0 ? static_cast<uint64_t>(i) : theirs->items(i);
          if (item < theirs_at.size()) theirs_at[item] = theirs->summaries(i);
        }
        std::vector<uint64_t> hashed, flat;
        const auto theirs_empty = [&](uint64_t r) {
          return theirs_at[r] == sub->filter->EmptyRangeSummary(r, BlocksPerRange(blocks));
        };
        for (uint64_t r : differing) {
          const uint64_t empty = sub->filter->EmptyRangeSummary(r, BlocksPerRange(blocks));
          (ours[r] == empty || theirs_at[r] == empty ? flat : hashed).push_back(r);
        }
        if (!flat.empty()) send_contents(flat, theirs_empty);
        // The hashes of the differing ranges' blocks, from where the last
        // cut leg stopped, as far as the exchange's budget goes; split
        // into frames as the summaries above are.
        const size_t start = static_cast<size_t>(
            std::lower_bound(hashed.begin(), hashed.end(), ae_resume_range) - hashed.begin());
        std::vector<std::pair<uint64_t, size_t>> chosen;  // range, bytes
        for (size_t i = 0; i < hashed.size(); ++i) {
          const uint64_t r = hashed[(start + i) % hashed.size()];
          const size_t cost = 4 * BlocksInRange(blocks, r) + 8;
          if (block_bytes + cost > config.anti_entropy_round_bytes && block_bytes > 0) {
            ae_resume_range = r;
            blocks_cut = true;
            break;
          }
          block_bytes += cost;
          chosen.emplace_back(r, cost);
        }
        std::sort(chosen.begin(), chosen.end());
        const uint64_t salt = crdt::Mix64(++ae_salts);
        wire::GenerationSummary* g = nullptr;
        for (const auto& [r, cost] : chosen) {
          if (g != nullptr && down_bytes + cost > kSyncChunkBytes) {
            flush_down();
            g = nullptr;
          }
          if (g == nullptr) {
            g = down_generation(*state, *sub);
            g->set_blocks(true);
            g->set_salt(salt);
            down_bytes += 32;
          }
          g->add_items(r);
          AppendBlockHashes(*sub->filter, r, salt, g->mutable_block_hashes());
          down_bytes += cost;
        }
        continue;
      }
      if (theirs->level() == 0) {
        send_contents(differing, [](uint64_t) { return false; });
        continue;
      }
      if (down_bytes > kSyncChunkBytes) flush_down();
      wire::GenerationSummary* g = down_generation(*state, *sub);
      Summarize(ours, blocks, sub->epoch, theirs->level() - 1, ChildItems(theirs->level(), differing, RangeCount(blocks)),
                g);  // down_generation set the layer; Summarize leaves it
      down_bytes += 32 + 20 * static_cast<size_t>(g->summaries_size());  // a summary and its item
    }
  }
  if (req.complete() && !req.partial()) {  // filters the requester does not have at all
    for (const auto& [name, state] : filters) {
      if (mentioned.count(name)) continue;
      writer.BeginFilter(*state);
      for (uint64_t slot : state->set->slots()) {
        std::shared_ptr<const crdt::SubFilter> sub = state->set->Sub(slot);
        if (sub == nullptr) continue;
        writer.BeginGeneration(slot);
        ranges_cut |= !SendWholeGeneration(writer, *sub->filter);
      }
    }
  }
  if (req.more()) writer.SetMore();  // the block-hash leg this answers was cut
  if (kept) {
    writer.SetResumable();
    // What the kept hashes do not cover goes to a new descent after them.
    if (ranges_cut) cut_legs[from].leg_cut = true;
  }
  writer.Flush();
  if (blocks_cut) down.mutable_sync_request()->set_more(true);
  flush_down();
}

bool Node::Impl::AnswerBlockHashes(RangesWriter& writer, const Address& from, const FilterState& state,
                                   const crdt::SubFilter& sub, const wire::GenerationSummary& theirs, bool leg_cut) {
  // Validated (ValidateSummary): the hashes of each range of `items`, or of
  // all ranges when `items` is empty, in order.
  const uint64_t blocks = sub.filter->shape().blocks;
  UnansweredBlocks hashes{state.entry.params, sub.epoch, sub.layer, theirs.salt(), {}, {}};
  if (theirs.items_size() == 0) {
    hashes.ranges.resize(RangeCount(blocks));
    std::iota(hashes.ranges.begin(), hashes.ranges.end(), uint64_t{0});
  } else {
    hashes.ranges.assign(theirs.items().begin(), theirs.items().end());
  }
  hashes.hashes.assign(theirs.block_hashes().begin(), theirs.block_hashes().end());
  // Past the budget, nothing is sent: the hashes are kept whole.
  const size_t done = writer.cut() ? 0 : SendDifferingBlocks(writer, *sub.filter, hashes);
  if (done == hashes.ranges.size()) return false;
  hashes.DropFront(done, blocks);
  return KeepCutLeg(from, std::move(hashes), leg_cut);
}

size_t Node::Impl::SendDifferingBlocks(RangesWriter& writer, const crdt::BlockedFilter& filter,
                                       const UnansweredBlocks& hashes) {
  const uint64_t blocks = filter.shape().blocks;
  size_t offset = 0;
  for (size_t i = 0; i < hashes.ranges.size(); ++i) {
    const uint64_t r = hashes.ranges[i];
    const size_t n = BlocksInRange(blocks, r);
    assert(offset + n <= hashes.hashes.size());
    const std::string differing = DifferingBlocks(filter, r, hashes.salt, std::span(hashes.hashes).subspan(offset, n));
    offset += n;
    if (differing.empty()) continue;
    if (!writer.AddRange(filter, r, {}, differing)) return i;
    writer.AddWanted(r);
  }
  return hashes.ranges.size();
}

bool Node::Impl::KeepCutLeg(const Address& peer, UnansweredBlocks hashes, bool leg_cut) {
  auto it = cut_legs.find(peer);
  if (it == cut_legs.end()) {
    if (cut_legs.size() >= kMaxCutLegs) {  // make room: the oldest goes
      auto oldest = std::min_element(cut_legs.begin(), cut_legs.end(),
                                     [](const auto& a, const auto& b) { return a.second.kept < b.second.kept; });
      cut_legs.erase(oldest);
    }
    it = cut_legs.emplace(peer, CutLeg{}).first;
  }
  CutLeg& leg = it->second;
  if (leg.rest.empty()) leg = CutLeg{};  // served whole before: a new leg
  leg.kept = now;
  leg.leg_cut |= leg_cut;
  // A range kept before and again now goes once, with the newer hashes: a
  // peer's answer and its contents both kept here were each sent again, the
  // second time all but stale, and a leg with too few new bits stops the
  // peer's resumes (kContinueYield).
  const uint64_t blocks = LayerBlocks(hashes.params, crdt::SlotOf(hashes.epoch, hashes.layer));
  for (auto older = leg.rest.begin(); older != leg.rest.end();) {
    if (older->params == hashes.params && older->epoch == hashes.epoch && older->layer == hashes.layer) {
      leg.hashes -= older->DropRanges(hashes.ranges, blocks);
    }
    older = older->ranges.empty() ? leg.rest.erase(older) : std::next(older);
  }
  if (leg.hashes + hashes.hashes.size() > kMaxCutLegHashes) {
    leg.leg_cut = true;  // left to a new descent
    return !leg.rest.empty();
  }
  leg.hashes += hashes.hashes.size();
  leg.rest.push_back(std::move(hashes));
  assert(cut_legs.size() <= kMaxCutLegs);
  return true;
}

void Node::Impl::ResumeCutLeg(const Address& from) {
  auto it = cut_legs.find(from);
  if (it == cut_legs.end() || now - it->second.kept > kCutLegLifetime) {
    // Lost (evicted, expired, or this node restarted): descend again.
    if (it != cut_legs.end()) cut_legs.erase(it);
    StartAntiEntropy(from, /*by_stream=*/true, /*level=*/0);
    return;
  }
  CutLeg& leg = it->second;
  // Served whole already: a leg cut in two frames (two block-hash frames,
  // each answered within its own budget) brings two resumes.
  if (leg.rest.empty()) return;
  NoteExchange();
  DrainPending();  // mark the words of client adds in the summary cache
  Stats([](NodeCounters& s) { ++s.anti_entropy_resumed; });
  RangesWriter writer(this, from, true);
  writer.message().set_reply(true);
  while (!leg.rest.empty() && !writer.cut()) {
    UnansweredBlocks& hashes = leg.rest.front();
    std::shared_ptr<const FilterState> state = MatchFilter(hashes.params);
    const uint64_t slot = crdt::SlotOf(hashes.epoch, hashes.layer);
    std::shared_ptr<const crdt::SubFilter> sub = state == nullptr ? nullptr : state->set->Sub(slot);
    size_t done = hashes.ranges.size();  // a generation gone from here (rotated out, dropped) is done
    if (sub != nullptr && sub->epoch == hashes.epoch && sub->layer == hashes.layer) {
      writer.BeginFilter(*state);
      writer.BeginGeneration(slot);
      done = SendDifferingBlocks(writer, *sub->filter, hashes);
    }
    if (done < hashes.ranges.size()) {
      assert(sub != nullptr);
      const size_t before = hashes.hashes.size();
      hashes.DropFront(done, sub->filter->shape().blocks);
      leg.hashes -= before - hashes.hashes.size();
      break;
    }
    leg.hashes -= hashes.hashes.size();
    leg.rest.pop_front();
  }
  leg.kept = now;
  if (!leg.rest.empty()) {
    writer.SetResumable();
  } else if (leg.leg_cut) {
    writer.SetMore();  // the ranges past the kept hashes: the peer descends again
  }
  writer.Flush();
}

bool Node::Impl::ClockBulk(const Address& from) {
  if (bulk_clocked.empty() || bulk_clocked == from || BulkQuiet()) {
    bulk_clocked = from;
    bulk_clocked_seen = now;
    return true;
  }
  // It waits, once. When kMaxCutLegs peers wait already, it is dropped, and
  // that peer's next timed run descends again.
  if (std::find(bulk_waiting.begin(), bulk_waiting.end(), from) == bulk_waiting.end() &&
      bulk_waiting.size() < kMaxCutLegs) {
    bulk_waiting.push_back(from);
  }
  assert(bulk_waiting.size() <= kMaxCutLegs);
  return false;
}

void Node::Impl::ServeWaitingBulk() {
  if (bulk_waiting.empty() || !BulkQuiet()) return;
  const Address peer = std::move(bulk_waiting.front());
  bulk_waiting.pop_front();
  bulk_clocked = peer;
  bulk_clocked_seen = now;
  // A new descent rather than a resume: the ranges made equal meanwhile
  // (by the repair this node clocked) drop out. The roles turn, too: the
  // peer sent its contents against our block hashes; from this side's
  // level-0 summaries it sends its hashes, we send our contents, and it
  // answers with only the bits we still lack.
  StartAntiEntropy(peer, /*by_stream=*/true, /*level=*/0);
}

void Node::Impl::CatalogNews(const wire::SyncRequest& req, wire::SyncRanges& reply) const {
  // Our entries the requester lacks or holds otherwise (another incarnation
  // or epoch): equal replicas then have nothing to say at all.
  std::set<std::string> theirs;
  for (const wire::CatalogEntry& e : req.catalog()) theirs.insert(e.SerializeAsString());
  for (const auto& [name, state] : filters) {
    wire::CatalogEntry ours;
    ToWire(state->entry, state->set->epoch(), &ours);
    if (theirs.count(ours.SerializeAsString()) == 0) *reply.add_catalog() = std::move(ours);
  }
}

void Node::Impl::HandleSyncRanges(const Address& from, const wire::SyncRanges& msg) {
  std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
  std::vector<DecodedRanges> decoded;
  if (!DecodeCatalog(msg.catalog(), &catalog) || static_cast<size_t>(msg.filters_size()) > kMaxFilters) {
    Reject(from, "malformed");
    return;
  }
  size_t budget = kMaxFramePositions;
  uint64_t carried = 0;  // bits in the frame's ranges
  sync_words.clear();
  sync_changed.clear();
  for (const wire::FilterRanges& fr : msg.filters()) {
    absl::StatusOr<crdt::FilterParams> params = FromWire(fr.filter());
    if (!params.ok() || fr.epoch() > kMaxEpoch ||
        fr.generations_size() > static_cast<int>(crdt::kMaxGenerations * crdt::kMaxLayers)) {
      Reject(from, "malformed");
      return;
    }
    DecodedRanges d{*params, fr.epoch(), &fr, {}};
    for (const wire::GenerationRanges& g : fr.generations()) {
      absl::StatusOr<crdt::FilterShape> shape =
          g.layer() < crdt::kMaxLayers ? crdt::LayerShape(*params, g.layer()) : absl::InvalidArgumentError("layer");
      const uint64_t bpr = shape.ok() ? BlocksPerRange(shape->blocks) : 0;
      const uint64_t ranges = shape.ok() ? (shape->blocks + bpr - 1) / bpr : 0;
      bool ok = shape.ok() && g.epoch() <= kMaxEpoch && g.blocks_per_range() == bpr &&
                static_cast<uint64_t>(g.wanted_size()) <= ranges && static_cast<uint64_t>(g.data_size()) <= ranges;
      for (int i = 0; ok && i < g.wanted_size(); ++i) ok = g.wanted(i) < ranges;
      std::vector<std::pair<size_t, size_t>> gen_words;
      for (int i = 0; ok && i < g.data_size(); ++i) {
        uint64_t bits = 0;
        const size_t begin = sync_words.size();
        ok = DecodeRangeInto(g.data(i), *shape, &sync_words, &bits).ok() && bits <= budget;
        if (ok) {
          budget -= bits;
          carried += bits;
          gen_words.emplace_back(begin, sync_words.size());
        }
      }
      if (!ok) {
        Reject(from, "malformed");
        return;
      }
      d.words.push_back(std::move(gen_words));
    }
    decoded.push_back(std::move(d));
  }
  // Validated: apply.
  NoteExchange();
  ApplyCatalog(catalog);
  RangesWriter writer(this, from, false);
  bool answer_kept = false;  // a cut answer's rest is kept (cut_legs)
  uint64_t repaired = 0, new_bits = 0;
  struct NewBits {
    std::shared_ptr<const FilterState> state;
    uint64_t slot;
    size_t begin, end;  // in sync_changed
  };
  const auto words_of = [this](std::pair<size_t, size_t> at) {
    return std::span<const crdt::WordBits>(sync_words).subspan(at.first, at.second - at.first);
  };
  std::vector<NewBits> fresh;  // for the tree (below), until the frame turns out a bulk repair
  for (const DecodedRanges& d : decoded) {
    std::shared_ptr<const FilterState> state = MatchFilter(d.params);
    if (state == nullptr) continue;
    LearnEpoch(d.params.name, d.epoch);
    writer.BeginFilter(*state);
    for (int gi = 0; gi < d.wire->generations_size(); ++gi) {
      const wire::GenerationRanges& g = d.wire->generations(gi);
      const uint64_t slot = crdt::SlotOf(g.epoch(), g.layer());
      LearnLayers(*state, g.epoch(), g.layer() + 1);
      std::shared_ptr<const crdt::SubFilter> sub = state->set->Sub(slot);
      if (sub == nullptr) continue;  // left our window, or not reached yet
      const std::vector<std::pair<size_t, size_t>>& ranges_words = d.words[static_cast<size_t>(gi)];
      for (size_t i = 0; i < ranges_words.size(); ++i) {
        const size_t begin = sync_changed.size();
        const std::span<const crdt::WordBits> words = words_of(ranges_words[i]);
        const uint64_t n = MergeWords(*state, slot, words, &sync_changed);
        new_bits += n;
        if (n > 0) ++repaired;
        if (n > 0) fresh.push_back({state, slot, begin, sync_changed.size()});
        // A whole range that was mostly new here (a catch-up; a new bit for
        // at least every other word carried): its summary now, while it is
        // in the cache (SummaryCache::RefreshRange).
        const wire::RangeData& data = g.data(static_cast<int>(i));
        if (n > 0 && data.blocks().empty() && 2 * n >= words.size()) {
          summary_cache.RefreshRange(state->uid, slot, *sub->filter, data.range());
        }
      }
      if (msg.reply() && g.wanted_size() > 0) {
        // The requester's contents of a wanted range are merged above: send
        // back only what it lacks there (at 15,000 adds/s, replicas differ
        // in every range by bits in flight, and whole ranges went back).
        // Their data of a range scoped to some blocks scopes the answer too.
        struct Theirs {
          std::span<const crdt::WordBits> words;
          std::string_view blocks;
        };
        std::map<uint64_t, Theirs> theirs;
        const std::vector<std::pair<size_t, size_t>>& data = d.words[static_cast<size_t>(gi)];
        for (int i = 0; i < g.data_size(); ++i) theirs[g.data(i).range()] = {words_of(data[static_cast<size_t>(i)]), g.data(i).blocks()};
        const auto theirs_of = [&theirs](uint64_t range) {
          const auto it = theirs.find(range);
          return it == theirs.end() ? Theirs{} : it->second;
        };
        writer.BeginGeneration(slot);
        for (int i = 0; i < g.wanted_size(); ++i) {
          const Theirs t = theirs_of(g.wanted(i));
          if (writer.AddRange(*sub->filter, g.wanted(i), t.words, t.blocks)) continue;
          // Cut by the budget: keep the rest as their block hashes, so that
          // the requester's resume brings the rest of the answer (as our
          // blocks that differ from theirs) in one leg, where a new descent
          // takes three. (jepsen heal-under-load: the larger side's answers
          // were cut at every budget, and each descent left the node that
          // asked idle for 0.5-0.8 s.)
          // At most kMaxCutLegHashes of them: past that KeepCutLeg keeps
          // nothing, and hashing every block of a joining node's wanted
          // ranges (the whole filter) was 23% of the sender's CPU, for
          // nothing (perf, 512 MiB). Ranges past the limit go to a new
          // descent (leg_cut).
          UnansweredBlocks rest{state->entry.params, sub->epoch, sub->layer, rng.Next(), {}, {}};
          bool all_kept = true;
          const uint64_t blocks = sub->filter->shape().blocks;
          for (int j = i; j < g.wanted_size(); ++j) {  // at most kMaxCutLegHashes hashes
            if (rest.hashes.size() + BlocksInRange(blocks, g.wanted(j)) > kMaxCutLegHashes) {
              all_kept = false;
              break;
            }
            const Theirs tj = theirs_of(g.wanted(j));
            rest.ranges.push_back(g.wanted(j));
            AppendTheirBlockHashes(*sub->filter, g.wanted(j), rest.salt, tj.words, tj.blocks, &rest.hashes);
          }
          if (!rest.ranges.empty()) answer_kept |= KeepCutLeg(from, std::move(rest), /*leg_cut=*/!all_kept);
          break;
        }
      }
    }
  }
  // New bits go on down the tree, as a client's adds do: a node that lost
  // its parent syncs with the new one, and its subtree gets what it missed
  // from it. Not a bulk repair (kBulkRepairBits; a healed partition): every
  // node repairs the other side's bits itself, and pushing them on as well
  // sent each node millions of bits it had (jepsen heal-under-load: 114 MB
  // of tree pushes from one node in 7 s, filling its stream queues).
  const bool bulk = new_bits >= kBulkRepairBits && new_bits * kContinueYield >= carried;
  if (!bulk) {
    for (const NewBits& b : fresh) {
      Buffer(*b.state, b.slot, std::span<const crdt::WordBits>(sync_changed).subspan(b.begin, b.end - b.begin));
    }
  }
  if (answer_kept) {
    writer.SetResumable();
    // Ranges past the leg this answers differ too (its block-hash leg was
    // cut): once the kept rest is served, its last frame says `more`, and
    // the peer descends again, as it would have on a cut answer.
    if (msg.more() && !msg.resumable()) cut_legs[from].leg_cut = true;
  }
  writer.Flush();
  // The sender's budget ran out: go on at once, if this leg was worth it
  // (kContinueYield). The receiver of the bulk clocks it: the next budget's
  // worth comes once this one is merged, so a big repair goes as fast
  // as this node digests it, and never piles up in a queue.
  const bool left_to_the_kept_answer = answer_kept && !msg.resumable();
  const bool bulk_frame = carried >= kBulkRepairBits;
  if (bulk_frame && from == bulk_clocked) bulk_clocked_seen = now;
  const bool worth_more = carried > 0 && (new_bits + writer.bits()) * kContinueYield >= carried;
  if (msg.reply() && !msg.more() && bulk_frame && worth_more && bulk_requested_early != from && ClockBulk(from)) {
    // Pipelined: a bulk content leg goes in many frames (a 4 GiB filter's
    // range fills one), and the sender seals them all before the first
    // leaves. Asking for the next leg at its first frame rather than its
    // last has the sender encode that one while this node merges the rest:
    // a joining node's 512 MiB took 7.0 s with the two sides taking turns
    // (the sender encoding 0.7 s per 16 MiB leg, this node merging 0.45 s).
    // The sender starts the next leg where this one was cut
    // (ae_resume_range), so only the last leg's ranges, still unmerged here
    // when asked, go twice. At most two legs are in flight: the next early
    // request waits for the next leg's first frame, and this leg's last
    // frame (`more`) asks for nothing.
    Stats([](NodeCounters& s) { ++s.anti_entropy_continued; });
    bulk_requested_early = from;
    StartAntiEntropy(from, /*by_stream=*/true, /*level=*/0);
  } else if (msg.more() && bulk_requested_early == from) {
    bulk_requested_early.clear();  // asked for already, at the leg's first frame
  } else if (msg.more() && !left_to_the_kept_answer && worth_more && (!bulk_frame || ClockBulk(from))) {
    Stats([](NodeCounters& s) { ++s.anti_entropy_continued; });
    if (msg.resumable()) {
      // The sender kept the rest of the leg (cut_legs): it goes on from
      // where it was cut, one leg where a new descent takes three.
      wire::Envelope resume;
      resume.mutable_sync_request()->set_resume(true);
      Send(from, resume, true);
    } else {
      // A new exchange, by stream: the replicas are known to differ, and a
      // lost datagram would stop the repair until the next timed run. From
      // the range summaries (8 KiB a generation of 1024 ranges): under a big
      // repair nearly every range differs, and the digest and group legs
      // only cost two round trips (each ~0.1 s under the heal-under-load
      // overload).
      StartAntiEntropy(from, /*by_stream=*/true, /*level=*/0);
    }
  }
  if (repaired > 0) {
    Stats([&](NodeCounters& s) { s.ranges_repaired += repaired; });
    Emit(Event::Kind::kAntiEntropyRepaired, from,
         absl::StrCat("(", new_bits, " new bits of ", carried, msg.reply() ? " in a first content leg)" : " in an answer)"),
         repaired);
  }
}

}  // namespace pollen::node
