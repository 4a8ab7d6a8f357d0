#include "protocol/stream_framer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pollen::protocol {

std::array<char, kStreamLengthPrefixBytes> StreamLengthPrefix(size_t sealed_bytes) {
  if (sealed_bytes == 0 || sealed_bytes > kMaxFrameBytes) {
    std::fprintf(stderr, "pollen StreamLengthPrefix: frame of %zu bytes out of range\n", sealed_bytes);
    std::abort();
  }
  std::array<char, kStreamLengthPrefixBytes> prefix;
  const auto len = static_cast<uint32_t>(sealed_bytes);
  for (size_t i = 0; i < kStreamLengthPrefixBytes; ++i) prefix[i] = static_cast<char>(len >> (8 * i));
  return prefix;
}

std::string FrameForStream(std::string_view sealed) {
  const std::array<char, kStreamLengthPrefixBytes> prefix = StreamLengthPrefix(sealed.size());
  std::string out(prefix.begin(), prefix.end());
  out.append(sealed);
  return out;
}

StreamDeframer::StreamDeframer(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {
  if (max_frame_bytes == 0 || max_frame_bytes > 0xffffffffu) {
    std::fprintf(stderr, "pollen StreamDeframer: max_frame_bytes %zu out of range\n", max_frame_bytes);
    std::abort();
  }
}

absl::Status StreamDeframer::Feed(std::string_view bytes, std::vector<std::string>* frames) {
  if (!error_.ok()) return error_;
  while (!bytes.empty()) {
    if (header_filled_ < kStreamLengthPrefixBytes) {
      const size_t take = std::min(kStreamLengthPrefixBytes - header_filled_, bytes.size());
      std::copy_n(bytes.data(), take, header_ + header_filled_);
      header_filled_ += take;
      bytes.remove_prefix(take);
      if (header_filled_ < kStreamLengthPrefixBytes) break;
      uint32_t len = 0;
      for (size_t i = kStreamLengthPrefixBytes; i-- > 0;) len = (len << 8) | header_[i];
      if (len == 0 || len > max_frame_bytes_) {
        error_ = absl::InvalidArgumentError(absl::StrCat("ERR stream frame length ", len, " outside [1, ",
                                                         max_frame_bytes_, "]"));
        header_filled_ = 0;
        body_.clear();
        body_.shrink_to_fit();
        return error_;
      }
      body_len_ = len;
      continue;
    }
    const size_t take = std::min(body_len_ - body_.size(), bytes.size());
    body_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (body_.size() == body_len_) {
      frames->push_back(std::move(body_));
      body_ = std::string();
      header_filled_ = 0;
      body_len_ = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace pollen::protocol
