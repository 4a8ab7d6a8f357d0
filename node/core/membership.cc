// Membership: see membership.h for what it promises.
//
// Design notes:
//  - The member table is a join-semilattice per member: the kept value is the
//    largest (incarnation, rank(state)), rank alive < suspect < dead < left.
//    Piggybacked updates and full-state merges both go through Apply(), so any
//    two nodes that saw the same set of updates hold the same table.
//  - A healed partition: each side holds the other as dead at incarnation i.
//    Every dead_reconnect_interval a node sends a join (its full state) to a
//    random dead member. The receiver merges it (remote "dead" taken as
//    "suspect"), learns it is held dead and refutes at i+1, and answers with
//    its own full state, which already carries that refutation; the joiner
//    likewise refutes. Refutations and the suspicions of the other side's
//    members then spread by piggyback and push/pull until every member on both
//    sides is alive at a higher incarnation everywhere.
//  - Refutations race suspicion timeouts. Piggyback alone (each update sent
//    ceil(3*log10(N+1))+1 times) left about 1% of observers without the
//    refutation in time at 10% loss, i.e. false deaths. So accusations also
//    go straight to the accused (at once, then every probe_interval while
//    suspected), and the accused answers every accuser directly. Measured in
//    the in-test pump (10 members, 20 seeds x 300 s): false deaths went from
//    22 to 0 at 10% loss, and 0 at 20% loss (30 members, 10% loss: 0).
#include "node/core/membership.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "crdt/keyed_hash.h"

namespace pollen::node {

namespace {

int Rank(MemberState s) { return static_cast<int>(s); }  // kAlive < kSuspect < kDead < kLeft

MemberState FromWire(wire::MemberStatus s) {
  switch (s) {
    case wire::MEMBER_STATUS_SUSPECT:
      return MemberState::kSuspect;
    case wire::MEMBER_STATUS_DEAD:
      return MemberState::kDead;
    case wire::MEMBER_STATUS_LEFT:
      return MemberState::kLeft;
    default:
      return MemberState::kAlive;
  }
}

wire::MemberStatus ToWire(MemberState s) {
  switch (s) {
    case MemberState::kSuspect:
      return wire::MEMBER_STATUS_SUSPECT;
    case MemberState::kDead:
      return wire::MEMBER_STATUS_DEAD;
    case MemberState::kLeft:
      return wire::MEMBER_STATUS_LEFT;
    case MemberState::kAlive:
      break;
  }
  return wire::MEMBER_STATUS_ALIVE;
}

bool Supersedes(uint64_t inc, MemberState state, uint64_t cur_inc, MemberState cur_state) {
  return inc > cur_inc || (inc == cur_inc && Rank(state) > Rank(cur_state));
}

// Appends `slot`, growing the capacity by an eighth (not doubling) and never
// past `limit`. live_ and probe_order_ hold one slot per member in every
// node: at N=10,000 doubling left them 16,384 long for ~10,000 used, up to
// ~48 KB per node. pollen-sim's N=10,000 cold start peaked at 8.27 GiB
// before and 7.94 GiB after (simulation/README.md, "Cold-start memory").
// Each slot is copied about eight times on the way up, which no profile shows.
void AppendSlim(std::vector<MemberSlot>& v, MemberSlot slot, size_t limit) {
  if (v.size() == v.capacity()) v.reserve(std::max(v.size() + 1, std::min(limit, v.capacity() + v.capacity() / 8 + 16)));
  v.push_back(slot);
}

std::unique_ptr<MemberTable> MakeTable(const MembershipConfig& config) {
  std::shared_ptr<NamePool> names = config.names != nullptr ? config.names : std::make_shared<NamePool>();
  std::shared_ptr<NamePool> addresses = config.addresses != nullptr ? config.addresses : names;
  return std::make_unique<MemberTable>(std::move(names), std::move(addresses));
}

}  // namespace

Membership::Membership(MembershipConfig config, uint64_t rng_seed)
    : config_(std::move(config)),
      rng_(rng_seed),
      members_(MakeTable(config_)) {
  assert(!config_.self_name.empty() && config_.self_name.size() <= kMaxNameBytes);
  assert(!config_.self_address.empty() && config_.self_address.size() <= kMaxAddressBytes);
  assert(config_.probe_interval > Duration::zero());
  assert(config_.probe_timeout > Duration::zero() && config_.probe_timeout < config_.probe_interval);
  assert(config_.gossip_interval > Duration::zero());
  assert(config_.dead_reconnect_interval > Duration::zero());
  assert(config_.max_members >= 1);
  assert(config_.suspicion_multiplier > 0);
  assert(config_.max_health_multiplier >= 1);
  assert(config_.suspicion_max_multiplier >= 1.0);
  config_.max_piggyback = std::min(config_.max_piggyback, kMaxPiggybackWire);
  for (const Address& seed : config_.seeds) {
    if (seeds_.size() >= kMaxSeeds) break;
    if (seed.empty() || seed == config_.self_address) continue;
    if (std::find(seeds_.begin(), seeds_.end(), seed) != seeds_.end()) continue;
    seeds_.push_back(seed);
  }
  // Any start will do (acks are matched to probes this node sent); a small
  // one keeps the varint short. The same draw either way.
  next_seq_ = rng_.Next();
  if (config_.features & kMemberFeatureCompactFrames) next_seq_ >>= 43;
}

// ---------------------------------------------------------------- lifecycle

void Membership::Start(Time now) {
  if (started_) return;
  started_ = true;
  if (config_.warm_members != nullptr) {
    WarmStart(*config_.warm_members, now);
    config_.warm_members.reset();
    joined_ = true;
  } else {
    EnqueueSelf();
    if (seeds_.empty()) {
      joined_ = true;
    } else {
      for (const Address& seed : seeds_) SendJoin(seed);
      next_join_ = now + config_.probe_interval;
    }
  }
  // A random phase so that nodes started together do not probe in lockstep.
  next_probe_ = now + Duration(static_cast<int64_t>(rng_.Below(config_.probe_interval.count()))) + Duration(1);
  next_gossip_ = now + config_.gossip_interval;
  // Random phases for the long periods too: nodes started together must not
  // all push/pull or reconnect in the same instant. (PushPullScale() is 1
  // here unless the start was warm.)
  if (config_.push_pull_every > 0) {
    const Duration period = config_.probe_interval * config_.push_pull_every * PushPullScale();
    next_push_pull_ = now + Duration(static_cast<int64_t>(rng_.Below(period.count()))) + Duration(1);
  }
  next_reconnect_ =
      now + Duration(static_cast<int64_t>(rng_.Below(config_.dead_reconnect_interval.count()))) + Duration(1);
}

void Membership::Leave(Time now) {
  if (left_) return;
  left_ = true;
  if (incarnation_ < std::numeric_limits<uint64_t>::max()) ++incarnation_;
  EnqueueSelf();
  for (const std::string& name : RandomMembers(kMaxLeaveFanout, nullptr, /*alive_only=*/false)) {
    OutMessage msg = NewMessage();
    msg->mutable_gossip();
    SendMsg(AddressOf(*FindMember(name)), std::move(msg), name);
  }
  probe_.reset();
  next_probe_ = next_push_pull_ = next_reconnect_ = next_join_ = Time::max();
  // Gossip continues, so the leave keeps spreading while the owner lingers.
}

// ---------------------------------------------------------------- queries

std::vector<MemberInfo> Membership::Members() const {
  std::vector<MemberInfo> out;
  out.reserve(members_->size() + 1);
  MemberInfo self{config_.self_name, config_.self_address, left_ ? MemberState::kLeft : MemberState::kAlive,
                  incarnation_, Time{0}};
  bool self_done = false;
  for (MemberSlot slot : members_->SortedByName()) {
    const Member& m = members_->at(slot);
    if (!self_done && config_.self_name < NameOf(m)) {
      out.push_back(self);
      self_done = true;
    }
    out.push_back(InfoOf(m));
  }
  if (!self_done) out.push_back(self);
  return out;
}

std::optional<MemberInfo> Membership::Find(const std::string& name) const {
  if (name == config_.self_name) {
    return MemberInfo{name, config_.self_address, left_ ? MemberState::kLeft : MemberState::kAlive, incarnation_,
                      Time{0}};
  }
  const Member* m = FindMember(name);
  if (m == nullptr) return std::nullopt;
  return InfoOf(*m);
}

// Node asks this for every replication frame it receives; Find's MemberInfo
// copy (two strings) made that 5% of pollen-sim N=100 CPU (perf, 2026-11-21).
bool Membership::Knows(const std::string& name) const {
  return name == config_.self_name || members_->Find(name) != kNoSlot;
}

std::vector<Address> Membership::LivePeers() const {
  std::vector<Address> out;
  members_->ForEach([&](const Member& m) {
    if (IsLive(m)) out.push_back(AddressOf(m));
  });
  std::sort(out.begin(), out.end());
  return out;
}

size_t Membership::LiveCount() const { return live_.size() + (left_ ? 0 : 1); }

const Address& Membership::LivePeerAddress(size_t position) const {
  assert(position < live_.size());
  return AddressOf(members_->at(live_[position]));
}

const std::string& Membership::LivePeerName(size_t position) const {
  assert(position < live_.size());
  return NameOf(members_->at(live_[position]));
}

const std::string* Membership::SmallestLivePeer() const {
  if (smallest_live_stale_) {
    smallest_live_stale_ = false;
    smallest_live_ = kNoSlot;
    for (MemberSlot slot : live_) {
      if (smallest_live_ == kNoSlot || NameOf(members_->at(slot)) < NameOf(members_->at(smallest_live_))) {
        smallest_live_ = slot;
      }
    }
  }
  return smallest_live_ == kNoSlot ? nullptr : &NameOf(members_->at(smallest_live_));
}

const Address* Membership::LiveAddressOf(const std::string& name) const {
  const Member* m = FindMember(name);
  return m == nullptr || !IsLive(*m) ? nullptr : &AddressOf(*m);
}

bool Membership::IsAlive(const std::string& name) const {
  const Member* m = FindMember(name);
  return m != nullptr && m->state == MemberState::kAlive;
}

Duration Membership::SuspicionTimeout() const {
  const double n = static_cast<double>(std::max<size_t>(LiveCount(), 1));
  const double scale = config_.suspicion_multiplier * std::log10(n + 1.0);
  return Duration(static_cast<int64_t>(scale * static_cast<double>(config_.probe_interval.count())));
}

size_t Membership::ExpectedConfirmations() const {
  if (!config_.lifeguard) return 0;
  const double k = std::floor(config_.suspicion_multiplier) - 2.0;
  if (k < 1.0 || static_cast<double>(LiveCount()) < k + 2.0) return 0;  // too few to confirm
  return static_cast<size_t>(k);
}

Duration Membership::SuspicionTimeoutAfter(size_t confirmations) const {
  const Duration min = SuspicionTimeout();
  const size_t k = ExpectedConfirmations();
  if (k == 0 || confirmations >= k) return min;
  const double max = static_cast<double>(min.count()) * config_.suspicion_max_multiplier;
  const double fraction = std::log(static_cast<double>(confirmations) + 1.0) / std::log(static_cast<double>(k) + 1.0);
  const double timeout = max - fraction * (max - static_cast<double>(min.count()));
  return std::max(min, Duration(static_cast<int64_t>(timeout)));
}

void Membership::AdjustHealth(int delta) {
  if (!config_.lifeguard) return;
  const int64_t top = static_cast<int64_t>(config_.max_health_multiplier) - 1;
  health_score_ = static_cast<uint32_t>(std::clamp<int64_t>(int64_t{health_score_} + delta, 0, top));
}

uint32_t Membership::PushPullScale() const {
  constexpr double kThreshold = 32;
  const double n = static_cast<double>(LiveCount());
  if (n <= kThreshold) return 1;
  return static_cast<uint32_t>(std::ceil(std::log2(n / kThreshold))) + 1;
}

uint32_t Membership::RetransmitLimit() const {
  const double n = static_cast<double>(LiveCount());
  return static_cast<uint32_t>(std::ceil(3.0 * std::log10(n + 1.0))) + 1;
}

Time Membership::NextWakeup() const {
  Time t = std::min({next_probe_, next_gossip_, next_push_pull_, next_reconnect_});
  if (!joined_) t = std::min(t, next_join_);
  if (probe_ && !probe_->acked && !probe_->indirect_sent) t = std::min(t, probe_->started + probe_->timeout);
  if (!suspicions_.empty()) t = std::min(t, suspicions_.begin()->first);
  for (const auto& [seq, relay] : relays_) t = std::min(t, relay.nack_done ? relay.deadline : relay.nack_at);
  return t;
}

std::vector<Membership::Send> Membership::TakeOutgoing() { return std::exchange(outgoing_, {}); }
std::vector<Event> Membership::TakeEvents() { return std::exchange(events_, {}); }

// ---------------------------------------------------------------- validation

void Membership::Reject(const std::string& reason) { ++rejected_[reason]; }

bool Membership::ValidName(const std::string& name) { return !name.empty() && name.size() <= kMaxNameBytes; }

bool Membership::ValidUpdate(const wire::MemberUpdate& u) {
  if (!ValidName(u.name())) {
    Reject("name");
    return false;
  }
  if (u.address().empty() || u.address().size() > kMaxAddressBytes) {
    Reject("address");
    return false;
  }
  if (!wire::MemberStatus_IsValid(u.status())) {
    Reject("status");
    return false;
  }
  if (u.accuser().size() > kMaxNameBytes) {
    Reject("name");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- table

MemberInfo Membership::InfoOf(const Member& m) const {
  std::optional<Duration> rtt;
  if (m.probe_rtt_us >= 0) rtt = std::chrono::microseconds(m.probe_rtt_us);
  return MemberInfo{NameOf(m), AddressOf(m), m.state, m.incarnation, m.last_change, rtt};
}

// Written in place: building a temporary and copying it in allocated every
// string twice, per piggybacked update.
void Membership::WriteUpdate(const Member& m, wire::MemberUpdate* out) const {
  wire::MemberUpdate& u = *out;
  u.set_name(NameOf(m));
  u.set_address(AddressOf(m));
  u.set_incarnation(m.incarnation);
  u.set_status(ToWire(m.state));
  if (m.takes_compact) u.set_features(kMemberFeatureCompactFrames);
  if (m.state == MemberState::kSuspect && !SuspicionOf(m).accusers.empty()) {
    u.set_accuser(SuspicionOf(m).accusers.back());  // the newest: its confirmation spreads
  }
}

namespace {

// One member's share of the table digest: SipHash-2-4 under the zero key of
// name || 0 || address || incarnation (8 bytes LE) || status (1 byte). The
// digest only tells equal tables from different ones among members who
// already share the cluster secret; it needs no key.
uint64_t EntryDigest(std::string_view name, std::string_view address, uint64_t incarnation, wire::MemberStatus status) {
  std::array<char, Membership::kMaxNameBytes + 1 + Membership::kMaxAddressBytes + 9> buf;
  assert(name.size() <= Membership::kMaxNameBytes && address.size() <= Membership::kMaxAddressBytes);
  size_t n = 0;
  std::copy(name.begin(), name.end(), buf.begin());
  n += name.size();
  buf[n++] = 0;
  std::copy(address.begin(), address.end(), buf.begin() + n);
  n += address.size();
  for (int i = 0; i < 8; ++i) buf[n++] = static_cast<char>(incarnation >> (8 * i));
  buf[n++] = static_cast<char>(status);
  static constexpr crdt::SipKey kZeroKey{};
  return crdt::SipHash24(kZeroKey, std::string_view(buf.data(), n));
}

}  // namespace

uint64_t Membership::DigestOf(const Member& m) const {
  return EntryDigest(NameOf(m), AddressOf(m), m.incarnation, ToWire(m.state));
}

// A sum, so it is kept as entries change (others_digest_: minus an entry's
// digest before a change, plus after) rather than recomputed over the table
// for each push/pull summary: at N=10,000 the recomputation was ~5% of
// pollen-sim's CPU in a cold start (perf; simulation/README.md).
uint64_t Membership::TableDigest() const {
  const uint64_t digest = EntryDigest(config_.self_name, config_.self_address, incarnation_,
                                      left_ ? wire::MEMBER_STATUS_LEFT : wire::MEMBER_STATUS_ALIVE) +
                          others_digest_;
#ifndef NDEBUG
  uint64_t recomputed = 0;
  members_->ForEach([&](const Member& m) { recomputed += DigestOf(m); });
  assert(recomputed == others_digest_);
#endif
  return digest;
}

void Membership::WriteSelfUpdate(wire::MemberUpdate* u) const {
  u->set_name(config_.self_name);
  u->set_address(config_.self_address);
  u->set_incarnation(incarnation_);
  u->set_status(left_ ? wire::MEMBER_STATUS_LEFT : wire::MEMBER_STATUS_ALIVE);
  u->set_features(config_.features);
}

void Membership::Dequeue(MemberSlot slot, uint32_t* key) {
  if (*key == 0) return;
  const size_t erased = queue_.erase(QueueEntry(*key, slot));
  assert(erased == 1);
  (void)erased;
  *key = 0;
}

void Membership::Enqueue(MemberSlot slot, uint32_t* key) {
  Dequeue(slot, key);
  if (queue_order_ == kQueueOrderMask) RenumberQueue();
  // Newest first among equally transmitted updates: the order counts down.
  assert(queue_order_ < kQueueOrderMask);
  *key = kQueueOrderMask - static_cast<uint32_t>(queue_order_++);  // transmits 0; never 0 itself
  queue_.insert(QueueEntry(*key, slot));
}

void Membership::RenumberQueue() {
  std::vector<uint64_t> entries(queue_.begin(), queue_.end());
  // Oldest first: the larger the order part, the older.
  std::sort(entries.begin(), entries.end(), [](uint64_t a, uint64_t b) {
    return (KeyOf(a) & kQueueOrderMask) > (KeyOf(b) & kQueueOrderMask);
  });
  queue_.clear();
  uint32_t order = 0;
  for (const uint64_t e : entries) {
    const uint32_t key = (KeyOf(e) & ~kQueueOrderMask) | (kQueueOrderMask - order++);
    *HeldKey(SlotOf(e)) = key;
    queue_.insert(QueueEntry(key, SlotOf(e)));
  }
  queue_order_ = order;
}

void Membership::TrackLive(Member& m) {
  const bool listed = m.live_pos != Member::kNotLive;
  if (IsLive(m) == listed) return;
  if (!listed) {
    m.live_pos = static_cast<uint32_t>(live_.size());
    AppendSlim(live_, m.slot, config_.max_members);
    if (!smallest_live_stale_ && (smallest_live_ == kNoSlot || NameOf(m) < NameOf(members_->at(smallest_live_)))) {
      smallest_live_ = m.slot;
    }
    return;
  }
  assert(live_[m.live_pos] == m.slot);
  const MemberSlot last = live_.back();
  live_[m.live_pos] = last;
  members_->at(last).live_pos = m.live_pos;
  live_.pop_back();
  m.live_pos = Member::kNotLive;
  if (m.slot == smallest_live_) smallest_live_stale_ = true;
}

void Membership::Emit(Event::Kind kind, const Member& m) {
  events_.push_back(Event{kind, NameOf(m), AddressOf(m), m.incarnation});
}

void Membership::SetState(Member& m, MemberState state, uint64_t incarnation, Time now, const std::string& accuser) {
  const std::string& name = NameOf(m);
  const MemberState old = m.state;
  const uint64_t old_inc = m.incarnation;
  if (old == MemberState::kSuspect) suspicions_.erase({SuspicionOf(m).deadline, name});
  others_digest_ -= DigestOf(m);
  m.state = state;
  m.incarnation = incarnation;
  others_digest_ += DigestOf(m);
  m.last_change = now;
  ++view_version_;
  if (old == MemberState::kDead) --dead_count_;
  if (state == MemberState::kDead) ++dead_count_;
  TrackLive(m);
  if (state == MemberState::kSuspect) {
    // A fresh suspicion (or one at a newer incarnation) restarts the timer.
    if (old != MemberState::kSuspect || old_inc != incarnation) {
      MemberSuspicion& fresh = suspects_[m.slot];
      fresh = MemberSuspicion{};
      fresh.since = now;
      if (!accuser.empty()) fresh.accusers.push_back(accuser);
      fresh.deadline = now + SuspicionTimeoutAfter(0);
    }
    suspicions_.insert({SuspicionOf(m).deadline, name});
  } else {
    suspects_.erase(m.slot);
  }
  if (old != state && (state == MemberState::kSuspect || state == MemberState::kDead) && started_ && !left_) {
    notify_.push_back(name);  // tell the accused at once (sent after this update is applied)
  }
  if (old != state) {
    switch (state) {
      case MemberState::kAlive:
        Emit(Event::Kind::kMemberAlive, m);
        break;
      case MemberState::kSuspect:
        Emit(Event::Kind::kMemberSuspect, m);
        break;
      case MemberState::kDead:
        Emit(Event::Kind::kMemberDead, m);
        break;
      case MemberState::kLeft:
        Emit(Event::Kind::kMemberLeft, m);
        break;
    }
  }
  Enqueue(m);
}

bool Membership::MakeRoom() {
  // The oldest change, ties to the smallest name: one pass, no sort.
  const Member* oldest = nullptr;
  for (MemberState wanted : {MemberState::kLeft, MemberState::kDead}) {
    members_->ForEach([&](const Member& m) {
      if (m.state != wanted) return;
      if (oldest == nullptr || m.last_change < oldest->last_change ||
          (m.last_change == oldest->last_change && NameOf(m) < NameOf(*oldest))) {
        oldest = &m;
      }
    });
    if (oldest != nullptr) break;
  }
  if (oldest == nullptr) return false;
  Member* victim = &members_->at(oldest->slot);
  Dequeue(victim->slot, &victim->queue_key);
  std::replace(probe_order_.begin(), probe_order_.end(), victim->slot, kNoSlot);  // the slot may be reused
  assert(victim->live_pos == Member::kNotLive);
  ++view_version_;
  if (victim->state == MemberState::kDead) --dead_count_;
  others_digest_ -= DigestOf(*victim);
  assert(!suspects_.contains(victim->slot));
  members_->Erase(victim->slot);  // dead or left: not live, not in suspicions_
  return true;
}

void Membership::Confirm(Member& m, const std::string& accuser, Time now) {
  assert(m.state == MemberState::kSuspect);
  const std::string& name = NameOf(m);
  const size_t k = ExpectedConfirmations();
  MemberSuspicion& suspicion = SuspicionOf(m);
  std::vector<std::string>& accusers = suspicion.accusers;
  if (k == 0 || accuser.empty() || accuser == name || accusers.size() >= k + 1) return;
  if (std::find(accusers.begin(), accusers.end(), accuser) != accusers.end()) return;
  accusers.push_back(accuser);
  const size_t confirmations = accusers.size() - 1;  // the first accuser raised it
  const Time deadline = std::max(now, suspicion.since + SuspicionTimeoutAfter(confirmations));
  if (deadline < suspicion.deadline) {
    suspicions_.erase({suspicion.deadline, name});
    suspicion.deadline = deadline;
    suspicions_.insert({deadline, name});
  }
  Enqueue(m);  // carries this accuser: the confirmation reaches the others
}

void Membership::Refute(uint64_t accused_incarnation, Time now) {
  if (left_) return;
  const uint64_t base = std::max(incarnation_, accused_incarnation);
  if (base == std::numeric_limits<uint64_t>::max()) return;  // cannot go higher
  incarnation_ = base + 1;
  EnqueueSelf();
}

bool Membership::Apply(const wire::MemberUpdate& u, bool from_full_state, Time now) {
  const std::string& name = u.name();
  MemberState state = FromWire(u.status());
  if (name == config_.self_name) {
    // Someone holds an older or contrary view of this node: refute it.
    if (state != MemberState::kAlive ? u.incarnation() >= incarnation_ : u.incarnation() > incarnation_) {
      if (state != MemberState::kAlive) AdjustHealth(1);  // accused: perhaps this node is the slow one
      Refute(u.incarnation(), now);
    }
    // The sender believes an accusation (or, after a leave, anything but the
    // leave): it hears this node's current state directly (see Handle).
    if (left_ ? !(state == MemberState::kLeft && u.incarnation() == incarnation_) : state != MemberState::kAlive) {
      tell_sender_self_ = true;
    }
    return false;
  }
  if (from_full_state && state == MemberState::kDead) state = MemberState::kSuspect;
  Member* known = FindMember(name);
  if (known == nullptr) {
    if (members_->size() + 1 >= config_.max_members && !MakeRoom()) {
      Reject("table_full");
      return false;
    }
    Member& m = members_->Insert(name, u.address());
    m.takes_compact = (u.features() & kMemberFeatureCompactFrames) != 0;
    m.incarnation = u.incarnation();
    m.last_change = now;
    m.state = state;
    others_digest_ += DigestOf(m);
    if (state == MemberState::kSuspect) {
      assert(!suspects_.contains(m.slot));  // a reused slot's suspicion went with its last member
      MemberSuspicion& fresh = suspects_[m.slot];
      fresh.since = now;
      if (!u.accuser().empty()) fresh.accusers.push_back(u.accuser());
      fresh.deadline = now + SuspicionTimeoutAfter(0);
      suspicions_.insert({fresh.deadline, name});
    }
    if (IsLive(m) && probe_order_.size() < 2 * config_.max_members) {
      // Probe newcomers soon: a random place in the rest of this round. The
      // one there moves to the end (a vector insert was O(N) per newcomer).
      probe_index_ = std::min(probe_index_, probe_order_.size());
      const size_t pos = probe_index_ + rng_.Below(probe_order_.size() - probe_index_ + 1);
      AppendSlim(probe_order_, m.slot, 2 * config_.max_members);
      std::swap(probe_order_[pos], probe_order_.back());
    }
    ++view_version_;
    if (m.state == MemberState::kDead) ++dead_count_;
    TrackLive(m);
    if (IsLive(m)) Emit(Event::Kind::kMemberJoined, m);
    Enqueue(m);
    return true;
  }
  Member& m = *known;
  if (!Supersedes(u.incarnation(), state, m.incarnation, m.state)) {
    if (state == MemberState::kSuspect && m.state == MemberState::kSuspect && u.incarnation() == m.incarnation) {
      Confirm(m, u.accuser(), now);
    }
    return false;
  }
  if (u.incarnation() > m.incarnation) {  // a new life: where it listens and what it takes
    others_digest_ -= DigestOf(m);
    members_->SetAddress(m, u.address());
    others_digest_ += DigestOf(m);
    m.takes_compact = (u.features() & kMemberFeatureCompactFrames) != 0;
  }
  SetState(m, state, u.incarnation(), now, u.accuser());
  return true;
}

void Membership::TakeWord(const std::string& sender, uint32_t features) {
  if (Member* m = FindMember(sender); m != nullptr) m->takes_compact = (features & kMemberFeatureCompactFrames) != 0;
}

void Membership::TakeOwnWord(const std::string& sender, const wire::MemberUpdate& u) {
  if (u.name() == sender) TakeWord(sender, u.features());
}

// ---------------------------------------------------------------- sending

OutMessage Membership::NewMessage() const {
  OutMessage msg;
  msg->set_sender(config_.self_name);
  msg->set_features(config_.features);  // the owner drops both from a compact message
  return msg;
}

void Membership::FillFullState(wire::MemberPushPull* pp) const {
  WriteSelfUpdate(pp->add_members());
  // In slot order: deterministic, and no O(N log N) sort of names per
  // push/pull (at N=10,000 that sort was 11% of pollen-sim's steady state).
  members_->ForEach([&](const Member& m) { WriteUpdate(m, pp->add_members()); });
}

void Membership::SendMsg(const Address& to, OutMessage msg, const std::string& peer_name, bool reliable) {
  const Member* peer = peer_name.empty() ? nullptr : FindMember(peer_name);
  if (!reply_peer_.empty() && peer_name == reply_peer_) replied_to_sender_ = true;
  if (tell_sender_self_ && peer_name == reply_peer_) {
    // This peer holds a wrong view of this node: its current state goes first
    // (for a push/pull it is already in the list).
    tell_sender_self_ = false;
    if (!msg->has_push_pull()) {
      WriteSelfUpdate(msg->add_updates());
    }
  }
  if (!msg->has_push_pull()) {
    std::vector<std::string> included;
    if (msg->updates_size() > 0) included.push_back(config_.self_name);
    // A peer held as suspect, dead or left hears that first, so it can refute.
    if (peer != nullptr && peer->state != MemberState::kAlive) {
      WriteUpdate(*peer, msg->add_updates());
      included.push_back(peer_name);
    }
    const uint32_t limit = RetransmitLimit();
    assert(limit <= kMaxTransmits);  // transmits fit the key's top bits
    // The taken entries' keys, re-keyed below (transmits + 1) once the walk
    // is over: the B-tree's iterators do not survive an insert.
    std::array<uint64_t, kMaxPiggybackWire> taken;
    size_t n_taken = 0;
    size_t bytes = msg->ByteSizeLong();
    // Entries passed over for being too big for what is left of the budget:
    // a few, for smaller ones behind them, but the queue is never walked.
    constexpr size_t kMaxOversizeSkips = 8;
    size_t skipped = 0;
    for (auto it = queue_.begin(); it != queue_.end() && n_taken < taken.size() &&
                                   static_cast<size_t>(msg->updates_size()) < config_.max_piggyback;
         ++it) {
      const MemberSlot slot = SlotOf(*it);
      const std::string& name = slot == kSelfSlot ? config_.self_name : NameOf(members_->at(slot));
      if (std::find(included.begin(), included.end(), name) != included.end()) continue;
      wire::MemberUpdate* update = msg->add_updates();
      if (slot == kSelfSlot) {
        WriteSelfUpdate(update);
      } else {
        WriteUpdate(members_->at(slot), update);
      }
      const size_t wire_bytes = update->ByteSizeLong() + 3;  // + tag, length (< 2^14)
      if (n_taken > 0 && bytes + wire_bytes > config_.max_piggyback_bytes) {
        msg->mutable_updates()->RemoveLast();
        if (++skipped > kMaxOversizeSkips) break;
        continue;
      }
      bytes += wire_bytes;
      taken[n_taken++] = *it;
    }
    for (size_t i = 0; i < n_taken; ++i) {
      const uint32_t key = KeyOf(taken[i]);
      const MemberSlot slot = SlotOf(taken[i]);
      uint32_t* held = HeldKey(slot);
      assert(*held == key);
      queue_.erase(taken[i]);
      const uint32_t transmits = (key >> kQueueOrderBits) + 1;
      *held = transmits >= limit ? 0 : (transmits << kQueueOrderBits) | (key & kQueueOrderMask);
      if (*held != 0) queue_.insert(QueueEntry(*held, slot));
    }
  }
  const bool compact =
      (config_.features & kMemberFeatureCompactFrames) != 0 && !reliable && peer != nullptr && peer->takes_compact;
  outgoing_.push_back(Send{to, std::move(msg), reliable, compact});
}

void Membership::SendJoin(const Address& to) {
  OutMessage msg = NewMessage();
  auto* pp = msg->mutable_push_pull();
  pp->set_join(true);
  FillFullState(pp);
  SendMsg(to, std::move(msg), "");
}

std::vector<std::string> Membership::RandomMembers(size_t k, const std::string* exclude, bool alive_only) {
  const auto eligible = [&](const Member& m) {
    return (!alive_only || m.state == MemberState::kAlive) && (exclude == nullptr || NameOf(m) != *exclude);
  };
  std::vector<const Member*> picked;
  if (!alive_only && exclude == nullptr) {
    for (size_t i : PickDistinct(rng_, live_.size(), k)) picked.push_back(&members_->at(live_[i]));
  } else {
    // Draw from live_ and skip the ineligible: uniform over the eligible ones.
    // A bounded number of draws; if they come up short (most members suspect,
    // or k near their count) the exact way: collect all, then pick.
    const size_t max_draws = live_.size() > 4 * k ? 4 * k + 16 : 0;
    for (size_t draw = 0; draw < max_draws && picked.size() < k; ++draw) {
      const Member* m = &members_->at(live_[rng_.Below(live_.size())]);
      if (eligible(*m) && std::find(picked.begin(), picked.end(), m) == picked.end()) picked.push_back(m);
    }
    if (picked.size() < k) {
      std::vector<const Member*> candidates;
      for (MemberSlot slot : live_) {
        const Member* m = &members_->at(slot);
        if (eligible(*m)) candidates.push_back(m);
      }
      picked.clear();
      for (size_t i : PickDistinct(rng_, candidates.size(), k)) picked.push_back(candidates[i]);
    }
  }
  std::vector<std::string> out;
  out.reserve(picked.size());
  for (const Member* m : picked) out.push_back(NameOf(*m));
  return out;
}

// ---------------------------------------------------------------- receiving

void Membership::Handle(const Address& from, const std::string& sender, const wire::MembershipMessage& msg,
                        Time now) {
  if (!ValidName(sender)) return Reject("name");
  if (sender == config_.self_name) return Reject("self");
  if (static_cast<size_t>(msg.updates_size()) > kMaxPiggybackWire) return Reject("too_many_updates");
  for (const auto& u : msg.updates()) {
    if (!ValidUpdate(u)) return;
  }
  switch (msg.body_case()) {
    case wire::MembershipMessage::kPing:
      if (msg.ping().target().size() > kMaxNameBytes) return Reject("name");
      break;
    case wire::MembershipMessage::kPingReq:
      if (!ValidName(msg.ping_req().target())) return Reject("name");
      if (msg.ping_req().target_address().empty() || msg.ping_req().target_address().size() > kMaxAddressBytes) {
        return Reject("address");
      }
      break;
    case wire::MembershipMessage::kPushPull:
      if (static_cast<size_t>(msg.push_pull().members_size()) > config_.max_members) {
        return Reject("too_many_updates");
      }
      if (msg.push_pull().summary() && (msg.push_pull().members_size() > 0 || msg.push_pull().join() ||
                                        msg.push_pull().reply())) {
        return Reject("summary");  // a summary carries its digest and nothing else
      }
      for (const auto& u : msg.push_pull().members()) {
        if (!ValidUpdate(u)) return;
      }
      break;
    case wire::MembershipMessage::kAck:
    case wire::MembershipMessage::kNack:
    case wire::MembershipMessage::kGossip:
      break;
    case wire::MembershipMessage::BODY_NOT_SET:
      return Reject("no_body");
  }

  // The sender's word on what it takes, before any answer goes: a compact
  // message (no sender inside) implies compact frames.
  TakeWord(sender, msg.sender().empty() ? kMemberFeatureCompactFrames : msg.features());
  tell_sender_self_ = false;
  for (const auto& u : msg.updates()) {
    Apply(u, /*from_full_state=*/false, now);
    TakeOwnWord(sender, u);
  }
  reply_peer_ = sender;
  replied_to_sender_ = false;
  switch (msg.body_case()) {
    case wire::MembershipMessage::kPing:
      HandlePing(from, sender, msg.ping());
      break;
    case wire::MembershipMessage::kAck:
      HandleAck(sender, msg.ack(), now);
      break;
    case wire::MembershipMessage::kNack:
      HandleNack(sender, msg.nack());
      break;
    case wire::MembershipMessage::kPingReq:
      HandlePingReq(from, sender, msg.ping_req(), now);
      break;
    case wire::MembershipMessage::kPushPull:
      HandlePushPull(from, sender, msg.push_pull(), now);
      break;
    default:
      break;
  }
  // A sender this node holds as suspect or dead is evidently running: if no
  // reply went to it, tell it how it is held so that it refutes (or, if it
  // already has, answers with its newer state). Likewise when the sender holds
  // a wrong view of this node and no reply carried the correction.
  const Member* held = FindMember(sender);  // hashed: this runs per message
  const bool sender_accused =
      held != nullptr && (held->state == MemberState::kSuspect || held->state == MemberState::kDead);
  if (tell_sender_self_ || (sender_accused && !replied_to_sender_)) {  // SendMsg clears tell_sender_self_
    OutMessage news = NewMessage();
    news->mutable_gossip();
    SendMsg(from, std::move(news), sender);
    assert(!tell_sender_self_);
  }
  reply_peer_.clear();
  FlushNotify();
  // A summary carries no table: it does not end the join's retries.
  if (!joined_ && (!live_.empty() || (msg.has_push_pull() && !msg.push_pull().summary()))) {
    joined_ = true;
    next_join_ = Time::max();
  }
}

void Membership::FlushNotify() {
  // At most kMaxNotify per call: a large merge must not fan out unboundedly.
  std::vector<std::string> names = std::exchange(notify_, {});
  if (names.size() > kMaxNotify) names.resize(kMaxNotify);
  for (const std::string& name : names) {
    const Member* m = FindMember(name);
    if (m == nullptr || m->state == MemberState::kAlive || m->state == MemberState::kLeft) continue;
    OutMessage msg = NewMessage();
    msg->mutable_gossip();
    SendMsg(AddressOf(*m), std::move(msg), name);  // carries the accusation first
  }
}

void Membership::HandlePing(const Address& from, const std::string& sender, const wire::MemberPing& p) {
  if (!p.target().empty() && p.target() != config_.self_name) return Reject("target");
  OutMessage reply = NewMessage();
  reply->mutable_ack()->set_seq(p.seq());
  SendMsg(from, std::move(reply), sender, /*reliable=*/p.reliable());
}

void Membership::HandleAck(const std::string& sender, const wire::MemberAck& a, Time now) {
  if (probe_ && !probe_->acked && a.seq() == probe_->seq &&
      (sender == probe_->target ||
       std::find(probe_->helpers.begin(), probe_->helpers.end(), sender) != probe_->helpers.end())) {
    probe_->acked = true;
    // The round trip of the direct ping only: an ack after the indirect
    // phase began may answer the stream ping, sent probe_timeout later.
    if (sender == probe_->target && now >= probe_->started && !probe_->indirect_sent) {
      if (Member* m = FindMember(sender); m != nullptr) {
        const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(now - probe_->started).count();
        m->probe_rtt_us = static_cast<int32_t>(std::min<int64_t>(us, Member::kMaxProbeRttUs));
      }
    }
    return;
  }
  auto relay = relays_.find(a.seq());
  if (relay != relays_.end() && relay->second.target == sender) {
    OutMessage fwd = NewMessage();
    fwd->mutable_ack()->set_seq(relay->second.origin_seq);
    const Address origin = relay->second.origin;
    const std::string origin_name = relay->second.origin_name;
    relays_.erase(relay);
    SendMsg(origin, std::move(fwd), origin_name);
    return;
  }
  Reject("unknown_ack");
}

void Membership::HandleNack(const std::string& sender, const wire::MemberNack& n) {
  if (!probe_ || probe_->acked || n.seq() != probe_->seq ||
      std::find(probe_->helpers.begin(), probe_->helpers.end(), sender) == probe_->helpers.end()) {
    return Reject("unknown_nack");  // late (the probe concluded), or not asked
  }
  if (std::find(probe_->nacked.begin(), probe_->nacked.end(), sender) == probe_->nacked.end()) {
    probe_->nacked.push_back(sender);  // a duplicated datagram counts once
  }
}

void Membership::HandlePingReq(const Address& from, const std::string& sender, const wire::MemberPingReq& r,
                               Time now) {
  const Member* requester = FindMember(sender);
  if (requester == nullptr || !IsLive(*requester)) return Reject("unknown_sender");
  if (r.target() == config_.self_name || r.target() == sender) return Reject("target");
  if (relays_.size() >= kMaxRelays) return Reject("relays_full");
  // Prefer the address this node knows for the target over the requester's.
  const Member* target = FindMember(r.target());
  const Address to = target != nullptr ? AddressOf(*target) : r.target_address();
  const uint64_t seq = next_seq_++;
  // Lifeguard: nack at 80% of the probe timeout, so that the nack reaches the
  // prober (whose indirect probes went out a probe timeout into its interval)
  // before it judges the probe; the ack is still relayed up to the timeout.
  const bool nack = config_.lifeguard;
  relays_[seq] = Relay{from, sender, r.seq(), r.target(), now + config_.probe_timeout * 4 / 5, !nack,
                       now + config_.probe_timeout};
  OutMessage ping = NewMessage();
  ping->mutable_ping()->set_seq(seq);
  ping->mutable_ping()->set_target(r.target());
  SendMsg(to, std::move(ping), r.target());
}

void Membership::HandlePushPull(const Address& from, const std::string& sender, const wire::MemberPushPull& pp,
                                Time now) {
  if (pp.summary()) {
    if (pp.table_digest() == TableDigest()) return;  // equal tables: nothing to exchange
    OutMessage full = NewMessage();
    FillFullState(full->mutable_push_pull());  // not a reply: the sender answers with its own
    SendMsg(from, std::move(full), sender);
    return;
  }
  for (const auto& u : pp.members()) {
    Apply(u, /*from_full_state=*/true, now);
    TakeOwnWord(sender, u);
  }
  if (pp.reply()) return;
  OutMessage reply = NewMessage();
  auto* out = reply->mutable_push_pull();
  out->set_reply(true);
  FillFullState(out);
  SendMsg(from, std::move(reply), sender);
}

// ---------------------------------------------------------------- timers

void Membership::Tick(Time now) {
  if (config_.lifeguard && started_ && !left_) {
    const Time due = NextWakeup();
    if (due != Time::max() && now > due && now - due > config_.probe_timeout) RecoverFromStall(now);
  }
  RelayTick(now);
  SuspicionTick(now);
  if (!joined_ && now >= next_join_) JoinTick(now);
  if (probe_ && !probe_->acked && !probe_->indirect_sent && now >= probe_->started + probe_->timeout) {
    SendIndirect(now);
  }
  if (now >= next_probe_) ProbeTick(now);
  SuspicionTick(now);  // again: the probe's verdict may have confirmed a suspicion to now
  if (now >= next_gossip_) GossipTick(now);
  if (now >= next_push_pull_) PushPullTick(now);
  if (now >= next_reconnect_) ReconnectTick(now);
  FlushNotify();
}

void Membership::RecoverFromStall(Time now) {
  ++stalls_;
  AdjustHealth(1);
  // Answers to this node's probe may be unread: no verdict on it.
  probe_.reset();
  // Nor on the targets of relayed probes: no nacks for those that lapsed.
  for (auto& [seq, relay] : relays_) {
    if (relay.nack_at <= now) relay.nack_done = true;
  }
  // Refutations of lapsed suspicions may be unread too: one more interval.
  const Time grace = now + ProbeInterval();
  std::vector<std::string> lapsed;
  for (auto it = suspicions_.begin(); it != suspicions_.end() && it->first <= now; ++it) lapsed.push_back(it->second);
  for (const std::string& name : lapsed) {
    Member& m = *FindMember(name);
    suspicions_.erase({SuspicionOf(m).deadline, name});
    SuspicionOf(m).deadline = grace;
    suspicions_.insert({grace, name});
  }
}

void Membership::RelayTick(Time now) {
  for (auto it = relays_.begin(); it != relays_.end();) {
    Relay& relay = it->second;
    if (!relay.nack_done && relay.nack_at <= now) {
      relay.nack_done = true;
      OutMessage nack = NewMessage();
      nack->mutable_nack()->set_seq(relay.origin_seq);
      SendMsg(relay.origin, std::move(nack), relay.origin_name);
    }
    it = relay.deadline <= now ? relays_.erase(it) : std::next(it);
  }
}

void Membership::SuspicionTick(Time now) {
  // Each iteration removes the first entry (SetState erases it), so this ends.
  while (!suspicions_.empty() && suspicions_.begin()->first <= now) {
    Member& m = *FindMember(suspicions_.begin()->second);
    assert(m.state == MemberState::kSuspect);
    SetState(m, MemberState::kDead, m.incarnation, now);
  }
}

void Membership::WarmStart(const std::vector<std::pair<std::string, Address>>& members, Time now) {
  assert(members_->size() == 0);
  members_->Reserve(2 * std::min(members.size(), config_.max_members) + 2);  // a name and an address id each
  for (const auto& [name, address] : members) {
    assert(ValidName(name) && !address.empty() && address.size() <= kMaxAddressBytes);
    if (name == config_.self_name || FindMember(name) != nullptr) continue;
    if (members_->size() + 1 >= config_.max_members) break;
    Member& m = members_->Insert(name, address);  // alive at incarnation 0
    m.takes_compact = (config_.features & kMemberFeatureCompactFrames) != 0;
    m.last_change = now;
    others_digest_ += DigestOf(m);
    TrackLive(m);
  }
  ++view_version_;  // the probe order is built at the first probe
}

void Membership::JoinTick(Time now) {
  for (const Address& seed : seeds_) SendJoin(seed);
  next_join_ = now + config_.probe_interval;
}

std::optional<std::string> Membership::NextProbeTarget() {
  // Each pass either returns or advances probe_index_; at most one reshuffle.
  bool reshuffled = false;
  while (true) {
    if (probe_index_ >= probe_order_.size()) {
      if (reshuffled) return std::nullopt;
      reshuffled = true;
      // A fresh vector of the exact size: clear() would keep the capacity
      // of a round swollen by newcomers and evicted places.
      std::vector<MemberSlot> order;
      order.reserve(live_.size());
      // Slot order, then shuffled: sorting the names first (as before) was
      // 40% of a warm N=10,000 start in pollen-sim (perf).
      members_->ForEach([&](const Member& m) {
        if (IsLive(m)) order.push_back(m.slot);
      });
      assert(order.size() == live_.size());
      probe_order_ = std::move(order);
      for (size_t i = probe_order_.size(); i > 1; --i) std::swap(probe_order_[i - 1], probe_order_[rng_.Below(i)]);
      probe_index_ = 0;
      if (probe_order_.empty()) return std::nullopt;
    }
    // Hashed: a tree lookup here was 4% of pollen-sim's steady state at N=1000 (perf).
    const MemberSlot slot = probe_order_[probe_index_++];
    if (slot != kNoSlot && IsLive(members_->at(slot))) return NameOf(members_->at(slot));
  }
}

void Membership::ProbeTick(Time now) {
  // Remind the members this node suspects, soonest deadline first, so a
  // refutation lost once still arrives before the suspicion expires.
  for (auto it = suspicions_.begin(); it != suspicions_.end() && notify_.size() < kMaxNotify; ++it) {
    notify_.push_back(it->second);
  }
  if (probe_) {
    if (probe_->acked) {
      AdjustHealth(-1);
    } else {
      // Helpers that did not nack either failed too or never heard from this
      // node: either way, evidence that this node may be the slow one.
      const size_t missing = probe_->helpers.size() - probe_->nacked.size();
      AdjustHealth(probe_->helpers.empty() ? 1 : static_cast<int>(missing));
      Member* m = FindMember(probe_->target);
      if (m != nullptr && m->state == MemberState::kAlive) {
        SetState(*m, MemberState::kSuspect, m->incarnation, now, config_.self_name);
      } else if (m != nullptr && m->state == MemberState::kSuspect) {
        Confirm(*m, config_.self_name, now);
      }
    }
    probe_.reset();
  }
  // After the verdict: it may have changed the health score.
  next_probe_ = now + ProbeInterval();
  std::optional<std::string> target = NextProbeTarget();
  if (!target) return;
  probe_ = Probe{*target, next_seq_++, now, ProbeTimeout(), false, false, {}, {}};
  OutMessage ping = NewMessage();
  ping->mutable_ping()->set_seq(probe_->seq);
  ping->mutable_ping()->set_target(*target);
  SendMsg(AddressOf(*FindMember(*target)), std::move(ping), *target);
}

void Membership::SendIndirect(Time now) {
  probe_->indirect_sent = true;
  const Member* target = FindMember(probe_->target);
  if (target == nullptr || !IsLive(*target)) return;
  probe_->helpers = RandomMembers(config_.indirect_probes, &probe_->target, /*alive_only=*/true);
  for (const std::string& helper : probe_->helpers) {
    OutMessage req = NewMessage();
    auto* r = req->mutable_ping_req();
    r->set_seq(probe_->seq);
    r->set_target(probe_->target);
    r->set_target_address(AddressOf(*target));
    SendMsg(AddressOf(*FindMember(helper)), std::move(req), helper);
  }
  if (config_.reliable_fallback_ping) {
    // Loss of datagrams is not death: a stream is retransmitted until the
    // connection itself fails. pollen-sim N=10,000 at 10% loss: 431 false
    // suspicions in 15 s without it (simulation/README.md).
    OutMessage ping = NewMessage();
    ping->mutable_ping()->set_seq(probe_->seq);
    ping->mutable_ping()->set_target(probe_->target);
    ping->mutable_ping()->set_reliable(true);
    SendMsg(AddressOf(*target), std::move(ping), probe_->target, /*reliable=*/true);
  }
}

void Membership::GossipTick(Time now) {
  next_gossip_ = now + config_.gossip_interval;
  if (queue_.empty()) return;
  for (const std::string& name : RandomMembers(config_.gossip_fanout, nullptr, /*alive_only=*/false)) {
    if (queue_.empty()) break;
    OutMessage msg = NewMessage();
    msg->mutable_gossip();
    SendMsg(AddressOf(*FindMember(name)), std::move(msg), name);
  }
}

void Membership::PushPullTick(Time now) {
  next_push_pull_ = now + config_.probe_interval * config_.push_pull_every * PushPullScale();
  std::vector<std::string> peer = RandomMembers(1, nullptr, /*alive_only=*/false);
  if (peer.empty()) return;
  // A summary first: between equal tables that is the whole exchange, one
  // datagram instead of two full lists (at N=10,000, 500 KB each way; the
  // lists were half of pollen-sim's steady-state CPU there).
  OutMessage msg = NewMessage();
  auto* pp = msg->mutable_push_pull();
  pp->set_summary(true);
  pp->set_table_digest(TableDigest());
  SendMsg(AddressOf(*FindMember(peer[0])), std::move(msg), peer[0]);
}

void Membership::ReconnectTick(Time now) {
  next_reconnect_ = now + config_.dead_reconnect_interval;
  std::vector<const Member*> dead;
  dead.reserve(dead_count_);
  // At N=1000 a walk of the whole table every 30 s was 6% of pollen-sim's
  // steady-state CPU (perf); without dead members it is skipped. (dead_count_
  // is checked against the table in
  // Membership.LiveSetMatchesTheTableUnderRandomUpdates.)
  // In name order, so the pick depends on which members are dead, not on the
  // order they entered the table; only the dead are sorted.
  if (dead_count_ > 0) {
    members_->ForEach([&](const Member& m) {
      if (m.state == MemberState::kDead) dead.push_back(&m);
    });
    std::sort(dead.begin(), dead.end(), [this](const Member* a, const Member* b) { return NameOf(*a) < NameOf(*b); });
  }
  if (!dead.empty()) {
    SendJoin(AddressOf(*dead[rng_.Below(dead.size())]));
  } else if (live_.empty() && !seeds_.empty()) {
    SendJoin(seeds_[rng_.Below(seeds_.size())]);
  }
}

}  // namespace pollen::node
