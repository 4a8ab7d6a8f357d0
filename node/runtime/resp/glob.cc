#include "node/runtime/resp/glob.h"

#include <cstddef>
#include <utility>

namespace pollen::resp {
namespace {

// Matches one pattern element (not `*`) at p[*pi] against byte c; advances *pi
// past the element. A class without its closing `]` runs to the end of the
// pattern, as in Redis.
bool MatchOne(std::string_view p, size_t* pi, unsigned char c) {
  size_t i = *pi;
  if (p[i] == '?') {
    *pi = i + 1;
    return true;
  }
  if (p[i] == '\\' && i + 1 < p.size()) {
    *pi = i + 2;
    return static_cast<unsigned char>(p[i + 1]) == c;
  }
  if (p[i] != '[') {
    *pi = i + 1;
    return static_cast<unsigned char>(p[i]) == c;
  }
  ++i;
  const bool negate = i < p.size() && p[i] == '^';
  if (negate) ++i;
  bool hit = false;
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '\\' && i + 1 < p.size()) {
      hit |= static_cast<unsigned char>(p[i + 1]) == c;
      i += 2;
    } else if (i + 2 < p.size() && p[i + 1] == '-') {
      unsigned char lo = static_cast<unsigned char>(p[i]), hi = static_cast<unsigned char>(p[i + 2]);
      if (lo > hi) std::swap(lo, hi);
      hit |= c >= lo && c <= hi;
      i += 3;
    } else {
      hit |= static_cast<unsigned char>(p[i]) == c;
      ++i;
    }
  }
  *pi = i < p.size() ? i + 1 : i;
  return hit != negate;
}

}  // namespace

// Greedy matching with one backtrack point (the last `*`): O(|p|·|t|), no
// recursion, so a hostile pattern cannot blow the stack or take exponential time.
bool GlobMatch(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      while (pi < p.size() && p[pi] == '*') ++pi;
      star_p = pi;
      star_t = ti;
      continue;
    }
    size_t next = pi;
    if (pi < p.size() && MatchOne(p, &next, static_cast<unsigned char>(t[ti]))) {
      pi = next;
      ++ti;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p;  // let the last star swallow one more byte
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace pollen::resp
