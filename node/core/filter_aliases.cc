#include "node/core/filter_aliases.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "crdt/generations.h"
#include "node/core/catalog.h"

namespace pollen::node {

FilterAliases::Form FilterAliases::ForPush(const std::string& link, uint32_t stream, const Target& target,
                                           uint64_t seq, uint64_t acked) {
  assert(stream != 0 && seq != 0 && target.digest != 0);
  Link& l = links_[link];
  if (l.stream != stream) {  // a new stream: the receiver starts afresh too
    l.stream = stream;
    l.next_alias = 1;
    l.sent.clear();
  }
  auto it = l.sent.find({target.name, target.digest});
  if (it == l.sent.end()) {
    // Out of numbers (2^32 forgets and filters in one stream): compact
    // references until the link's stream changes.
    if (l.next_alias == std::numeric_limits<uint32_t>::max()) return Form{};
    if (l.sent.size() == kMaxPerLink) {  // the lowest number goes: the rest stay the highest assigned
      l.sent.erase(std::min_element(l.sent.begin(), l.sent.end(), [](const auto& a, const auto& b) {
        return a.second.alias < b.second.alias;
      }));
    }
    it = l.sent.emplace(std::make_pair(target.name, target.digest), Sent{l.next_alias++, seq}).first;
  }
  assert(l.sent.size() <= kMaxPerLink);
  assert(it->second.alias + kMaxPerLink >= l.next_alias);  // among the kMaxPerLink highest assigned
  return Form{it->second.alias, /*define=*/acked < it->second.defined_in};
}

void FilterAliases::Forget(const std::string& link) {
  auto it = links_.find(link);
  if (it != links_.end()) it->second.sent.clear();  // next_alias goes on: numbers are not reused
}

bool FilterAliases::HasAlias(const wire::Gossip& push) {
  return std::any_of(push.deltas().begin(), push.deltas().end(),
                     [](const wire::Delta& d) { return d.filter().alias() != 0; });
}

FilterAliases::Expansion FilterAliases::Expand(const std::string& link, uint32_t stream, uint64_t seq,
                                               wire::Gossip* push, Definitions* defined) const {
  if (!HasAlias(*push)) return Expansion::kNone;
  if (seq == 0 || stream == 0) return Expansion::kMalformed;  // aliases live in a delivery stream
  // Definitions first: a push may define an alias and use it again.
  for (wire::Delta& d : *push->mutable_deltas()) {
    wire::FilterRef& ref = *d.mutable_filter();
    if (ref.alias() == 0 || ref.digest() == 0) continue;
    if (!IsCompactRef(ref) || ref.name().size() > crdt::kMaxFilterNameBytes) return Expansion::kMalformed;
    const Target target{ref.name(), ref.digest()};
    // A number means one reference for the stream's lifetime.
    const Target* known = Find(link, stream, ref.alias());
    if (known != nullptr && *known != target) return Expansion::kMalformed;
    for (const auto& [alias, t] : *defined) {
      if (alias == ref.alias() && t != target) return Expansion::kMalformed;
    }
    defined->emplace_back(ref.alias(), target);
    ref.clear_alias();
  }
  for (wire::Delta& d : *push->mutable_deltas()) {
    wire::FilterRef& ref = *d.mutable_filter();
    if (ref.alias() == 0) continue;
    const uint32_t alias = ref.alias();
    ref.clear_alias();
    if (ref.ByteSizeLong() != 0) return Expansion::kMalformed;  // an alias beside full parameters
    const Target* target = Find(link, stream, alias);
    for (const auto& [a, t] : *defined) {
      if (a == alias) target = &t;
    }
    if (target == nullptr) return Expansion::kUnknown;
    ref.set_name(target->name);
    ref.set_digest(target->digest);
  }
  return Expansion::kExpanded;
}

void FilterAliases::Learn(const std::string& link, uint32_t stream, uint32_t alias, const Target& target) {
  assert(stream != 0 && alias != 0 && target.digest != 0);
  Link& l = links_[link];
  if (l.rx_stream != stream) {
    l.rx_stream = stream;
    l.received.clear();
  }
  l.received[alias] = target;
  if (l.received.size() > kMaxPerLink) l.received.erase(l.received.begin());  // the lowest number
}

const FilterAliases::Target* FilterAliases::Find(const std::string& link, uint32_t stream, uint32_t alias) const {
  auto it = links_.find(link);
  if (it == links_.end() || it->second.rx_stream != stream) return nullptr;
  auto t = it->second.received.find(alias);
  return t == it->second.received.end() ? nullptr : &t->second;
}

void FilterAliases::Retain(const std::vector<std::string>& links) {
  assert(std::is_sorted(links.begin(), links.end()));
  std::erase_if(links_, [&](const auto& entry) { return !std::binary_search(links.begin(), links.end(), entry.first); });
}

}  // namespace pollen::node
