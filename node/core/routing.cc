#include "node/core/routing.h"

#include <cassert>
#include <tuple>

#include "crdt/mix64.h"

namespace pollen::node {
namespace {

// A filter id no filter may carry (crdt::ValidateParams refuses it), so the
// routing key is independent of every filter key.
constexpr uint64_t kRouteKeyId = crdt::kRoutingKeyId;


}  // namespace

Rendezvous::Rendezvous(const crdt::ClusterSecret& secret) : key_(crdt::DeriveSipKey(secret, kRouteKeyId, 0)) {}

void Rendezvous::Reset(const std::vector<std::string>& names) {
  candidates_.clear();
  candidates_.reserve(names.size());
  for (const std::string& name : names) candidates_.push_back(Candidate{name, crdt::SipHash24(key_, name)});
}

std::pair<const std::string*, const std::string*> Rendezvous::TopTwo(uint64_t key_hash) const {
  const Candidate* best = nullptr;
  const Candidate* second = nullptr;
  uint64_t best_score = 0, second_score = 0;
  auto beats = [](uint64_t score, const Candidate& c, uint64_t other_score, const Candidate* other) {
    return other == nullptr || std::tie(score, c.name) > std::tie(other_score, other->name);
  };
  for (const Candidate& c : candidates_) {
    // Mix64 spreads every bit: the score of (key, member) depends on all bits of both hashes.
    const uint64_t score = crdt::Mix64(key_hash ^ c.hash);
    if (beats(score, c, best_score, best)) {
      second = best;
      second_score = best_score;
      best = &c;
      best_score = score;
    } else if (beats(score, c, second_score, second)) {
      second = &c;
      second_score = score;
    }
  }
  return {best != nullptr ? &best->name : nullptr, second != nullptr ? &second->name : nullptr};
}

const AnswerMemory::Answer* AnswerMemory::Find(const std::string& asker, uint64_t id) const {
  auto it = answers_.find({asker, id});
  return it == answers_.end() ? nullptr : &it->second;
}

void AnswerMemory::Remember(const std::string& asker, uint64_t id, Answer answer, Time now) {
  while (!order_.empty() && (order_.front().first + kRouteAnswerRetention < now || order_.size() >= kRouteAnswerMemory)) {
    answers_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!answers_.emplace(std::make_pair(asker, id), std::move(answer)).second) return;
  order_.emplace_back(now, std::make_pair(asker, id));
  assert(answers_.size() == order_.size());
}

bool StandIns::FirstTime(uint64_t key_hash, Time now) {
  while (!order_.empty() && (order_.front().first + kRouteAnswerRetention < now || order_.size() >= kRouteAnswerMemory)) {
    keys_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!keys_.insert(key_hash).second) return false;
  order_.emplace_back(now, key_hash);
  return true;
}

}  // namespace pollen::node
