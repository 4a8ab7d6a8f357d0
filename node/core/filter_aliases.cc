#include "node/core/filter_aliases.h"

#include <algorithm>
#include <cassert>
#include <limits>

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
    // Full, or out of numbers (2^32 forgets in one stream): compact only.
    if (l.sent.size() >= kMaxPerLink || l.next_alias == std::numeric_limits<uint32_t>::max()) return Form{};
    it = l.sent.emplace(std::make_pair(target.name, target.digest), Sent{l.next_alias++, seq}).first;
  }
  const Sent& s = it->second;
  return Form{s.alias, /*define=*/acked < s.defined_in};
}

void FilterAliases::Forget(const std::string& link) {
  auto it = links_.find(link);
  if (it != links_.end()) it->second.sent.clear();  // next_alias goes on: numbers are not reused
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
