// Fuzzes StreamDeframer: the input is fed in chunks whose sizes come from the
// input itself. Every frame produced must be non-empty and within the max,
// buffering must stay bounded, and feeding the same bytes in one piece must
// give the same frames and the same final state.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/stream_framer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::protocol;
  constexpr size_t kMax = 300;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  StreamDeframer chunked(kMax), whole(kMax);
  std::vector<std::string> a, b;
  bool chunked_ok = true;
  size_t i = 0, step = 0;
  while (i < all.size()) {
    const size_t n = 1 + static_cast<uint8_t>(all[step++ % all.size()]) % 17;
    const std::string_view piece = all.substr(i, n);
    i += piece.size();
    chunked_ok = chunked.Feed(piece, &a).ok() && chunked_ok;
    if (chunked.buffered_bytes() > kMax + kStreamLengthPrefixBytes) std::abort();
  }
  const bool whole_ok = whole.Feed(all, &b).ok();
  if (a != b || chunked_ok != whole_ok || chunked.failed() != whole.failed()) std::abort();
  for (const auto& f : a) {
    if (f.empty() || f.size() > kMax) std::abort();
  }
  // Re-framing what came out reproduces a prefix of the input.
  std::string reframed;
  for (const auto& f : a) reframed += FrameForStream(f);
  if (all.substr(0, reframed.size()) != reframed) std::abort();
  return 0;
}
